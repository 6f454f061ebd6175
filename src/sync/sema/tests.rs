use super::*;
use std::sync::Arc;

/// The queue directly (like Go's TestSchedLocalQueue for run queues):
/// FIFO per address, `lifo` goes to the front, and addresses that share
/// a root do not mix.
#[test]
fn queue_order_per_address() {
    let a = AtomicU32::new(0);
    let b = AtomicU32::new(0);
    let recs: Vec<Sudog> = (0..3).map(|_| Sudog::new(&a)).collect();
    let rb = Sudog::new(&b);
    let lifo = Sudog::new(&a);
    let mut q = Queue { heads: ptr::null() };
    let pa = &a as *const AtomicU32 as usize;
    let pb = &b as *const AtomicU32 as usize;
    // SAFETY: all records live in this frame until the end of the test.
    unsafe {
        q.enqueue(&recs[0], false);
        q.enqueue(&rb, false);
        q.enqueue(&recs[1], false);
        q.enqueue(&recs[2], false);
        q.enqueue(&lifo, true);
        assert_eq!(q.dequeue(pa), &lifo as *const Sudog);
        assert_eq!(q.dequeue(pa), &recs[0] as *const Sudog);
        assert_eq!(q.dequeue(pb), &rb as *const Sudog);
        assert!(q.dequeue(pb).is_null());
        // lifo onto a head that has followers keeps the tail right.
        q.enqueue(&recs[0], true);
        q.enqueue(&rb, false);
        assert_eq!(q.dequeue(pa), &recs[0] as *const Sudog);
        assert_eq!(q.dequeue(pa), &recs[1] as *const Sudog);
        q.enqueue(&recs[0], false);
        assert_eq!(q.dequeue(pa), &recs[2] as *const Sudog);
        assert_eq!(q.dequeue(pa), &recs[0] as *const Sudog);
        assert!(q.dequeue(pa).is_null());
        assert_eq!(q.dequeue(pb), &rb as *const Sudog);
        assert!(q.heads.is_null());
    }
}

#[test]
fn tokens_are_counted() {
    let s = AtomicU32::new(0);
    semrelease(&s, false);
    semrelease(&s, false);
    semacquire(&s, false, WaitReason::Semacquire);
    semacquire(&s, false, WaitReason::Semacquire);
    assert_eq!(s.load(Ordering::SeqCst), 0);
}

/// Threads and goroutines block on one semaphore; each release wakes
/// exactly one, and nobody is left behind.
#[test]
fn threads_and_goroutines_wait_and_wake() {
    let s = Arc::new(AtomicU32::new(0));
    let threads: Vec<_> = (0..3)
        .map(|_| {
            let s = s.clone();
            std::thread::spawn(move || semacquire(&s, false, WaitReason::Semacquire))
        })
        .collect();
    let s2 = s.clone();
    crate::run(move || {
        let gs: Vec<_> = (0..3)
            .map(|_| {
                let s = s2.clone();
                crate::go(move || semacquire(&s, false, WaitReason::Semacquire))
            })
            .collect();
        // Wait for some of them to block, then release all six.
        while nwait(&s2) == 0 {
            crate::yield_now();
        }
        for i in 0..6 {
            semrelease(&s2, i % 2 == 0);
        }
        for g in gs {
            g.join().unwrap();
        }
    });
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(s.load(Ordering::SeqCst), 0);
}
