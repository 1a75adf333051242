//! A program checked before it runs, once, for a host that runs it many
//! times (a program batch: one run per input line): what would fail every
//! run at its start fails here instead, before any run is made.

use std::sync::Arc;

use codemode_program::Program;

use super::Engine;
use super::dispatch::Dispatcher;
use crate::receipt::RunError;
use crate::vm::clock::RunClock;

impl Engine {
    /// Checks `program` as a run does before its first call, without
    /// running it: its size against the source limit (kind `limit`), its
    /// parse (kind `syntax`, with the line and column), and the admission
    /// check of the calls it names literally against this engine's catalog
    /// as it is now (kind `admission`; docs/RECEIPTS.md). A program's
    /// `input` plays no part in any of them, so one that passes here may
    /// still fail in a run for what its input holds.
    ///
    /// # Errors
    /// The error each run of the program would end with at its start.
    pub fn check_program(&self, program: &Program) -> Result<(), RunError> {
        if let Some(e) = crate::vm::over_source_limit(program, &self.shared.limits) {
            return Err(e);
        }
        let normalised = codemode_program::normalise(program)?;
        let clock = Arc::new(RunClock::new(self.shared.limits.deadline));
        let dispatcher = Dispatcher::new(self.shared.clone(), Arc::from("check"), clock);
        match dispatcher.admit(&normalised.tool_uses) {
            Some(refused) => Err(refused),
            None => Ok(()),
        }
    }
}
