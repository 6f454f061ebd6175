#[goroutine::main]
fn main<T: Default>() {
    let _ = T::default();
}
