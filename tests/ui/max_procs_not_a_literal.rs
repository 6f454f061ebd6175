const N: usize = 4;

#[goroutine::test(max_procs = "4")]
fn t() {}

#[goroutine::main(max_procs = N)]
fn main() {}
