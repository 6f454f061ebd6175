#[goroutine::test(flavor = "multi_thread")]
fn t() {}

#[goroutine::main(worker_threads = 2)]
fn main() {}
