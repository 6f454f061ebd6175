#[goroutine::main]
fn main(args: Vec<String>) {
    println!("{args:?}");
}
