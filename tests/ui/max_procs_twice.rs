#[goroutine::main(max_procs = 2, max_procs = 3)]
fn main() {}
