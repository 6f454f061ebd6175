//! The typed half of a goroutine's task cell: the closure, then its result
//! (`Stage`), the `JoinHandle`'s reference ([`JoinRef`]) and the code of the
//! cell's vtable. The header and the join protocol (its invariants, the
//! reference count) are in `g/task.rs`.

use std::alloc::Layout;
use std::any::Any;
use std::cell::UnsafeCell;
use std::marker::PhantomData;
use std::mem::MaybeUninit;
use std::ptr::NonNull;

use super::JoinError;
use crate::g::task::{
    alloc_block, drop_joiner, free_block, try_drop_joiner, Header, TaskRef, VTable,
};

enum Stage<F, T> {
    Pending(F),
    Done(Result<T, JoinError>),
    /// The goroutine could not start (why). The `JoinError` is made when
    /// the result is taken: making it allocates, and a start fails when
    /// memory runs out (no stack could be mapped), where an allocation
    /// would abort the process. (The id comes with the taker: a cell holds
    /// no id, and a small closure's cell stays in the 64-byte class.)
    Failed(std::io::Error),
    Taken,
}

#[repr(C)]
struct Cell<F, T> {
    header: Header,
    stage: UnsafeCell<Stage<F, T>>,
    /// The spawner's current span, which the goroutine runs inside
    /// (`spans`' module note, "Spawning inside a span"); taken at its
    /// first run, like the stage.
    #[cfg(feature = "tracing")]
    parent: UnsafeCell<Option<crate::spans::Parent>>,
}

/// The `JoinHandle`'s reference.
pub(crate) struct JoinRef<T> {
    cell: NonNull<Header>,
    _t: PhantomData<T>,
}

// SAFETY: T: Send is required to move the result to another thread; the
// header is synchronised by the protocol in the module note.
unsafe impl<T: Send> Send for JoinRef<T> {}
// SAFETY: `&JoinRef` only reads the atomic state.
unsafe impl<T: Send> Sync for JoinRef<T> {}

impl<T> JoinRef<T> {
    #[inline]
    pub(crate) fn header(&self) -> &Header {
        // SAFETY: our reference keeps the cell alive.
        unsafe { self.cell.as_ref() }
    }

    /// Takes the result of goroutine `id`. Call once, after
    /// `header().is_complete()`.
    pub(crate) fn take_output(&self, id: u64) -> Result<T, JoinError> {
        debug_assert!(self.header().is_complete());
        let mut out = MaybeUninit::<Result<T, JoinError>>::uninit();
        // SAFETY: COMPLETE was observed (Acquire) by the caller, so the stage
        // is final; the vtable's T is ours (typed at creation).
        unsafe {
            (self.header().vtable().take_output)(self.cell, out.as_mut_ptr().cast(), id);
            out.assume_init()
        }
    }
}

impl<T> Drop for JoinRef<T> {
    /// Inline: a `go` statement drops its handle at once, and the common
    /// case is then one CAS; the rest is out of line (`drop_last`).
    #[inline]
    fn drop(&mut self) {
        // SAFETY: we give up the JoinHandle's reference, once (here or below).
        if unsafe { try_drop_joiner(self.cell) } {
            return;
        }
        // SAFETY: as above; `try_drop_joiner` gave nothing up.
        unsafe { drop_last(self.cell) }
    }
}

/// The rest of `JoinRef::drop`: freeing the cell (into the P's task cache) is runtime work, behind the
/// entry gate.
///
/// # Safety
/// The caller owns the JoinHandle's reference to `cell` and gives it up.
#[inline(never)]
unsafe fn drop_last(cell: NonNull<Header>) {
    // SAFETY: per the contract.
    crate::runtime::entry::call(move || unsafe { drop_joiner(cell) })
}

/// Allocates the cell for `f`: the G's reference and the JoinHandle's.
/// Out of memory, gives `f` back (the caller drops it outside the entry
/// gate: its captures' destructors are user code).
///
/// `here` is the spawner's M (its entry gate's lookup).
pub(crate) fn new_task<F, T>(
    f: F,
    spawn: crate::traceback::Spawn,
    here: crate::m::Here,
) -> Result<(TaskRef, JoinRef<T>), F>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    let layout = Layout::new::<Cell<F, T>>();
    let Some(mem) = alloc_block(layout, here) else {
        return Err(f);
    };
    let cell = mem.cast::<Cell<F, T>>();
    // SAFETY: `mem` is a fresh block of at least `layout`'s size and align.
    unsafe {
        cell.as_ptr().write(Cell {
            header: Header::new(&VTableOf::<F, T>::VTABLE, spawn),
            stage: UnsafeCell::new(Stage::Pending(f)),
            // The child runs inside the spawner's current span (`spans`'
            // module note, "Spawning inside a span").
            #[cfg(feature = "tracing")]
            parent: UnsafeCell::new(Some(crate::spans::capture())),
        })
    };
    let h = cell.cast::<Header>();
    Ok((
        // SAFETY: a new cell; this is the G's reference.
        unsafe { TaskRef::from_new(h) },
        JoinRef {
            cell: h,
            _t: PhantomData,
        },
    ))
}

struct VTableOf<F, T>(PhantomData<(F, T)>);

impl<F, T> VTableOf<F, T>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    const VTABLE: VTable = VTable {
        run: run::<F, T>,
        fail: fail::<F, T>,
        take_output: take_output::<F, T>,
        dealloc: dealloc::<F, T>,
    };
}

/// `f`, run inside the spawner's span (`spans`' module note) when the
/// `tracing` feature is on.
#[inline(always)]
fn spanned<F, T>(cell: &Cell<F, T>, f: F) -> impl FnOnce() -> T
where
    F: FnOnce() -> T,
{
    #[cfg(feature = "tracing")]
    {
        // SAFETY: the goroutine's first run is the only user of `parent`.
        let parent = unsafe { (*cell.parent.get()).take() };
        move || {
            let _running = parent.map(crate::spans::start);
            f()
        }
    }
    #[cfg(not(feature = "tracing"))]
    {
        let _ = cell;
        f
    }
}

/// # Safety
/// `h` is a live `Cell<F, T>`; the caller holds the G's reference and the
/// stage is `Pending` (before COMPLETE nobody else touches it).
unsafe fn run<F, T>(h: NonNull<Header>, id: u64, name: Option<&str>)
where
    F: FnOnce() -> T,
{
    // SAFETY: per the contract.
    let cell = unsafe { h.cast::<Cell<F, T>>().as_ref() };
    // SAFETY: per the contract, we are the only user of the stage now.
    let stage = unsafe { std::mem::replace(&mut *cell.stage.get(), Stage::Taken) };
    let f = match stage {
        Stage::Pending(f) => f,
        _ => crate::runtime::throw("goroutine task ran twice"),
    };
    // The goroutine's own code: outside the entry gate (`runtime::entry`).
    let mut out = crate::runtime::entry::user(spanned(cell, f))
        .map_err(|payload| JoinError::panicked(id, name, payload));
    if let Err(e) = &out {
        e.reached_top();
    }
    // The goroutine's locals go with it, returned or panicked, before its
    // result is published: `join` returns after their destructors. One that
    // panics is the goroutine's panic if it had none.
    if let Some(payload) = crate::local::goroutine_exit() {
        if out.is_ok() {
            let e = JoinError::panicked(id, name, payload);
            e.reached_top();
            out = Err(e);
        }
    }
    // Its panics' record, if any, goes with it.
    crate::runtime::panics::forget(id);
    // SAFETY: still the only user until COMPLETE is published.
    unsafe { *cell.stage.get() = Stage::Done(out) };
}

/// # Safety
/// As for `run`.
unsafe fn fail<F, T>(h: NonNull<Header>, _id: u64, cause: std::io::Error) {
    // SAFETY: per the contract.
    let cell = unsafe { h.cast::<Cell<F, T>>().as_ref() };
    // SAFETY: per the contract, we are the only user of the stage now.
    let old = unsafe { std::mem::replace(&mut *cell.stage.get(), Stage::Failed(cause)) };
    // The closure's captures are dropped only once the stage is consistent:
    // if one of their destructors panics, the unwinding `TaskRef` still
    // finds a valid stage to complete.
    drop(old);
}

/// # Safety
/// `h` is a live `Cell<F, T>` whose COMPLETE the caller observed (Acquire);
/// `out` points to a `MaybeUninit<Result<T, JoinError>>`; `id` is the
/// goroutine's.
unsafe fn take_output<F, T>(h: NonNull<Header>, out: *mut (), id: u64) {
    // SAFETY: per the contract.
    let cell = unsafe { h.cast::<Cell<F, T>>().as_ref() };
    // SAFETY: the goroutine is done with the stage; the single JoinHandle
    // takes it once.
    let res = match unsafe { std::mem::replace(&mut *cell.stage.get(), Stage::Taken) } {
        Stage::Done(res) => res,
        Stage::Failed(cause) => Err(JoinError::start_failed(id, cause)),
        _ => crate::runtime::throw("join of a goroutine whose result was already taken"),
    };
    // SAFETY: `out` is valid for a write of Result<T, JoinError>.
    unsafe { out.cast::<Result<T, JoinError>>().write(res) };
}

/// # Safety
/// `h` is a live `Cell<F, T>` and the last reference to it is gone.
unsafe fn dealloc<F, T>(h: NonNull<Header>) {
    let cell = h.cast::<Cell<F, T>>();
    // SAFETY: last reference: nobody else can see the cell.
    unsafe { std::ptr::drop_in_place(cell.as_ptr()) };
    // SAFETY: the block was allocated by `alloc_block` with this layout.
    unsafe { free_block(cell.cast(), Layout::new::<Cell<F, T>>()) };
}

/// The printable message of a panic payload.
pub(crate) fn panic_message(payload: &(dyn Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&'static str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "Box<dyn Any>".to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cell_size<F: FnOnce() -> T, T>(_f: &F) -> usize {
        Layout::new::<Cell<F, T>>().size()
    }

    #[test]
    fn a_small_closure_fits_the_smallest_class() {
        // The spawn record (traceback) must not push the common spawn (a
        // closure capturing a word, returning a word) out of the 64-byte
        // block class.
        assert_eq!(std::mem::size_of::<Header>(), 48);
        let x = 5u64;
        assert!(cell_size(&move || x) <= 64);
    }
}
