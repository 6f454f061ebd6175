#[goroutine::main]
struct Config;

fn main() {}
