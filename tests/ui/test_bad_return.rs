// What `#[goroutine::test] fn t() -> u32 { 1 }` expands to call (the test
// function itself exists only in `--test` builds, which trybuild does not make).
fn main() {
    goroutine::__private::test(goroutine::__private::Options::new(), || 1u32);
}
