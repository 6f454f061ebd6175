//! Goroutine-local storage: [`local!`](crate::local!) and [`LocalKey`].
//!
//! # Design
//! A goroutine can resume on another OS thread after any runtime call, so a
//! `thread_local!` is the wrong home for state that belongs to the running
//! code (`docs/soundness.md`). A [`LocalKey`] instead finds its value in a
//! [`LocalMap`] owned by the *running goroutine*: the map sits in place in
//! the runtime's reserved line at the top of the goroutine's stack
//! (`stack::TOP_RESERVED`; the G record's first two cache lines are full), so it
//! travels with the goroutine like the rest of its stack. All-zero bytes
//! are an empty map, which is what a fresh stack holds. Outside a
//! goroutine (a plain thread) the map is a per-thread one, so the same key
//! behaves like a `thread_local!` there.
//!
//! - Keys get a process-wide index on first use (`LocalKey::index`, one
//!   CAS, then a relaxed load); a map is a vector of slots by index.
//! - Values are boxed separately (a slot holds a raw pointer), so a `&T`
//!   handed to `with` stays valid while the vector grows (an initialiser
//!   or a `with` inside `with` may add slots).
//! - An access is one out-of-line call (`caller_map`: the thread's M, and
//!   the map of the goroutine it runs, which `execute` stores in the M
//!   before each switch into a goroutine) and the slot lookup inlined in
//!   the caller. `caller_map` reads the thread-local itself instead of
//!   calling `m::current`, and needs no stack frame in the usual case
//!   (the `local` benchmark measures the access); the map is read from the
//!   M rather than from the running G's stack bounds, which is cheaper.
//!
//! # Invariants
//! - A goroutine's map is touched only by the goroutine itself while it
//!   runs: by `with` on its stack, and by [`goroutine_exit`] on its stack
//!   before its result is published, which drops the values and frees the
//!   slots. The scheduler never looks at it, so it needs no lock and no
//!   atomic. A stack is free only with an all-zero map (fresh stack memory
//!   reads zero; `goroutine_exit` zeroes it), so a goroutine never inherits
//!   another's values.
//! - No borrow of a map is held while user code runs (an initialiser, the
//!   closure given to `with`, a destructor): map methods borrow the slot
//!   vector for a few instructions and return raw pointers or indices.
//! - A slot is empty (null), initialising (its initialiser runs: a `with`
//!   of the same key from inside it panics, as a recursive initialisation
//!   is a bug) or full.
//! - While a map is being destroyed (goroutine end, thread exit) no value
//!   can be created: `try_with` answers [`AccessError`], `with` panics, as
//!   std does for a thread-local being destroyed.
//! - Once preemptible regions are in use, the goroutine is found with
//!   `m::current_g_checked`, which is right even if a signal stops the
//!   goroutine during the lookup and it resumes elsewhere (before, with the
//!   cheaper `m::current_g`); everything after the lookup touches only the
//!   goroutine's own stack and map, so `with` may be used inside
//!   [`preemptible`](crate::preemptible) regions too.

use std::any::Any;
use std::cell::{Cell, RefCell};
use std::fmt;
use std::marker::PhantomData;
use std::panic::{self, AssertUnwindSafe};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::m;

/// Declares goroutine-local keys, with `thread_local!`'s syntax.
///
/// Each goroutine gets its own value of each key, made by the initialiser
/// on its first access and dropped when the goroutine ends (returning or
/// panicking), before `join` returns. A goroutine keeps its values when it
/// moves to another OS thread, so they may be held across runtime calls
/// (channel operations, sleeps, I/O), which a `thread_local!` may not.
/// On a thread outside the runtime, a key behaves like a `thread_local!`:
/// one value per thread, dropped at thread exit.
///
/// Use it for state that must follow the goroutine: request ids, random
/// generators, tracing context, caches of `Rc`s.
///
/// ```
/// use std::cell::{Cell, RefCell};
/// use std::rc::Rc;
///
/// goroutine::local! {
///     static REQUEST_ID: Cell<u64> = Cell::new(0);
///     /// A per-goroutine cache of shared strings.
///     pub static NAMES: RefCell<Vec<Rc<str>>> = RefCell::new(Vec::new());
/// }
///
/// goroutine::run(|| {
///     let hs: Vec<_> = (1..=4u64)
///         .map(|i| {
///             goroutine::go(move || {
///                 REQUEST_ID.set(i);
///                 let name: Rc<str> = Rc::from(format!("req-{i}"));
///                 NAMES.with_borrow_mut(|v| v.push(name.clone()));
///                 // The goroutine may resume on another thread here: its
///                 // locals (and `name`, whose other clone is one of them)
///                 // come with it.
///                 goroutine::time::sleep(std::time::Duration::from_millis(1));
///                 assert_eq!(REQUEST_ID.get(), i);
///                 NAMES.with_borrow(|v| assert_eq!(v[0], name));
///             })
///         })
///         .collect();
///     for h in hs {
///         h.join().unwrap();
///     }
/// });
/// ```
///
/// `static NAME: T = const { expr };` is accepted as in `thread_local!`,
/// and means the same as without `const` (the value is still made per
/// goroutine, on first access).
#[macro_export]
macro_rules! local {
    () => {};
    ($(#[$attr:meta])* $vis:vis static $name:ident: $t:ty = const { $init:expr }; $($rest:tt)*) => {
        $crate::local!($(#[$attr])* $vis static $name: $t = $init; $($rest)*);
    };
    ($(#[$attr:meta])* $vis:vis static $name:ident: $t:ty = const { $init:expr }) => {
        $crate::local!($(#[$attr])* $vis static $name: $t = $init);
    };
    ($(#[$attr:meta])* $vis:vis static $name:ident: $t:ty = $init:expr; $($rest:tt)*) => {
        $crate::local!($(#[$attr])* $vis static $name: $t = $init);
        $crate::local!($($rest)*);
    };
    ($(#[$attr:meta])* $vis:vis static $name:ident: $t:ty = $init:expr) => {
        $(#[$attr])* $vis static $name: $crate::LocalKey<$t> = {
            fn __init() -> $t {
                $init
            }
            $crate::LocalKey::__new(__init)
        };
    };
}

/// A goroutine-local key, declared with [`local!`](crate::local!): the
/// goroutine-local counterpart of `std::thread::LocalKey`.
pub struct LocalKey<T: 'static> {
    init: fn() -> T,
    /// The key's slot in every map, plus one; 0 until first used.
    index: AtomicUsize,
    _t: PhantomData<fn() -> T>,
}

/// The error of [`LocalKey::try_with`]: the value is being destroyed (the
/// goroutine or thread is ending) and cannot be used or made again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct AccessError;

impl fmt::Display for AccessError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("goroutine-local value accessed during or after its destruction")
    }
}

impl std::error::Error for AccessError {}

/// Key indexes handed out so far (plus one).
static NEXT_INDEX: AtomicUsize = AtomicUsize::new(1);

impl<T: 'static> LocalKey<T> {
    /// Used by [`local!`](crate::local!). Not a stable API.
    #[doc(hidden)]
    // entry: a const constructor; no runtime state
    pub const fn __new(init: fn() -> T) -> LocalKey<T> {
        LocalKey {
            init,
            index: AtomicUsize::new(0),
            _t: PhantomData,
        }
    }

    /// Calls `f` with a reference to this goroutine's value, making it
    /// first if this goroutine has none yet.
    ///
    /// The reference may be kept across runtime calls inside `f` (unlike a
    /// `thread_local!`'s): the value belongs to the goroutine, not to the
    /// thread it runs on.
    ///
    /// # Panics
    /// If the value is being destroyed (its goroutine or thread is ending:
    /// a destructor of another local uses it), or if its initialiser uses
    /// the key itself.
    #[inline]
    // entry: runs the user's closure (never inside the gate) on the goroutine's own map
    pub fn with<F, R>(&'static self, f: F) -> R
    where
        F: FnOnce(&T) -> R,
    {
        match self.try_with(f) {
            Ok(r) => r,
            Err(e) => access_failed(e),
        }
    }

    /// Like [`with`](Self::with), but answers [`AccessError`] instead of
    /// panicking when the value is being destroyed.
    #[inline]
    // entry: runs the user's closure (never inside the gate) on the goroutine's own map
    pub fn try_with<F, R>(&'static self, f: F) -> Result<R, AccessError>
    where
        F: FnOnce(&T) -> R,
    {
        let value = self.value()?;
        // SAFETY: `get` returns this key's live value in the caller's own map;
        // it is dropped only when the map is destroyed, which happens after
        // the goroutine's (or thread's) code has returned, so not during `f`.
        Ok(f(unsafe { value.as_ref() }))
    }

    #[inline]
    fn value(&'static self) -> Result<NonNull<T>, AccessError> {
        let index = self.index();
        let map = caller_map()?;
        // SAFETY: the map is the caller's own (module note) and no borrow of
        // it is held.
        match unsafe { map.as_ref() }.get(index) {
            Some(p) => Ok(p.cast()),
            None => self.init(map, index),
        }
    }

    #[inline]
    fn index(&'static self) -> usize {
        // Relaxed: the index is only a number; nothing else is published
        // with it.
        match self.index.load(Ordering::Relaxed) {
            0 => self.assign_index(),
            i => i - 1,
        }
    }

    #[cold]
    fn assign_index(&'static self) -> usize {
        let new = NEXT_INDEX.fetch_add(1, Ordering::Relaxed);
        match self
            .index
            .compare_exchange(0, new, Ordering::Relaxed, Ordering::Relaxed)
        {
            Ok(_) => new - 1,
            // Another thread won: use its index (ours is never used).
            Err(won) => won - 1,
        }
    }

    #[cold]
    #[inline(never)]
    fn init(
        &'static self,
        map: NonNull<LocalMap>,
        index: usize,
    ) -> Result<NonNull<T>, AccessError> {
        // SAFETY: the caller's own map, no borrow of it held.
        unsafe { map.as_ref() }.begin_init(index)?;
        // An initialiser that panics leaves the slot empty again.
        struct Reset(NonNull<LocalMap>, usize);
        impl Drop for Reset {
            fn drop(&mut self) {
                // SAFETY: as above; we are on the same goroutine or thread.
                unsafe { self.0.as_ref() }.abort_init(self.1);
            }
        }
        let reset = Reset(map, index);
        // User code: it may use other keys and runtime calls (the goroutine
        // may move: its map moves with it).
        let value = (self.init)();
        std::mem::forget(reset);
        let p = NonNull::from(Box::leak(Box::new(value)));
        // SAFETY: as above.
        unsafe { map.as_ref() }.finish_init(index, p.cast(), drop_boxed::<T>);
        Ok(p)
    }
}

impl<T: 'static> LocalKey<Cell<T>> {
    /// Sets this goroutine's value (made first if there is none).
    // entry: runs the user's closure (never inside the gate) on the goroutine's own map
    pub fn set(&'static self, value: T) {
        self.with(|c| c.set(value))
    }

    /// A copy of this goroutine's value.
    // entry: runs the user's closure (never inside the gate) on the goroutine's own map
    pub fn get(&'static self) -> T
    where
        T: Copy,
    {
        self.with(Cell::get)
    }

    /// Takes this goroutine's value, leaving `T::default()`.
    // entry: runs the user's closure (never inside the gate) on the goroutine's own map
    pub fn take(&'static self) -> T
    where
        T: Default,
    {
        self.with(Cell::take)
    }

    /// Replaces this goroutine's value, returning the old one.
    // entry: runs the user's closure (never inside the gate) on the goroutine's own map
    pub fn replace(&'static self, value: T) -> T {
        self.with(|c| c.replace(value))
    }
}

impl<T: 'static> LocalKey<RefCell<T>> {
    /// Calls `f` with a shared borrow of this goroutine's value.
    ///
    /// # Panics
    /// If the value is mutably borrowed, or as [`with`](LocalKey::with).
    // entry: runs the user's closure (never inside the gate) on the goroutine's own map
    pub fn with_borrow<F, R>(&'static self, f: F) -> R
    where
        F: FnOnce(&T) -> R,
    {
        self.with(|c| f(&c.borrow()))
    }

    /// Calls `f` with a mutable borrow of this goroutine's value.
    ///
    /// # Panics
    /// If the value is borrowed, or as [`with`](LocalKey::with).
    // entry: runs the user's closure (never inside the gate) on the goroutine's own map
    pub fn with_borrow_mut<F, R>(&'static self, f: F) -> R
    where
        F: FnOnce(&mut T) -> R,
    {
        self.with(|c| f(&mut c.borrow_mut()))
    }

    /// Sets this goroutine's value.
    // entry: runs the user's closure (never inside the gate) on the goroutine's own map
    pub fn set(&'static self, value: T) {
        self.with(|c| *c.borrow_mut() = value)
    }

    /// Takes this goroutine's value, leaving `T::default()`.
    // entry: runs the user's closure (never inside the gate) on the goroutine's own map
    pub fn take(&'static self) -> T
    where
        T: Default,
    {
        self.with(RefCell::take)
    }

    /// Replaces this goroutine's value, returning the old one.
    // entry: runs the user's closure (never inside the gate) on the goroutine's own map
    pub fn replace(&'static self, value: T) -> T {
        self.with(|c| c.replace(value))
    }
}

impl<T: 'static> fmt::Debug for LocalKey<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LocalKey").finish_non_exhaustive()
    }
}

#[cold]
#[inline(never)]
#[track_caller]
fn access_failed(e: AccessError) -> ! {
    panic!("cannot access a goroutine::local! value: {e}")
}

/// # Safety
/// `p` came from `Box::<T>::leak` and is dropped once.
unsafe fn drop_boxed<T>(p: NonNull<()>) {
    // SAFETY: per the contract.
    drop(unsafe { Box::from_raw(p.cast::<T>().as_ptr()) });
}

/// A key's value in one map: the boxed value and how to drop it. A slot is
/// full iff it has a `drop`; an empty one has a null `value`; one whose
/// initialiser runs has [`INITIALIZING`] and no `drop` (a zero-sized value's
/// box may be at address 1 too, which is why fullness is read from `drop`).
#[derive(Clone, Copy)]
struct Slot {
    value: *mut (),
    drop: Option<unsafe fn(NonNull<()>)>,
}

/// The `value` of a slot whose initialiser is running.
const INITIALIZING: *mut () = std::ptr::dangling_mut::<()>();

const EMPTY: Slot = Slot {
    value: std::ptr::null_mut(),
    drop: None,
};

// The goroutine's map lives in the slot `G::locals_slot` gives: it must fit.
const _: () = assert!(
    std::mem::size_of::<LocalMap>() <= crate::g::stack::TOP_RESERVED
        && std::mem::align_of::<LocalMap>() <= 64
);

/// One goroutine's (or thread's) values, by key index: a vector kept as
/// raw parts, so that **all-zero bytes are a valid empty map**. That lets a
/// goroutine's map live in place in the reserved line at the top of its
/// stack (fresh stack memory reads zero, and [`goroutine_exit`] leaves it
/// zero again). All methods are called only by the map's owner, never while
/// user code holds a borrow of the slots (module note), which is what makes
/// the plain `Cell` accesses exclusive.
#[repr(C)]
pub(crate) struct LocalMap {
    ptr: Cell<*mut Slot>,
    len: Cell<usize>,
    cap: Cell<usize>,
    destroying: Cell<bool>,
}

impl LocalMap {
    pub(crate) const fn new() -> LocalMap {
        LocalMap {
            ptr: Cell::new(std::ptr::null_mut()),
            len: Cell::new(0),
            cap: Cell::new(0),
            destroying: Cell::new(false),
        }
    }

    #[inline]
    fn get(&self, index: usize) -> Option<NonNull<()>> {
        if index >= self.len.get() {
            return None;
        }
        // SAFETY: index < len: an initialised slot of the live allocation.
        let slot = unsafe { *self.ptr.get().add(index) };
        slot.drop?;
        NonNull::new(slot.value)
    }

    /// Takes the slots out as a `Vec` (the map is left empty).
    fn take(&self) -> Vec<Slot> {
        let (ptr, len, cap) = (self.ptr.get(), self.len.get(), self.cap.get());
        self.ptr.set(std::ptr::null_mut());
        self.len.set(0);
        self.cap.set(0);
        if cap == 0 {
            return Vec::new();
        }
        // SAFETY: the parts came from a `Vec<Slot>` (`put`), and the map
        // no longer names them.
        unsafe { Vec::from_raw_parts(ptr, len, cap) }
    }

    /// Stores `v` as the map's slots (the map was empty).
    fn put(&self, v: Vec<Slot>) {
        let mut v = std::mem::ManuallyDrop::new(v);
        self.ptr.set(v.as_mut_ptr());
        self.len.set(v.len());
        self.cap.set(v.capacity());
    }

    fn set(&self, index: usize, slot: Slot) {
        debug_assert!(index < self.len.get());
        // SAFETY: index < len, as the callers ensure (`begin_init` grew it).
        unsafe { *self.ptr.get().add(index) = slot };
    }

    fn begin_init(&self, index: usize) -> Result<(), AccessError> {
        if self.destroying.get() {
            return Err(AccessError);
        }
        if index >= self.len.get() {
            let mut v = self.take();
            v.resize(index + 1, EMPTY);
            self.put(v);
        }
        // SAFETY: index < len now.
        let slot = unsafe { *self.ptr.get().add(index) };
        assert!(
            slot.drop.is_none(),
            "goroutine::local! slot initialised twice"
        );
        if slot.value == INITIALIZING {
            panic!(
                "goroutine::local! value used by its own initialiser (recursive initialisation)"
            );
        }
        self.set(
            index,
            Slot {
                value: INITIALIZING,
                drop: None,
            },
        );
        Ok(())
    }

    fn finish_init(&self, index: usize, value: NonNull<()>, drop: unsafe fn(NonNull<()>)) {
        self.set(
            index,
            Slot {
                value: value.as_ptr(),
                drop: Some(drop),
            },
        );
    }

    fn abort_init(&self, index: usize) {
        if index < self.len.get() {
            self.set(index, EMPTY);
        }
    }

    /// Drops every value, in key order, frees the slots and returns the
    /// first panic a destructor raised (the others' values are still
    /// dropped). While it runs, no value can be made (`AccessError`).
    /// Afterwards the map is all zero bytes again iff `reusable`.
    fn destroy(&self, reusable: bool) -> Option<Box<dyn Any + Send>> {
        self.destroying.set(true);
        // Moved out before any destructor (user code) runs.
        let slots = self.take();
        let mut first_panic = None;
        for slot in &slots {
            if let (Some(drop), Some(value)) = (slot.drop, NonNull::new(slot.value)) {
                // SAFETY: the slot owned the boxed value; it is dropped once
                // (the slots are no longer reachable from the map).
                let r = panic::catch_unwind(AssertUnwindSafe(|| unsafe { drop(value) }));
                if let Err(payload) = r {
                    if first_panic.is_none() {
                        first_panic = Some(payload);
                    }
                }
            }
        }
        drop(slots);
        if reusable {
            self.destroying.set(false);
        }
        first_panic
    }
}

/// The map of the running goroutine, or of the calling thread outside one.
/// Out of line, and the one call of an access: it makes no runtime call, so
/// the thread-local read inlined into it is fresh on every call. The usual
/// case (a goroutine, no preemptible region in use) needs no frame; the
/// rest is in `caller_map_slow`.
///
/// Out of line (`#[inline(never)]`) with no switch point inside: what
/// keeps `local!` immune to the compiler's thread-local hazard
/// (docs/soundness.md, "The compiler's side"; `m::current`).
#[inline(never)]
fn caller_map() -> Result<NonNull<LocalMap>, AccessError> {
    // The plain lookup is right unless a signal can stop the caller between
    // its two loads (a preemptible region: see `m::current_g_checked`); a
    // goroutine that entered one set the flag itself (program order).
    if !crate::runtime::asyncpreempt::regions_used() {
        if let Some(map) = NonNull::new(m::current_locals_inline()) {
            return Ok(map.cast());
        }
    }
    caller_map_slow()
}

#[cold]
#[inline(never)]
fn caller_map_slow() -> Result<NonNull<LocalMap>, AccessError> {
    let g = if crate::runtime::asyncpreempt::regions_used() {
        m::current_g_checked()
    } else {
        m::current_g()
    };
    match g.and_then(|g| g.locals_slot()) {
        Some(map) => Ok(map.cast()),
        None => thread_map(),
    }
}

/// A thread's map outside the runtime: its values are dropped at thread
/// exit, like `thread_local!` ones.
struct ThreadMap(LocalMap);

impl Drop for ThreadMap {
    fn drop(&mut self) {
        if let Some(payload) = self.0.destroy(false) {
            // As std does for a thread-local destructor that panics.
            drop(payload);
            eprintln!(
                "fatal runtime error: a goroutine::local! destructor panicked at thread exit"
            );
            std::process::abort();
        }
    }
}

thread_local! {
    static THREAD_MAP: ThreadMap = const { ThreadMap(LocalMap::new()) };
}

#[cold]
fn thread_map() -> Result<NonNull<LocalMap>, AccessError> {
    // The map lives until this thread's destructors run; during and after
    // them `try_with` fails.
    THREAD_MAP
        .try_with(|t| NonNull::from(&t.0))
        .map_err(|_| AccessError)
}

/// The running goroutine returned or panicked: drop its locals, on its own
/// stack, before its result is published, leaving its map all zero for the
/// next goroutine on the stack. Returns the first panic of a destructor.
///
/// A plain `current_g` suffices (not `current_g_checked`): the goroutine's
/// closure has returned, so it is in no preemptible region and no signal
/// can move it between the two reads.
///
/// A program that never uses a `local!` pays one relaxed load here: no
/// key has an index yet, so no map holds anything.
#[inline]
pub(crate) fn goroutine_exit() -> Option<Box<dyn Any + Send>> {
    if NEXT_INDEX.load(Ordering::Relaxed) == 1 {
        return None;
    }
    goroutine_exit_slow()
}

#[inline(never)]
fn goroutine_exit_slow() -> Option<Box<dyn Any + Send>> {
    let map = m::current_g()?.locals_slot()?.cast::<LocalMap>();
    // SAFETY: the goroutine's own map, in its own stack (module note).
    let map = unsafe { map.as_ref() };
    if map.cap.get() == 0 {
        return None;
    }
    map.destroy(true)
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;
    use std::sync::atomic::{AtomicUsize, Ordering};

    static DROPS: AtomicUsize = AtomicUsize::new(0);

    struct Counted(u32);
    impl Drop for Counted {
        fn drop(&mut self) {
            DROPS.fetch_add(1, Ordering::SeqCst);
        }
    }

    crate::local! {
        static A: Cell<u32> = Cell::new(7);
        static B: Counted = Counted(1);
    }

    #[test]
    fn thread_map_is_per_thread_and_dropped_at_exit() {
        A.set(8);
        assert_eq!(A.get(), 8);
        let before = DROPS.load(Ordering::SeqCst);
        std::thread::spawn(|| {
            assert_eq!(A.get(), 7, "a fresh thread gets a fresh value");
            B.with(|b| assert_eq!(b.0, 1));
        })
        .join()
        .unwrap();
        assert!(DROPS.load(Ordering::SeqCst) > before);
        assert_eq!(A.get(), 8);
    }
}
