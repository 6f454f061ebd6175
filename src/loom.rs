//! The std/loom switch.
//!
//! Code that implements a concurrency protocol (the P run queue, the spinning
//! protocol) imports its atomics from here, so the same source is model-checked
//! by loom under `RUSTFLAGS="--cfg loom"` and runs on std atomics otherwise.
//! Constants that size those protocols are shrunk under loom (see `p::runq`).

#[cfg(loom)]
pub(crate) use loom::sync;
#[cfg(loom)]
pub(crate) use loom::sync::atomic;
#[cfg(loom)]
#[allow(unused_imports)]
pub(crate) use loom::{hint, thread};

#[cfg(not(loom))]
pub(crate) use std::sync;
#[cfg(not(loom))]
pub(crate) use std::sync::atomic;
#[cfg(not(loom))]
#[allow(unused_imports)]
pub(crate) use std::{hint, thread};
