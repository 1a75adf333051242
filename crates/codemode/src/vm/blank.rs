//! A VM's run-independent part, made before its run is asked for.
//!
//! A [`Blank`] is a QuickJS runtime, a context with the language's
//! built-ins, and the prelude read from its bytecode: most of a VM's
//! start (about 0.8M of its 1.07M instructions), and nothing of any run's
//! (no host binding, no limits, no journal, no program). A VM thread
//! keeps one spare: made when the thread starts and whenever it has just
//! finished its runs and has nothing else to run, and taken by the next
//! VM made on that thread, so a run's start skips that work. A blank is
//! used by one run at most, exactly as a VM made on the spot would be:
//! what a run leaves in its VM never reaches another run.

use std::cell::RefCell;

use rquickjs::{Context, Function, Persistent, Runtime};

use crate::receipt::{ErrorKind, RunError};

/// The built-ins a program gets: the language (base objects, `Date`,
/// `eval`/`Function`, `RegExp`, `JSON`, `Proxy`, `Map`/`Set`, typed arrays,
/// `Promise`, `WeakRef`). Left out: `performance` (a clock a journal could
/// not replay, and not part of the language) and `DOMException` (a web API).
/// The typed arrays, `Map`/`Set`, `WeakRef` and `Date` are made on the
/// program's first use of one ([`super::late_builtins`]), not here: making
/// them took about a fifth of a VM's start and 13 KiB of its memory.
type Intrinsics = (
    rquickjs::context::intrinsic::Eval,
    rquickjs::context::intrinsic::RegExpCompiler,
    rquickjs::context::intrinsic::RegExp,
    rquickjs::context::intrinsic::Json,
    rquickjs::context::intrinsic::Proxy,
    rquickjs::context::intrinsic::Promise,
);

/// A runtime, its context and the loaded prelude function (which takes the
/// host binding and returns the prelude's hooks).
pub(crate) struct Blank {
    // Field order is drop order: the JS handle goes before the context and
    // runtime.
    pub prelude: Persistent<Function<'static>>,
    pub ctx: Context,
    pub rt: Runtime,
}

thread_local! {
    /// This thread's spare blank, if one is made and not yet taken.
    static SPARE: RefCell<Option<Blank>> = const { RefCell::new(None) };
}

impl Blank {
    /// This thread's spare, or a new blank when there is none.
    ///
    /// # Errors
    /// An internal error when QuickJS cannot make the runtime or context
    /// (out of memory) or the prelude does not load.
    pub(crate) fn take_or_make() -> Result<Blank, RunError> {
        match SPARE.with(|spare| spare.borrow_mut().take()) {
            Some(blank) => Ok(blank),
            None => Blank::make(),
        }
    }

    /// A new blank.
    ///
    /// # Errors
    /// As [`Blank::take_or_make`].
    pub(crate) fn make() -> Result<Blank, RunError> {
        let internal = |what: &str, e: &dyn std::fmt::Display| {
            RunError::new(ErrorKind::Internal, format!("{what}: {e}"))
        };
        let rt = Runtime::new().map_err(|e| internal("could not create the JS runtime", &e))?;
        let ctx = Context::custom::<Intrinsics>(&rt)
            .map_err(|e| internal("could not create the JS context", &e))?;
        let prelude = ctx
            .with(|ctx| super::prelude::load(&ctx).map(|f| Persistent::save(&ctx, f)))
            .map_err(|e| internal("the prelude failed to load", &e))?;
        Ok(Blank { prelude, ctx, rt })
    }
}

/// Makes this thread's spare blank unless it has one. A blank that cannot
/// be made is left to the next run, which reports why.
pub(crate) fn make_spare() {
    if SPARE.with(|spare| spare.borrow().is_some()) {
        return;
    }
    if let Ok(blank) = Blank::make() {
        SPARE.with(|spare| *spare.borrow_mut() = Some(blank));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_spare_is_taken_once_and_then_made_again() {
        std::thread::spawn(|| {
            make_spare();
            let spare = SPARE.with(|s| s.borrow().as_ref().map(|b| b.ctx.as_raw()));
            let first = Blank::take_or_make().unwrap();
            assert_eq!(spare, Some(first.ctx.as_raw()), "the spare is taken first");
            assert!(SPARE.with(|s| s.borrow().is_none()), "and is gone");
            let second = Blank::take_or_make().unwrap();
            assert_ne!(second.ctx.as_raw(), first.ctx.as_raw(), "a second blank is a new context");
            // A blank runs the prelude's setup as a fresh VM's would.
            let vm_made = second.ctx.with(|ctx| second.prelude.clone().restore(&ctx).is_ok());
            assert!(vm_made);
        })
        .join()
        .unwrap();
    }
}
