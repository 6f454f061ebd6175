use std::time::{Duration, Instant};
fn main() {
    let t0 = Instant::now();
    goroutine::run(move || {
        let hs: Vec<_> = (0..10u64)
            .map(|i| goroutine::go(move || { goroutine::time::sleep(Duration::from_millis(10 * i)); i }))
            .collect();
        for h in hs { let i = h.join().unwrap(); println!("{i} at {:?}", t0.elapsed()); }
        let rx = goroutine::time::after(Duration::from_millis(20));
        println!("after: {:?}", rx.recv().unwrap().duration_since(t0));
        let n = 100_000;
        let t1 = Instant::now();
        let hs: Vec<_> = (0..n).map(|_| goroutine::go(|| goroutine::time::sleep(Duration::from_millis(100)))).collect();
        for h in hs { h.join().unwrap(); }
        println!("100k sleepers of 100ms took {:?}", t1.elapsed());
        // syscall
        let t2 = Instant::now();
        let hs: Vec<_> = (0..4).map(|_| goroutine::go(|| goroutine::syscall(|| std::thread::sleep(Duration::from_millis(30))))).collect();
        let c = goroutine::go(|| { let mut x = 0u64; for i in 0..1000 { x += i; goroutine::yield_now(); } x });
        println!("compute done {:?} ({})", t2.elapsed(), c.join().unwrap());
        for h in hs { h.join().unwrap(); }
        println!("syscalls done {:?}", t2.elapsed());
    });
}
