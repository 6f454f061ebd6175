#[goroutine::main(synctest)]
fn main() {}

#[goroutine::test(synctest, synctest)]
fn twice() {}

#[goroutine::test(synctest = true)]
fn with_value() {}
