#[goroutine::main(max_procs = 0)]
fn main() {}
