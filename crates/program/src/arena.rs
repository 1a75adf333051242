//! The parsers' arena, bounded.
//!
//! oxc's parser puts what it builds in an arena that gives nothing back
//! until it is reset, and its TypeScript parse backtracks: where a `<` may
//! open type arguments, a `(` an arrow function's parameters and a `{[` a
//! type literal, an object pattern or an object literal, it parses the rest
//! one way, gives up, and parses it again another way. Nested, the tries
//! multiply: the 75-byte text `a<({[` repeated 15 times took 4.2 GB and
//! 5.9 s to fail, each repetition tripling both (docs/FUZZING.md). Nothing
//! inside the parser can be told to stop; what it allocates can be.
//!
//! So every parse, transform and code generation of a program runs in one
//! arena of a fixed size (oxc_allocator's single-chunk arena, which cannot
//! grow). When it is full, oxc's next allocation panics ("out of memory");
//! [`run_bounded`] catches that panic on this thread and reports
//! [`Stopped::Exhausted`]. Time follows memory: the backtracking allocates
//! as it goes, so a parse stopped at 64 MiB has run for tens of
//! milliseconds. The arena's pages are reserved, not touched, until used:
//! a small program costs what it allocates.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::{Cell, RefCell};
use std::mem::ManuallyDrop;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::ptr::NonNull;
use std::sync::Once;

use oxc_allocator::Allocator;

/// An arena of at most a fixed number of bytes for one thread's parses.
///
/// The allocator is never dropped: oxc_allocator frees a single-chunk
/// arena only with its `fixed_size` feature (a different scheme), so, as
/// its own users of `from_raw_parts` do, this type frees the memory itself.
pub(crate) struct BoundedArena {
    allocator: ManuallyDrop<Allocator>,
    start: NonNull<u8>,
    layout: Layout,
    bytes: usize,
}

impl BoundedArena {
    /// An arena of `bytes` (rounded up to oxc's chunk alignment, and at
    /// least its smallest chunk). `None` when the system has no room for
    /// the reservation.
    pub(crate) fn new(bytes: usize) -> Option<BoundedArena> {
        let align = Allocator::RAW_MIN_ALIGN;
        let bytes = bytes.max(Allocator::RAW_MIN_SIZE).checked_next_multiple_of(align)?;
        let layout = Layout::from_size_align(bytes, align).ok()?;
        // SAFETY: `layout` has a non-zero size (at least RAW_MIN_SIZE).
        #[allow(unsafe_code)]
        let start = NonNull::new(unsafe { System.alloc(layout) })?;
        // SAFETY: `start` is the start of a fresh, writable allocation of
        // `layout`, aligned to RAW_MIN_ALIGN; `bytes` is a multiple of it,
        // at least RAW_MIN_SIZE, and the region is the whole allocation.
        // The allocator is never dropped (ManuallyDrop), so it never frees
        // it: `Drop` below does, with the allocator that made it.
        #[allow(unsafe_code)]
        let allocator = unsafe { Allocator::from_raw_parts(start, bytes, start, layout) };
        Some(BoundedArena { allocator: ManuallyDrop::new(allocator), start, layout, bytes })
    }

    /// The arena, for the parser.
    pub(crate) fn allocator(&self) -> &Allocator {
        &self.allocator
    }

    /// Its size, bytes.
    pub(crate) fn bytes(&self) -> usize {
        self.bytes
    }

    /// Bytes in use since the last reset.
    pub(crate) fn used_bytes(&self) -> usize {
        self.allocator.used_bytes()
    }

    /// Empties the arena (its pages stay the process's).
    pub(crate) fn reset(&mut self) {
        self.allocator.reset();
    }
}

impl Drop for BoundedArena {
    fn drop(&mut self) {
        // SAFETY: `start` was allocated by `System` with `layout` in `new`
        // and is freed once, here. The allocator that used it is never
        // dropped and goes with `self`; nothing allocated in it outlives
        // the arena (everything borrows the allocator).
        #[allow(unsafe_code)]
        unsafe {
            System.dealloc(self.start.as_ptr(), self.layout)
        };
    }
}

/// Why a bounded parse stopped before it finished.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Stopped {
    /// The arena was full.
    Exhausted,
    /// The parser panicked for another reason (a bug in it), with its
    /// message.
    Panicked(String),
}

thread_local! {
    /// Set while [`run_bounded`] runs on this thread: the panic hook then
    /// keeps the panic's message here instead of printing it.
    static CAUGHT: RefCell<Option<Option<String>>> = const { RefCell::new(None) };
    /// Whether this thread is in [`run_bounded`].
    static BOUNDED: Cell<bool> = const { Cell::new(false) };
}

static QUIET_HOOK: Once = Once::new();

/// Runs `f` (a parse in a [`BoundedArena`]); a panic inside it is caught
/// and returned as [`Stopped`] rather than unwinding further, and is not
/// printed (the caller reports it). Needs unwinding panics: with
/// `panic = "abort"` a full arena aborts the process.
pub(crate) fn run_bounded<R>(f: impl FnOnce() -> R) -> Result<R, Stopped> {
    QUIET_HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if BOUNDED.get() {
                let message = info
                    .payload()
                    .downcast_ref::<&str>()
                    .map(|s| (*s).to_owned())
                    .or_else(|| info.payload().downcast_ref::<String>().cloned());
                CAUGHT.with(|c| *c.borrow_mut() = Some(message));
                return;
            }
            previous(info);
        }));
    });
    let outer = BOUNDED.replace(true);
    let result = catch_unwind(AssertUnwindSafe(f));
    BOUNDED.set(outer);
    let caught = CAUGHT.with(|c| c.borrow_mut().take());
    result.map_err(|_| match caught.flatten() {
        Some(m) if is_out_of_arena(&m) => Stopped::Exhausted,
        Some(m) => Stopped::Panicked(m),
        None => Stopped::Panicked("a panic without a message".to_owned()),
    })
}

/// Whether a panic message is oxc_allocator's for a full arena: `oom()`'s
/// "out of memory" or its `handle_alloc_error`'s "encountered allocation
/// error".
fn is_out_of_arena(message: &str) -> bool {
    message == "out of memory" || message.starts_with("encountered allocation error")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_arena_stops_the_work_and_is_reported_as_exhausted() {
        let arena = BoundedArena::new(1 << 20).expect("1 MiB");
        let stopped = run_bounded(|| {
            for _ in 0..(1 << 20) {
                arena.allocator().alloc([0u64; 8]);
            }
        });
        assert_eq!(stopped, Err(Stopped::Exhausted));
        assert!(arena.used_bytes() <= arena.bytes());
    }

    #[test]
    fn another_panic_is_caught_with_its_message() {
        let stopped = run_bounded(|| -> u32 { panic!("a parser bug") });
        assert_eq!(stopped, Err(Stopped::Panicked("a parser bug".to_owned())));
        // The thread is usable afterwards, and a later panic outside is not
        // swallowed.
        assert_eq!(run_bounded(|| 7), Ok(7));
        assert!(std::panic::catch_unwind(|| panic!("outside")).is_err());
    }

    #[test]
    fn an_arena_is_reusable_after_it_was_full() {
        let mut arena = BoundedArena::new(1 << 16).expect("64 KiB");
        let big = Layout::array::<u8>(1 << 17).expect("a layout");
        assert_eq!(run_bounded(|| arena.allocator().alloc_layout(big)).err(), Some(Stopped::Exhausted));
        arena.reset();
        assert_eq!(run_bounded(|| arena.allocator().alloc_str("after").len()), Ok(5));
    }
}
