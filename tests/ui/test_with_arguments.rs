#[goroutine::test]
fn t(n: u32) {
    let _ = n;
}

fn main() {}
