//! GOMAXPROCS's default follows the cgroup CPU limit (Go 1.25's rule: the
//! limit rounded up, at least 2 unless fewer CPUs are available, the
//! tightest of the cgroup and its parents), tested in real cgroups: a
//! cgroup v1 `cpu` hierarchy the test can write (root on most Linux boxes
//! and CI machines). Where none is writable the tests print SKIPPED; the
//! reading itself is also tested on fake trees (`sys::cgroup`'s unit
//! tests).

mod common;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The directory of our own cgroup in a writable v1 `cpu` hierarchy.
fn own_cpu_cgroup() -> Option<PathBuf> {
    let cg = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let path = cg.lines().find_map(|l| {
        let mut p = l.splitn(3, ':');
        let (_, ctl, path) = (p.next()?, p.next()?, p.next()?);
        ctl.split(',').any(|c| c == "cpu").then(|| path.to_owned())
    })?;
    let mi = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    let (root, point) = mi.lines().find_map(|l| {
        let (pre, post) = l.split_once(" - ")?;
        let pre: Vec<&str> = pre.split(' ').collect();
        let post: Vec<&str> = post.split(' ').collect();
        (post.first() == Some(&"cgroup") && post.get(2)?.split(',').any(|o| o == "cpu"))
            .then(|| (pre[3].to_owned(), pre[4].to_owned()))
    })?;
    let below = Path::new(&path).strip_prefix(&root).ok()?.to_path_buf();
    Some(Path::new(&point).join(below))
}

/// A test cgroup `parent/leaf` under ours, removed on drop.
struct TestCgroup {
    parent: PathBuf,
    leaf: PathBuf,
}

impl TestCgroup {
    fn new(tag: &str) -> Option<TestCgroup> {
        let parent = own_cpu_cgroup()?.join(format!("goroutine-test-{}-{tag}", std::process::id()));
        std::fs::create_dir(&parent).ok()?;
        let leaf = parent.join("leaf");
        if std::fs::create_dir(&leaf).is_err() {
            let _ = std::fs::remove_dir(&parent);
            return None;
        }
        Some(TestCgroup { parent, leaf })
    }

    fn quota(dir: &Path, quota_us: i64) {
        std::fs::write(dir.join("cpu.cfs_period_us"), "100000").unwrap();
        std::fs::write(dir.join("cpu.cfs_quota_us"), quota_us.to_string()).unwrap();
    }
}

impl Drop for TestCgroup {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir(&self.leaf);
        let _ = std::fs::remove_dir(&self.parent);
    }
}

/// The CPUs of the affinity mask (std's `available_parallelism` also
/// applies the cgroup quota, rounded down).
fn affinity_cpus() -> usize {
    // SAFETY: a zeroed cpu_set_t is a valid empty set.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        assert_eq!(
            libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set),
            0
        );
        libc::CPU_COUNT(&set) as usize
    }
}

/// Go's rule, for the assertions.
fn procs_for(limit: f64, cpus: usize) -> usize {
    (limit.ceil() as usize).max(2).min(cpus).max(1)
}

/// The child: joins the cgroup `CG_LEAF` names, then starts the runtime
/// and reports what it chose.
#[test]
fn cgroup_child() {
    if !common::is_child("cgroup_child") {
        return;
    }
    let leaf = std::env::var("CG_LEAF").unwrap();
    std::fs::write(
        Path::new(&leaf).join("cgroup.procs"),
        std::process::id().to_string(),
    )
    .unwrap();
    let limit = goroutine::__test::cgroup_cpu_limit();
    println!("limit={limit:?} procs={}", goroutine::max_procs());
    if std::env::var("CG_CHANGE").is_ok() {
        // Lower the limit at run time: sysmon's next read resizes.
        std::fs::write(Path::new(&leaf).join("cpu.cfs_quota_us"), "100000").unwrap();
        let want = procs_for(1.0, affinity_cpus());
        let t = Instant::now();
        while goroutine::max_procs() != want && t.elapsed() < Duration::from_secs(20) {
            std::thread::sleep(Duration::from_millis(50));
        }
        println!(
            "changed limit={:?} procs={}",
            goroutine::__test::cgroup_cpu_limit(),
            goroutine::max_procs()
        );
    }
}

fn run_child(cg: &TestCgroup, env: &[(&str, &str)]) -> String {
    let leaf = cg.leaf.to_string_lossy().into_owned();
    let mut all = vec![("CG_LEAF", leaf.as_str())];
    all.extend_from_slice(env);
    let out = common::spawn("cgroup_child", &all);
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

#[test]
fn a_fractional_quota_rounds_up_to_at_least_two() {
    let Some(cg) = TestCgroup::new("frac") else {
        println!("SKIPPED: no writable cgroup v1 cpu hierarchy");
        return;
    };
    TestCgroup::quota(&cg.leaf, 150_000);
    let out = run_child(&cg, &[]);
    let want = procs_for(1.5, affinity_cpus());
    assert!(
        out.contains(&format!("limit=Some(1.5) procs={want}")),
        "{out}"
    );
}

#[test]
fn a_parent_limit_above_an_unlimited_leaf_counts() {
    let Some(cg) = TestCgroup::new("parent") else {
        println!("SKIPPED: no writable cgroup v1 cpu hierarchy");
        return;
    };
    TestCgroup::quota(&cg.parent, 100_000);
    TestCgroup::quota(&cg.leaf, -1);
    let out = run_child(&cg, &[]);
    let want = procs_for(1.0, affinity_cpus());
    assert!(
        out.contains(&format!("limit=Some(1.0) procs={want}")),
        "{out}"
    );
}

#[test]
fn a_limit_changed_at_run_time_resizes() {
    let Some(cg) = TestCgroup::new("change") else {
        println!("SKIPPED: no writable cgroup v1 cpu hierarchy");
        return;
    };
    TestCgroup::quota(&cg.leaf, -1);
    let out = run_child(&cg, &[("CG_CHANGE", "1")]);
    let cpus = affinity_cpus();
    assert!(out.contains(&format!("limit=None procs={cpus}")), "{out}");
    let want = procs_for(1.0, cpus);
    assert!(
        out.contains(&format!("changed limit=Some(1.0) procs={want}")),
        "{out}"
    );
    if want == cpus {
        println!("note: {cpus} CPUs: the rule's minimum of 2 leaves GOMAXPROCS unchanged here");
    }
}

#[test]
fn an_explicit_gomaxprocs_is_not_overridden() {
    let Some(cg) = TestCgroup::new("explicit") else {
        println!("SKIPPED: no writable cgroup v1 cpu hierarchy");
        return;
    };
    TestCgroup::quota(&cg.leaf, 100_000);
    let out = run_child(&cg, &[("GOMAXPROCS", "3")]);
    assert!(out.contains("procs=3"), "{out}");
}
