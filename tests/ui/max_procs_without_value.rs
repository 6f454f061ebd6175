#[goroutine::main(max_procs)]
fn main() {}
