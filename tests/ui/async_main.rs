#[goroutine::main]
async fn main() {}
