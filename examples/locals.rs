//! goroutine::local! and pinned goroutines, as docs/soundness.md suggests:
//! a request id and an `Rc` cache that follow each goroutine across thread
//! changes, and a pinned goroutine that keeps a std `thread_local!` across
//! runtime calls.
//!
//!     cargo run --release --example locals

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::time::Duration;

goroutine::local! {
    static REQUEST_ID: Cell<u64> = Cell::new(0);
    static SEEN: RefCell<Vec<Rc<str>>> = RefCell::new(Vec::new());
}

thread_local! {
    static THREAD_COUNTER: Rc<Cell<u64>> = Rc::new(Cell::new(0));
}

fn tid() -> i32 {
    // SAFETY: gettid has no preconditions.
    unsafe { libc::gettid() }
}

#[goroutine::main(max_procs = 4)]
fn main() {
    let handlers: Vec<_> = (1..=8u64)
        .map(|id| {
            goroutine::go(move || {
                REQUEST_ID.set(id);
                let first = tid();
                let mut threads = 0;
                for step in 0..50 {
                    let tag: Rc<str> = Rc::from(format!("req{id}-step{step}"));
                    SEEN.with_borrow_mut(|v| v.push(tag.clone()));
                    // May resume on another thread: the locals follow.
                    goroutine::time::sleep(Duration::from_micros(200));
                    threads += i32::from(tid() != first);
                    assert_eq!(REQUEST_ID.get(), id);
                    assert_eq!(Rc::strong_count(&tag), 2);
                }
                (id, SEEN.with_borrow(Vec::len), threads)
            })
        })
        .collect();
    for h in handlers {
        let (id, seen, moved) = h.join().unwrap();
        println!("request {id}: {seen} tags kept, resumed off its first thread {moved} times");
    }

    let pinned = goroutine::Builder::new()
        .name("pinned")
        .lock_os_thread(true)
        .spawn(|| {
            let t = tid();
            let counter = THREAD_COUNTER.with(Rc::clone);
            for _ in 0..100 {
                counter.set(counter.get() + 1);
                goroutine::time::sleep(Duration::from_micros(100));
                assert_eq!(tid(), t);
            }
            (t, counter.get(), Rc::strong_count(&counter))
        })
        .unwrap();
    let (t, n, owners) = pinned.join().unwrap();
    println!("pinned goroutine: thread {t} throughout, thread-local counter {n}, {owners} owners");
}
