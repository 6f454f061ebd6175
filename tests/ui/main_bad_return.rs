struct NotDebug;

#[goroutine::main]
fn main() -> Result<(), NotDebug> {
    Err(NotDebug)
}
