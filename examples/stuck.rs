//! A program stuck somewhere: `cargo run --release --example stuck`, then
//! read the dump it prints (or press Ctrl-\ while it waits, for SIGQUIT's).

use goroutine::chan;

#[inline(never)]
fn worker(rx: goroutine::Receiver<u32>) -> u32 {
    // Every worker waits here for a value nobody sends.
    rx.recv().unwrap_or(0)
}

fn main() {
    goroutine::run(|| {
        let (tx, rx) = chan::<u32>(0);
        let hs: Vec<_> = (0..3)
            .map(|_| {
                let rx = rx.clone();
                goroutine::go(move || worker(rx))
            })
            .collect();
        goroutine::time::sleep(std::time::Duration::from_millis(50));
        goroutine::dump(&mut std::io::stdout()).unwrap();
        println!("---- grouped ----");
        goroutine::dump_grouped(&mut std::io::stdout()).unwrap();
        drop(tx);
        for h in hs {
            h.join().unwrap();
        }
    });
}
