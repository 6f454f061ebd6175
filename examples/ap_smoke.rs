use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
fn main() {
    let r = goroutine::run(|| {
        let stop = Arc::new(AtomicBool::new(false));
        let s = stop.clone();
        let h = goroutine::go(move || goroutine::preemptible(|| {
            let mut n = 0u64;
            while !s.load(Ordering::Relaxed) { n = n.wrapping_add(1); }
            n
        }));
        goroutine::yield_now();
        eprintln!("main runs again");
        stop.store(true, Ordering::Relaxed);
        h.join().unwrap()
    });
    eprintln!("{r} {:?}", goroutine::__test::async_preempt_stats());
}
