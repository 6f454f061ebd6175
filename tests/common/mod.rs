//! Runs a test body in a fresh process of the same test binary, so that it
//! gets its own runtime (GOMAXPROCS, goroutine ids, memory) while cargo runs
//! the other tests in parallel threads of the parent process.
#![allow(dead_code)]

use std::process::{Command, Output};

const CHILD_VAR: &str = "GOROUTINE_TEST_CHILD";

/// True in the child process started by [`spawn`] for test `name`.
pub fn is_child(name: &str) -> bool {
    std::env::var(CHILD_VAR).is_ok_and(|v| v == name)
}

/// Re-runs test `name` of this binary in a new process with `env` set.
pub fn spawn(name: &str, env: &[(&str, &str)]) -> Output {
    let exe = std::env::current_exe().expect("current_exe");
    let mut cmd = Command::new(exe);
    cmd.args(["--exact", name, "--nocapture", "--test-threads=1"])
        .env(CHILD_VAR, name)
        .env_remove("GOMAXPROCS");
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().expect("spawn test child")
}

/// Re-runs test `name` in a new process and fails if it failed.
pub fn run_isolated(name: &str, env: &[(&str, &str)]) {
    let out = spawn(name, env);
    assert!(
        out.status.success(),
        "isolated test {name} failed ({}):\nstdout:\n{}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A test whose body runs in its own process, with environment `env`.
#[macro_export]
macro_rules! isolated_test {
    ($(#[$meta:meta])* fn $name:ident() $([$($k:literal = $v:literal),*])? $body:block) => {
        $(#[$meta])*
        #[test]
        fn $name() {
            if !common::is_child(stringify!($name)) {
                common::run_isolated(stringify!($name), &[$($(($k, $v)),*)?]);
                return;
            }
            $body
        }
    };
}
