#[goroutine::test]
#[test]
fn t() {}

fn main() {}
