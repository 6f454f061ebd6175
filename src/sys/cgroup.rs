//! The CPU limit of the process's cgroup, for GOMAXPROCS's default (Go
//! 1.25's container-aware GOMAXPROCS).
//!
//! # What is read
//! - `/proc/self/cgroup` names the process's cgroup: on cgroup v1 the line
//!   whose controllers include `cpu`, else the v2 line (`0::/path`). A
//!   controller lives in one hierarchy only, so a v1 `cpu` line means the
//!   v2 tree has no CPU limit to give.
//! - `/proc/self/mountinfo` says where that hierarchy is mounted, and which
//!   of its directories the mount shows (its root field): the cgroup's
//!   directory is the mount point plus the cgroup path below that root. A
//!   path outside the mount's root (a v1 mount of a sub-tree, golang/go
//!   #76390) falls back to the mount point itself.
//! - Every directory from the cgroup's up to the mount point is a limit:
//!   `cpu.max` (`$QUOTA $PERIOD`, or `max`) on v2, `cpu.cfs_quota_us` and
//!   `cpu.cfs_period_us` (`-1`: none) on v1. The tightest wins, so a parent
//!   limited to 1 CPU above an unlimited leaf gives 1 (Go reads only the
//!   leaf: golang/go#81180).
//!
//! The files are opened once ([`CpuLimit::open`]) and re-read in place
//! ([`CpuLimit::read`], `pread` from offset 0), as Go does: sysmon re-reads
//! them every second without a path walk, and a limit changed at run time
//! (`docker update --cpus`) is seen. Paths are taken relative to a root
//! directory (`/` in production) so that tests can lay out a fake
//! `/proc/self` and cgroup tree.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

/// One level's limit files.
enum Level {
    V2 { max: File },
    V1 { quota: File, period: File },
}

/// The open limit files of the process's cgroup and its ancestors.
pub(crate) struct CpuLimit {
    levels: Vec<Level>,
}

impl CpuLimit {
    /// Finds the process's cgroup under `root` and opens the limit files of
    /// every level that has them. `None` when there is no cgroup, no mount
    /// or no limit file at any level (then there is nothing to re-read).
    pub(crate) fn open(root: &Path) -> Option<CpuLimit> {
        let cgroup = std::fs::read_to_string(root.join("proc/self/cgroup")).ok()?;
        let mountinfo = std::fs::read_to_string(root.join("proc/self/mountinfo")).ok()?;
        let (v1, path) = own_cgroup(&cgroup)?;
        let (mount_root, mount_point) = mount_of(&mountinfo, v1)?;
        let mount_point = root.join(mount_point.trim_start_matches('/'));
        let below = Path::new(&path)
            .strip_prefix(&mount_root)
            .map(Path::to_path_buf)
            .unwrap_or_default();
        let mut dir: PathBuf = mount_point.join(below);
        let mut levels = Vec::new();
        loop {
            let level = if v1 {
                match (
                    File::open(dir.join("cpu.cfs_quota_us")),
                    File::open(dir.join("cpu.cfs_period_us")),
                ) {
                    (Ok(quota), Ok(period)) => Some(Level::V1 { quota, period }),
                    _ => None,
                }
            } else {
                File::open(dir.join("cpu.max"))
                    .ok()
                    .map(|max| Level::V2 { max })
            };
            levels.extend(level);
            if dir == mount_point || !dir.pop() || !dir.starts_with(&mount_point) {
                break;
            }
        }
        (!levels.is_empty()).then_some(CpuLimit { levels })
    }

    /// The tightest limit now, in CPUs (quota / period); `None`: unlimited
    /// at every level (or unreadable).
    pub(crate) fn read(&self) -> Option<f64> {
        let mut tightest: Option<f64> = None;
        for level in &self.levels {
            let cpus = match level {
                Level::V2 { max } => {
                    let text = read_at_start(max)?;
                    let mut it = text.split_whitespace();
                    let quota = it.next()?;
                    let period: f64 = it.next().and_then(|p| p.parse().ok()).unwrap_or(100_000.0);
                    if quota == "max" {
                        None
                    } else {
                        quota.parse::<f64>().ok().map(|q| q / period)
                    }
                }
                Level::V1 { quota, period } => {
                    let q: i64 = read_at_start(quota)?.trim().parse().ok()?;
                    let p: i64 = read_at_start(period)?.trim().parse().ok()?;
                    (q > 0 && p > 0).then(|| q as f64 / p as f64)
                }
            };
            if let Some(c) = cpus.filter(|c| *c > 0.0) {
                tightest = Some(tightest.map_or(c, |t: f64| t.min(c)));
            }
        }
        tightest
    }
}

/// The whole (small) file, read from offset 0 without moving any cursor.
fn read_at_start(f: &File) -> Option<String> {
    let mut buf = [0u8; 128];
    let n = f.read_at(&mut buf, 0).ok()?;
    Some(String::from_utf8_lossy(&buf[..n]).into_owned())
}

/// From `/proc/self/cgroup`: whether the CPU controller is on v1, and the
/// cgroup's path in its hierarchy.
fn own_cgroup(text: &str) -> Option<(bool, String)> {
    let mut v2 = None;
    for line in text.lines() {
        let mut parts = line.splitn(3, ':');
        let (Some(id), Some(controllers), Some(path)) = (parts.next(), parts.next(), parts.next())
        else {
            continue;
        };
        if id == "0" && controllers.is_empty() {
            v2 = Some(path.to_owned());
        } else if controllers.split(',').any(|c| c == "cpu") {
            return Some((true, path.to_owned()));
        }
    }
    v2.map(|p| (false, p))
}

/// From `/proc/self/mountinfo`: the mounted root and the mount point of
/// the v1 `cpu` hierarchy (`v1`) or of the v2 hierarchy.
fn mount_of(text: &str, v1: bool) -> Option<(String, String)> {
    for line in text.lines() {
        // `id parent dev root mountpoint opts [optional...] - fstype source superopts`
        let Some((pre, post)) = line.split_once(" - ") else {
            continue;
        };
        let pre: Vec<&str> = pre.split(' ').collect();
        let post: Vec<&str> = post.split(' ').collect();
        if pre.len() < 5 || post.len() < 3 {
            continue;
        }
        let found = if v1 {
            post[0] == "cgroup" && post[2].split(',').any(|o| o == "cpu")
        } else {
            post[0] == "cgroup2"
        };
        if found {
            return Some((unescape(pre[3]), unescape(pre[4])));
        }
    }
    None
}

/// mountinfo escapes space, tab, newline and backslash as `\ooo`.
fn unescape(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\' && i + 4 <= b.len() {
            if let Some(v) = std::str::from_utf8(&b[i + 1..i + 4])
                .ok()
                .and_then(|d| u8::from_str_radix(d, 8).ok())
            {
                out.push(v);
                i += 4;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Go 1.25's rule: the limit rounded up, at least 2 unless fewer CPUs are
/// available, never more than the CPUs available (`cpus`, the affinity
/// mask's count).
pub(crate) fn procs_for(limit: Option<f64>, cpus: usize) -> usize {
    match limit {
        None => cpus,
        Some(l) => {
            let up = l.ceil().max(1.0) as usize;
            up.max(2).min(cpus).max(1)
        }
    }
}

/// The CPUs in the calling thread's affinity mask (at least 1).
pub(crate) fn affinity_cpus() -> usize {
    // SAFETY: a zeroed cpu_set_t is a valid empty set; sched_getaffinity
    // writes at most its size.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) == 0 {
            let n = libc::CPU_COUNT(&set);
            if n > 0 {
                return n as usize;
            }
        }
    }
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

#[cfg(test)]
mod tests;
