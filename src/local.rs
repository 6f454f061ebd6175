//! Goroutine-local storage: [`local!`](crate::local!) and [`LocalKey`].
//!
//! # Design
//! A goroutine can resume on another OS thread after any runtime call, so a
//! `thread_local!` is the wrong home for state that belongs to the running
//! code (`docs/soundness.md`). A [`LocalKey`] instead finds its value in a
//! [`LocalMap`] owned by the *running goroutine*: the map's pointer sits in
//! the runtime's reserved line at the top of the goroutine's stack
//! (`stack::TOP_RESERVED`; the G record's two cache lines are full), so it
//! travels with the goroutine like the rest of its stack. Outside a
//! goroutine (a plain thread) the map is a per-thread one, so the same key
//! behaves like a `thread_local!` there.
//!
//! - Keys get a process-wide index on first use (`LocalKey::index`, one
//!   CAS, then a relaxed load); a map is a vector of slots by index.
//! - Values are boxed separately (the slot holds a raw pointer), so a `&T`
//!   handed to `with` stays valid while the vector grows (an initialiser
//!   or a `with` inside `with` may add slots).
//!
//! # Invariants
//! - A goroutine's map, and the stack word naming it, are touched only by
//!   the goroutine itself while it runs: by `with` on its stack, and by
//!   [`goroutine_exit`] on its stack before its result is published, which
//!   drops the values, frees the map and nulls the word. The scheduler
//!   never looks at them, so they need no lock and no atomic. A stack is
//!   free only with a null word (fresh stack memory reads zero), so a
//!   goroutine never inherits another's map.
//! - No borrow of a map is held while user code runs (an initialiser, the
//!   closure given to `with`, a destructor): map methods borrow the slot
//!   vector for a few instructions and return raw pointers or indices.
//! - A slot is `Empty`, `Initializing` (its initialiser runs: a `with` of
//!   the same key from inside it panics, as a recursive initialisation is
//!   a bug) or `Full`.
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
use std::cell::{Cell, RefCell, UnsafeCell};
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
    pub fn set(&'static self, value: T) {
        self.with(|c| c.set(value))
    }

    /// A copy of this goroutine's value.
    pub fn get(&'static self) -> T
    where
        T: Copy,
    {
        self.with(Cell::get)
    }

    /// Takes this goroutine's value, leaving `T::default()`.
    pub fn take(&'static self) -> T
    where
        T: Default,
    {
        self.with(Cell::take)
    }

    /// Replaces this goroutine's value, returning the old one.
    pub fn replace(&'static self, value: T) -> T {
        self.with(|c| c.replace(value))
    }
}

impl<T: 'static> LocalKey<RefCell<T>> {
    /// Calls `f` with a shared borrow of this goroutine's value.
    ///
    /// # Panics
    /// If the value is mutably borrowed, or as [`with`](LocalKey::with).
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
    pub fn with_borrow_mut<F, R>(&'static self, f: F) -> R
    where
        F: FnOnce(&mut T) -> R,
    {
        self.with(|c| f(&mut c.borrow_mut()))
    }

    /// Sets this goroutine's value.
    pub fn set(&'static self, value: T) {
        self.with(|c| *c.borrow_mut() = value)
    }

    /// Takes this goroutine's value, leaving `T::default()`.
    pub fn take(&'static self) -> T
    where
        T: Default,
    {
        self.with(RefCell::take)
    }

    /// Replaces this goroutine's value, returning the old one.
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

#[derive(Clone, Copy)]
enum Slot {
    Empty,
    Initializing,
    Full {
        value: NonNull<()>,
        drop: unsafe fn(NonNull<()>),
    },
}

/// One goroutine's (or thread's) values, by key index. All methods are
/// called only by the map's owner, never while user code holds a borrow
/// of the slot vector (module note), which is what makes the `UnsafeCell`
/// accesses below exclusive.
pub(crate) struct LocalMap {
    slots: UnsafeCell<Vec<Slot>>,
    destroying: Cell<bool>,
}

impl LocalMap {
    pub(crate) const fn new() -> LocalMap {
        LocalMap {
            slots: UnsafeCell::new(Vec::new()),
            destroying: Cell::new(false),
        }
    }

    #[inline]
    fn get(&self, index: usize) -> Option<NonNull<()>> {
        // SAFETY: exclusive per the type's note; a shared read here.
        match unsafe { &*self.slots.get() }.get(index) {
            Some(Slot::Full { value, .. }) => Some(*value),
            _ => None,
        }
    }

    fn begin_init(&self, index: usize) -> Result<(), AccessError> {
        if self.destroying.get() {
            return Err(AccessError);
        }
        // SAFETY: exclusive per the type's note.
        let slots = unsafe { &mut *self.slots.get() };
        if slots.len() <= index {
            slots.resize(index + 1, Slot::Empty);
        }
        match slots[index] {
            Slot::Empty => {
                slots[index] = Slot::Initializing;
                Ok(())
            }
            Slot::Initializing => {
                panic!("goroutine::local! value used by its own initialiser (recursive initialisation)")
            }
            Slot::Full { .. } => unreachable!("local slot initialised twice"),
        }
    }

    fn finish_init(&self, index: usize, value: NonNull<()>, drop: unsafe fn(NonNull<()>)) {
        // SAFETY: exclusive per the type's note.
        let slots = unsafe { &mut *self.slots.get() };
        slots[index] = Slot::Full { value, drop };
    }

    fn abort_init(&self, index: usize) {
        // SAFETY: exclusive per the type's note.
        if let Some(s) = unsafe { &mut *self.slots.get() }.get_mut(index) {
            *s = Slot::Empty;
        }
    }

    /// Drops every value, in key order, and returns the first panic a
    /// destructor raised (the others' values are still dropped). While it
    /// runs, no value can be made (`AccessError`).
    fn destroy(&self) -> Option<Box<dyn Any + Send>> {
        self.destroying.set(true);
        // SAFETY: exclusive per the type's note; the vector is moved out
        // before any destructor (user code) runs.
        let slots = std::mem::take(unsafe { &mut *self.slots.get() });
        let mut first_panic = None;
        for slot in &slots {
            if let Slot::Full { value, drop } = *slot {
                // SAFETY: the slot owned the value; it is dropped once (the
                // vector is no longer reachable from the map).
                let r = panic::catch_unwind(AssertUnwindSafe(|| unsafe { drop(value) }));
                if let Err(payload) = r {
                    if first_panic.is_none() {
                        first_panic = Some(payload);
                    }
                }
            }
        }
        first_panic
    }
}

/// The map of the running goroutine, or of the calling thread outside one.
#[inline]
fn caller_map() -> Result<NonNull<LocalMap>, AccessError> {
    // The plain lookup is right unless a signal can stop the caller between
    // its two loads (a preemptible region: see `m::current_g_checked`); a
    // goroutine that entered one set the flag itself (program order).
    let g = if crate::runtime::asyncpreempt::regions_used() {
        m::current_g_checked()
    } else {
        m::current_g()
    };
    match g.and_then(|g| g.locals_slot()) {
        Some(slot) => Ok(goroutine_map(slot)),
        None => thread_map(),
    }
}

/// The map in a running goroutine's stack word, made on first use.
#[inline]
fn goroutine_map(slot: *mut *mut LocalMap) -> NonNull<LocalMap> {
    // SAFETY: the word is in the reserved top line of the running
    // goroutine's own stack, mapped while it runs and used only by it.
    match NonNull::new(unsafe { slot.read() }) {
        Some(map) => map,
        None => new_goroutine_map(slot),
    }
}

#[cold]
fn new_goroutine_map(slot: *mut *mut LocalMap) -> NonNull<LocalMap> {
    let map = NonNull::from(Box::leak(Box::new(LocalMap::new())));
    // SAFETY: as in `goroutine_map`.
    unsafe { slot.write(map.as_ptr()) };
    map
}

/// A thread's map outside the runtime: its values are dropped at thread
/// exit, like `thread_local!` ones.
struct ThreadMap(LocalMap);

impl Drop for ThreadMap {
    fn drop(&mut self) {
        if let Some(payload) = self.0.destroy() {
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
/// stack, before its result is published, and free its map (its stack's
/// word is null again before the stack is recycled). Returns the first
/// panic of a destructor.
pub(crate) fn goroutine_exit() -> Option<Box<dyn Any + Send>> {
    let slot = m::current_g_checked()?.locals_slot()?;
    // SAFETY: as in `goroutine_map`.
    let map = NonNull::new(unsafe { slot.read() })?;
    // SAFETY: the goroutine's own map, used only by it (module note). While
    // destructors run the word still names it, so their accesses find it
    // being destroyed.
    let panicked = unsafe { map.as_ref() }.destroy();
    // SAFETY: as in `goroutine_map`.
    unsafe { slot.write(std::ptr::null_mut()) };
    // SAFETY: made by `new_goroutine_map` from a Box, unreachable now.
    drop(unsafe { Box::from_raw(map.as_ptr()) });
    panicked
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
