//! Shared by the network workloads (`echo`, `http`).
//!
//! A network workload runs as two processes beside the driver: the server,
//! the runtime's own function (`bench __worker`, or the Go program), and
//! the load generator (`bench __client`, the same for every server). The
//! server binds 127.0.0.1 on a port of the kernel's choosing, prints one
//! line `PORT\t<port>` on stdout and serves until its stdin closes; the
//! driver then starts the load generator against that port, takes its
//! `RESULT` and `EXTRA` lines as the figures, closes the server's stdin and
//! takes the server's peak RSS from wait4 (so the RSS column is the
//! server's, never the load generator's).

use std::io::{Read, Write};

/// Each process gets 20,000 descriptors here (`ulimit -n`): 10,000 client
/// sockets and 10,000 server sockets would not fit in one. Raises this
/// process's soft limit on descriptors to its hard limit; returns the new
/// soft limit.
pub fn raise_fd_limit() -> libc::rlim_t {
    let mut rl = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit write to and read from a local rlimit.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut rl) != 0 {
            return 0;
        }
        if rl.rlim_cur < rl.rlim_max {
            let want = libc::rlimit {
                rlim_cur: rl.rlim_max,
                rlim_max: rl.rlim_max,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &want) == 0 {
                rl = want;
            }
        }
    }
    rl.rlim_cur
}

/// The address every server binds: loopback, a port the kernel picks.
pub const BIND: &str = "127.0.0.1:0";

/// Tells the driver the server's port (`PORT\t<port>` on stdout) and
/// starts a thread that ends the process as soon as its stdin closes (the
/// driver closes it once the load generator is done). The thread is a
/// plain OS thread, blocked in `read` the whole run.
pub fn announce(port: u16) {
    std::thread::Builder::new()
        .name("stdin-watch".into())
        .stack_size(64 << 10)
        .spawn(|| {
            let mut buf = [0u8; 64];
            let mut stdin = std::io::stdin();
            while let Ok(n) = stdin.read(&mut buf) {
                if n == 0 {
                    break;
                }
            }
            let _ = std::io::stdout().flush();
            // SAFETY: ends the process without running destructors or
            // atexit handlers while the runtime's threads still run.
            unsafe { libc::_exit(0) }
        })
        .expect("spawning the stdin watcher");
    println!("PORT\t{port}");
    let _ = std::io::stdout().flush();
}

/// The port in a server's `PORT\t<port>` line.
pub fn parse_port(line: &str) -> Option<u16> {
    line.trim_end().strip_prefix("PORT\t")?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ports() {
        assert_eq!(parse_port("PORT\t4242\n"), Some(4242));
        assert_eq!(parse_port("PORT\t0"), Some(0));
        assert_eq!(parse_port("PORT 4242"), None);
        assert_eq!(parse_port("PORT\t70000"), None);
        assert_eq!(parse_port("RESULT\t1\tms\tx"), None);
    }

    #[test]
    fn fd_limit() {
        let mut rl = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        let got = raise_fd_limit();
        // SAFETY: getrlimit writes to a local rlimit.
        assert_eq!(unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut rl) }, 0);
        assert_eq!(got, rl.rlim_cur);
        assert_eq!(rl.rlim_cur, rl.rlim_max);
    }
}
