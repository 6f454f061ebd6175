use super::*;

#[test]
fn go_rounding() {
    assert_eq!(procs_for(None, 8), 8);
    assert_eq!(procs_for(Some(1.5), 8), 2);
    assert_eq!(procs_for(Some(0.5), 8), 2);
    assert_eq!(procs_for(Some(0.5), 1), 1);
    assert_eq!(procs_for(Some(2.1), 8), 3);
    assert_eq!(procs_for(Some(12.0), 8), 8);
}

#[test]
fn parses_proc_files() {
    let cg = "12:cpu,cpuacct:/docker/abc\n0::/user.slice\n";
    assert_eq!(own_cgroup(cg), Some((true, "/docker/abc".into())));
    assert_eq!(own_cgroup("0::/a/b\n"), Some((false, "/a/b".into())));
    assert_eq!(own_cgroup("1:name=systemd:/\n"), None);
    let mi = "31 23 0:28 / /sys/fs/cgroup rw - tmpfs tmpfs rw\n\
              32 31 0:29 /docker /sys/fs/cgroup/cpu rw,relatime shared:9 - cgroup cgroup rw,cpu,cpuacct\n\
              40 31 0:37 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw\n";
    assert_eq!(
        mount_of(mi, true),
        Some(("/docker".into(), "/sys/fs/cgroup/cpu".into()))
    );
    assert_eq!(
        mount_of(mi, false),
        Some(("/".into(), "/sys/fs/cgroup/unified".into()))
    );
    assert_eq!(unescape("/a\\040b"), "/a b");
}

fn fake_tree(v1: bool, levels: &[(&str, &str)]) -> tempdir::Dir {
    let d = tempdir::Dir::new();
    let root = d.path();
    std::fs::create_dir_all(root.join("proc/self")).unwrap();
    if v1 {
        std::fs::write(root.join("proc/self/cgroup"), "4:cpu,cpuacct:/a/b\n").unwrap();
        std::fs::write(
            root.join("proc/self/mountinfo"),
            "32 31 0:29 / /cg/cpu rw - cgroup cgroup rw,cpu,cpuacct\n",
        )
        .unwrap();
    } else {
        std::fs::write(root.join("proc/self/cgroup"), "0::/a/b\n").unwrap();
        std::fs::write(
            root.join("proc/self/mountinfo"),
            "40 31 0:37 / /cg rw - cgroup2 cgroup2 rw\n",
        )
        .unwrap();
    }
    let base = if v1 { "cg/cpu" } else { "cg" };
    for (dir, limit) in levels {
        let p = root.join(base).join(dir);
        std::fs::create_dir_all(&p).unwrap();
        if v1 {
            let (q, per) = limit.split_once(' ').unwrap();
            std::fs::write(p.join("cpu.cfs_quota_us"), q).unwrap();
            std::fs::write(p.join("cpu.cfs_period_us"), per).unwrap();
        } else {
            std::fs::write(p.join("cpu.max"), limit).unwrap();
        }
    }
    d
}

#[test]
fn v2_leaf_and_parent_limits() {
    let d = fake_tree(false, &[("a/b", "150000 100000\n"), ("a", "max 100000\n")]);
    let l = CpuLimit::open(d.path()).unwrap();
    assert_eq!(l.read(), Some(1.5));
    // A tighter parent above an unlimited leaf wins.
    std::fs::write(d.path().join("cg/a/b/cpu.max"), "max 100000\n").unwrap();
    std::fs::write(d.path().join("cg/a/cpu.max"), "100000 100000\n").unwrap();
    assert_eq!(l.read(), Some(1.0));
    // Changed in place: the open files see it.
    std::fs::write(d.path().join("cg/a/cpu.max"), "max 100000\n").unwrap();
    assert_eq!(l.read(), None);
}

#[test]
fn v1_levels() {
    let d = fake_tree(
        true,
        &[
            ("a/b", "-1 100000"),
            ("a", "250000 100000"),
            ("", "-1 100000"),
        ],
    );
    let l = CpuLimit::open(d.path()).unwrap();
    assert_eq!(l.read(), Some(2.5));
}

#[test]
fn no_cgroup_files_is_no_limit() {
    let d = tempdir::Dir::new();
    assert!(CpuLimit::open(d.path()).is_none());
}

/// A directory removed on drop (no dependency for two tests).
mod tempdir {
    pub(super) struct Dir(std::path::PathBuf);
    impl Dir {
        pub(super) fn new() -> Dir {
            use std::sync::atomic::{AtomicU32, Ordering};
            static N: AtomicU32 = AtomicU32::new(0);
            let p = std::env::temp_dir().join(format!(
                "goroutine-cgroup-{}-{}",
                std::process::id(),
                N.fetch_add(1, Ordering::Relaxed)
            ));
            std::fs::create_dir_all(&p).unwrap();
            Dir(p)
        }
        pub(super) fn path(&self) -> &std::path::Path {
            &self.0
        }
    }
    impl Drop for Dir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}
