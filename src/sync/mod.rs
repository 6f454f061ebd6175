//! Go's sync primitives for goroutines: [`Mutex`], [`RwLock`],
//! [`WaitGroup`], [`Once`], [`Condvar`] and a weighted [`Semaphore`].
//!
//! Every primitive parks the waiting *goroutine* (its OS thread goes on
//! running other goroutines) and, called from a plain OS thread outside the
//! runtime, blocks that thread instead; goroutines and threads may share
//! them freely.
//!
//! # How they are built (as in Go)
//! ```text
//!  Mutex ──┐        RwLock ── rawrwlock ──┐     WaitGroup ──┐     Once ── rawmutex
//!          rawmutex ──────────────────────┴── sema ─────────┘
//!  Condvar ── notify            Semaphore (own FIFO)
//!                  \               /
//!                    wait (WaitCell: park a goroutine / block a thread)
//! ```
//! - `sema.rs`: the runtime semaphore (Go's runtime/sema.go: `semacquire`/
//!   `semrelease` with a wait queue keyed by address, the handoff flag and
//!   lifo requeue). Only slow paths reach it: uncontended `lock`/unlock and
//!   `add`/`done` are a single atomic operation on the primitive's own word.
//! - `rawmutex.rs`: Go's `sync.Mutex` state machine (locked, woken and
//!   starving bits, waiter count; normal and starvation modes).
//! - `rawrwlock.rs`: Go's `sync.RWMutex` (writer preference).
//! - `notify.rs`: Go's ticket-based `notifyList`, FIFO wakeup for `Condvar`.
//! - `waitcell.rs`: the wait record cell and the park/block/wake protocol
//!   shared by all queues, and the std/loom switch for this module.
//!
//! Wait records live on the waiter's stack (a parked goroutine's stack
//! stays valid), so blocking allocates nothing.
//!
//! None of these primitives poisons on panic, and none is reentrant.

mod condvar;
mod mutex;
mod notify;
mod once;
mod rawmutex;
mod rawrwlock;
mod rwlock;
mod sema;
mod semaphore;
mod waitcell;
mod waitgroup;

pub use condvar::Condvar;
pub use mutex::{Mutex, MutexGuard};
pub use once::Once;
pub use rwlock::{RwLock, RwLockReadGuard, RwLockWriteGuard};
pub use semaphore::Semaphore;
pub use waitgroup::WaitGroup;
