use std::time::*;
fn main() {
    goroutine::run(|| {
        for round in 0..5 {
        let n = 100_000;
        let wg = goroutine::sync::WaitGroup::new();
        wg.add(n as isize);
        let (tx, rx) = goroutine::chan::<()>(0);
        for _ in 0..n {
            let rx = rx.clone(); let wg = wg.clone();
            goroutine::go(move || { assert!(rx.recv().is_err()); wg.done(); });
        }
        for _ in 0..10 { goroutine::yield_now(); }
        while goroutine::num_goroutine() > 0 && false {}
        goroutine::time::sleep(Duration::from_millis(100));
        let t = Instant::now();
        drop(tx);
        let t1 = t.elapsed();
        wg.wait();
        eprintln!("round {round}: close {:?} wake all {:?}", t1, t.elapsed());
        }
    });
}
