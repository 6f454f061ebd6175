//! The command line: the three commands on a generated trace, and clear
//! errors (exit status 1, one line, no panic) for bad input.

use goroutine_trace::gen::{generate, Scenario};
use std::path::PathBuf;
use std::process::{Command, Output};

fn tool(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_goroutine-trace"))
        .args(args)
        .output()
        .expect("run goroutine-trace")
}

fn dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("goroutine-trace-cli-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[test]
fn commands_on_a_generated_trace() {
    let d = dir("ok");
    let trace = d.join("t.bin");
    std::fs::write(&trace, generate(&Scenario::default()).bytes).unwrap();
    let t = trace.to_str().unwrap();

    let out = tool(&["stats", t]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let s = text(&out.stdout);
    for want in [
        "duration:",
        "GOMAXPROCS:  4",
        "goroutines:  400 seen",
        "GoCreate",
        "per-P utilisation",
        "P3",
    ] {
        assert!(s.contains(want), "stats lacks {want:?}:\n{s}");
    }

    let html = d.join("t.html");
    let out = tool(&["view", t, "-o", html.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.starts_with("<!DOCTYPE html>"));
    assert!(page.contains("<canvas id=\"timeline\">"));
    // Self-contained: nothing loaded from anywhere.
    for bad in ["http://", "https://", "<link", " src=", "@import", "url("] {
        assert!(!page.contains(bad), "the page contains {bad:?}");
    }
    // The awkward goroutine name cannot close the data <script>.
    assert_eq!(page.matches("</script>").count(), 2);

    let json = d.join("t.json");
    let out = tool(&["perfetto", t, "-o", json.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    assert!(v["traceEvents"].as_array().unwrap().len() > 1000);

    // Default output paths: next to the input.
    let out = tool(&["view", "-q", t]);
    assert!(out.status.success());
    assert!(d.join("t.html").exists());
    let _ = std::fs::remove_dir_all(&d);
}

fn expect_error(args: &[&str], code: i32, want: &str) {
    let out = tool(args);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(code), "{args:?}: {err}");
    assert!(err.contains(want), "{args:?}: stderr lacks {want:?}: {err}");
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn clear_errors() {
    let d = dir("err");
    let g = generate(&Scenario::default()).bytes;
    let path = |n: &str, b: &[u8]| {
        let p = d.join(n);
        std::fs::write(&p, b).unwrap();
        p.to_str().unwrap().to_string()
    };
    let junk = path(
        "junk.bin",
        b"PK\x03\x04 this is a zip file, not a trace..........",
    );
    expect_error(&["stats", &junk], 1, "not a goroutine trace");
    let mut v1 = g.clone();
    v1[8] = 1;
    let v1 = path("v1.bin", &v1);
    expect_error(&["view", &v1], 1, "unsupported trace format version 1");
    expect_error(&["view", &v1], 1, "older runtime");
    let cut = path("cut.bin", &g[..g.len() * 2 / 3]);
    expect_error(&["perfetto", &cut], 1, "complete batches and");
    // --lenient reads it anyway, with a warning.
    let out = tool(&["stats", "--lenient", &cut]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("warning"),
        "{}",
        text(&out.stderr)
    );
    assert!(text(&out.stdout).contains("warning:"));

    let mut bad = g[..40].to_vec();
    bad.extend_from_slice(&[0xB7, 1, 0, 0, 0, 2, 0, 0, 0, 77, 0]);
    let bad = path("bad.bin", &bad);
    expect_error(&["stats", &bad], 1, "unknown event type 77");

    expect_error(&["stats", "/nonexistent/x.bin"], 1, "/nonexistent/x.bin");
    expect_error(&["frobnicate", &junk], 1, "unknown command");
    expect_error(&["stats"], 2, "no trace file given");
    expect_error(&["stats", &junk, "--bogus"], 2, "unknown option --bogus");
    let _ = std::fs::remove_dir_all(&d);
}
