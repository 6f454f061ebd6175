use std::time::*;
fn main() {
    goroutine::run(|| {
        for procs in [1usize, 2, 4, 8] {
            let prev = goroutine::set_max_procs(procs);
            eprintln!("procs {procs}");
            let hs: Vec<_> = (0..8).map(|_| goroutine::go(|| {
                for _ in 0..100 {
                    let pid = goroutine::syscall(|| unsafe { libc::getpid() });
                    assert!(pid > 0);
                    let t = Instant::now(); while t.elapsed() < Duration::from_micros(20) {}
                    goroutine::preempt_point();
                }
            })).collect();
            for h in hs { h.join().unwrap(); }
            goroutine::set_max_procs(prev);
        }
    });
}
