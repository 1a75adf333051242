//! `Limits`: every bound a run is held to, in one place.

use std::time::Duration;

/// The bounds of one run. Every field has a default (DESIGN.md §2); each
/// limit ends in its own error kind or call status, never in a crash.
///
/// What each does *not* cover is said on the field: in particular the JS
/// interrupt only stops JavaScript, never a host call, which is what the
/// run deadline and the per-tool timeout are for.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Limits {
    /// Memory the VM's allocator may hold, in bytes; past it allocation
    /// throws and an uncaught failure ends the run with error kind `memory`.
    /// Tool results count once they are in the VM. Default: 64 MiB.
    pub memory_bytes: usize,
    /// JS stack, in bytes; deep recursion throws and ends the run with kind
    /// `stack`. Must stay below the VM thread's stack (8 MiB). Default: 1 MiB.
    pub stack_bytes: usize,
    /// Size of the program source, in bytes; a longer program is refused with
    /// kind `limit` before it runs. Default: 64 KiB.
    pub source_bytes: usize,
    /// Tool calls per run, refused ones included; the call past it is refused
    /// and ends the run with kind `limit`. Default: 1,000.
    pub max_calls: usize,
    /// Calls running at once; further calls wait in order for a free slot
    /// (they are not refused). Default: 16.
    pub max_in_flight: usize,
    /// Wall time of the run, not counting time in which it waits on people
    /// alone: no JavaScript runs and every call still running waits for
    /// its approval or for an answer to a question its tool asked. So a
    /// person may take their time over an approval, but JavaScript that
    /// runs meanwhile (a busy loop next to the call, code after an
    /// un-awaited call) and other calls that keep running count.
    /// A busy loop is stopped by the VM's interrupt handler; a wait on tool
    /// calls by the run's own timer; calls still running are cancelled and
    /// left `in_flight`. A program QuickJS does not interrupt in time (a
    /// loop of slow built-ins, checked every 10,000 branches) is answered
    /// by the engine without its VM 10 s past the deadline
    /// (`codemode::run::OVERRUN_GRACE`). Default: 60 s.
    pub deadline: Duration,
    /// Time one tool call may take, unless its `ToolSpec::timeout_ms` says
    /// otherwise; the call then fails with a `timeout` ToolError. Counted
    /// from when the call starts running: a wait for a slot (this run's
    /// `max_in_flight`, a tool's or MCP server's limits) does not count.
    /// With retries, each attempt has its own. Default: 30 s.
    pub tool_timeout: Duration,
    /// Size of one call's result content kept for the program, in bytes
    /// (string length, or compact JSON); the rest is spilled. Default: 100 KiB.
    pub result_bytes: usize,
    /// Size of the program's return value kept in the receipt, in bytes of
    /// compact JSON; the rest is spilled. Default: 16 KiB.
    pub value_bytes: usize,
    /// Bytes one run may write to spill files (results over `result_bytes`
    /// and the return value); past it results are still cut but no longer
    /// spilled, and the call's note says so. Default: 256 MiB.
    pub spill_bytes: u64,
    /// Console lines kept in the receipt; later lines are counted in
    /// `logs_dropped`. Default: 256.
    pub log_lines: usize,
    /// Console text kept in the receipt, in bytes. Default: 64 KiB.
    pub log_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            memory_bytes: 64 << 20,
            stack_bytes: 1 << 20,
            source_bytes: 64 << 10,
            max_calls: 1_000,
            max_in_flight: 16,
            deadline: Duration::from_secs(60),
            tool_timeout: Duration::from_secs(30),
            result_bytes: 100 << 10,
            value_bytes: 16 << 10,
            spill_bytes: 256 << 20,
            log_lines: 256,
            log_bytes: 64 << 10,
        }
    }
}

/// Stack size of the threads that run VMs, in bytes.
pub const VM_THREAD_STACK: usize = 8 << 20;

impl Limits {
    /// Checks the limits make sense together.
    ///
    /// # Errors
    /// The name of the first field that is out of range, and why.
    pub fn validate(&self) -> Result<(), (&'static str, String)> {
        let nonzero = [
            ("memory_bytes", self.memory_bytes),
            ("stack_bytes", self.stack_bytes),
            ("source_bytes", self.source_bytes),
            ("max_calls", self.max_calls),
            ("max_in_flight", self.max_in_flight),
            ("result_bytes", self.result_bytes),
            ("value_bytes", self.value_bytes),
        ];
        for (field, value) in nonzero {
            if value == 0 {
                return Err((field, "must be greater than zero".into()));
            }
        }
        if self.memory_bytes < 1 << 20 {
            return Err(("memory_bytes", "must be at least 1 MiB (the prelude needs room)".into()));
        }
        if self.stack_bytes > VM_THREAD_STACK / 2 {
            return Err((
                "stack_bytes",
                format!("must be at most {} bytes, half the VM thread's stack", VM_THREAD_STACK / 2),
            ));
        }
        if self.deadline.is_zero() {
            return Err(("deadline", "must be greater than zero".into()));
        }
        if self.tool_timeout.is_zero() {
            return Err(("tool_timeout", "must be greater than zero".into()));
        }
        Ok(())
    }
}
