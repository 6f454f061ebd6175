//! `block_on`: running a `Future` to completion on a goroutine (or a plain
//! thread), the bridge from goroutine code to async code.
//!
//! # Design
//! `block_on` polls the future with a waker of its own. While the future is
//! pending, a goroutine parks (its OS thread runs other goroutines) and a
//! plain thread blocks in `thread::park`. The waker may be called from any
//! thread, any number of times, before or after the park: the handshake
//! between the waker and the parking goroutine is the three-state
//! [`parking::Signal`] (its module note states the invariants; its loom
//! models check them). The goroutine commits its park from the scheduler,
//! after it is switched out (`runtime::park`'s `unlock` step), so a waker
//! can never ready a goroutine that is still running.
//!
//! The waker holds an `Arc` to the call's record, so a waker kept after
//! `block_on` returned (futures may keep clones) is harmless: it only
//! stores `NOTIFIED` (the goroutine is no longer parked in this call, and
//! the `PARKED` state is only set by this call's own park).

pub(crate) mod parking;

use std::future::Future;
use std::pin::pin;
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};

use crate::g::{WaitReason, G};
use crate::m;
use crate::runtime::park;
use parking::Signal;

/// Who a `block_on` call wakes.
enum Blocked {
    Goroutine(&'static G),
    Thread(std::thread::Thread),
}

struct Call {
    signal: Signal,
    who: Blocked,
}

impl Wake for Call {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref()
    }

    fn wake_by_ref(self: &Arc<Self>) {
        match &self.who {
            Blocked::Goroutine(g) => {
                if self.signal.notify() {
                    // A waker may run anywhere: on another goroutine (even
                    // in a preemptible region), a tokio worker, a plain
                    // thread. `ready` handles each.
                    crate::runtime::entry::call(|| park::ready(g));
                }
            }
            Blocked::Thread(t) => {
                self.signal.notify();
                t.unpark();
            }
        }
    }
}

/// Runs `fut` to completion and returns its output.
///
/// Inside a goroutine, the goroutine parks while the future is pending,
/// not its OS thread: the processor runs other goroutines meanwhile, and
/// the future's waker makes the goroutine runnable again. Wakes may come
/// from any thread, before or after the goroutine parks (none is lost), and
/// any number of times. Outside the runtime, `block_on` blocks the calling
/// thread.
///
/// The future is polled on the calling goroutine, so whatever the future
/// does between two `.await`s runs as goroutine code (it may even call
/// blocking goroutine APIs, though that stalls the future's other parts).
///
/// ```
/// let (tx, rx) = goroutine::chan::<u32>(0);
/// let h = goroutine::go(move || goroutine::block_on(async move { rx.recv_async().await }));
/// tx.send(7).unwrap();
/// assert_eq!(h.join().unwrap(), Ok(7));
/// ```
///
/// # Cancel safety
/// `block_on` never cancels its future: it polls it until `Ready` and
/// drops it after (or while a panic in its poll unwinds). Cancelling is
/// what the future itself does with its parts: `futures::future::select`
/// or a `select!` drops the branches that lost, and this crate's futures
/// document what a drop before `Ready` leaves done
/// ([`send_async`](crate::Sender::send_async): nothing sent;
/// [`recv_async`](crate::Receiver::recv_async): nothing lost;
/// [`JoinHandle`](crate::JoinHandle): nothing lost).
///
/// # Which futures
/// Any future that is woken through its `Waker` works: `futures`' and
/// `async-channel`'s channels, `goroutine`'s own futures
/// ([`JoinHandle`](crate::JoinHandle), [`Receiver::recv_async`](crate::Receiver::recv_async),
/// [`Sender::send_async`](crate::Sender::send_async)), and any future woken
/// by another thread.
///
/// Futures that need a **tokio reactor** (tokio's sockets, timers,
/// `tokio::fs`, and crates built on them such as `reqwest` or `hyper`'s
/// tokio glue) panic outside a tokio runtime ("there is no reactor
/// running"). Run a tokio runtime on a thread of its own, spawn the work
/// there, and `block_on` the returned `JoinHandle`, which is an ordinary
/// future:
///
/// ```
/// // A tokio runtime on its own thread, started once.
/// let rt = tokio::runtime::Builder::new_multi_thread()
///     .worker_threads(1)
///     .enable_all()
///     .build()
///     .unwrap();
/// let handle = rt.handle().clone();
/// std::thread::spawn(move || rt.block_on(std::future::pending::<()>()));
///
/// // From any goroutine:
/// let body = goroutine::block_on(handle.spawn(async {
///     tokio::time::sleep(std::time::Duration::from_millis(10)).await;
///     "done"
/// }))
/// .unwrap();
/// assert_eq!(body, "done");
/// ```
pub fn block_on<F: Future>(fut: F) -> F::Output {
    let mut fut = pin!(fut);
    let g = m::current_g_checked();
    let call = Arc::new(Call {
        signal: Signal::new(),
        who: match g {
            Some(g) => Blocked::Goroutine(g),
            None => Blocked::Thread(std::thread::current()),
        },
    });
    let waker = Waker::from(call.clone());
    let mut cx = Context::from_waker(&waker);
    loop {
        call.signal.take();
        if let Poll::Ready(v) = fut.as_mut().poll(&mut cx) {
            return v;
        }
        match g {
            Some(_) => crate::runtime::entry::call(|| {
                park::park(WaitReason::BlockOn, &mut |_| call.signal.try_park())
            }),
            None => {
                // A wake after `take` (during the poll) left a notification
                // and an unpark token: neither is lost.
                while !call.signal.take() {
                    std::thread::park();
                }
                // `take` consumed the notification the next loop would see;
                // poll again anyway (the loop's `take` finds EMPTY).
            }
        }
    }
}
