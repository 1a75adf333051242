//! codemode: an embedded-JavaScript composition engine, code-mode first.
//!
//! A model writes one short program; the engine runs it in a fresh QuickJS
//! VM whose only way out is `await tools.call(name, args)`. Every call
//! passes the same gate as a direct call, and every run returns a
//! [`Receipt`] naming each call, its decision and its status.
//!
//! ```no_run
//! use codemode::{Engine, Program, RunStatus};
//!
//! let engine = Engine::builder().workspace(".").build()?;
//! let receipt = engine.execute_blocking(Program::new(r#"
//!     const files = await tools.file_search({query: "*.md"});
//!     const first = await tools.read({path: files.content[0], limit: 5});
//!     return {files: files.content.length, head: first.content};
//! "#));
//! assert_eq!(receipt.status, RunStatus::Completed);
//! println!("{}", receipt.to_json_pretty());
//! # Ok::<(), codemode::BuildError>(())
//! ```
//!
//! See `docs/ARCHITECTURE.md` for the modules and the data flow, and
//! `docs/RECEIPTS.md` for the receipt JSON.

#![deny(missing_docs)]
// One documented exception, in vm/prelude.rs: loading the prelude's own
// bytecode (QuickJS offers no safe way to read bytecode).
#![deny(unsafe_code)]

mod catalog;
mod engine;
#[doc(hidden)]
pub mod fuzzing;
mod gate;
pub mod journal;
#[cfg(unix)]
pub mod mcp;
pub mod receipt;
mod rule;
pub mod sandbox;
mod tools;
pub mod trust;
mod vm;

pub use catalog::{
    Annotations, CatalogError, DeclarationOptions, Elicitation, ElicitationAction, ElicitationAnswer,
    ElicitationFuture, ElicitationMode, Elicitor, Loading, PrimaryArgument, TOOL_SEARCH, Tool, ToolContext,
    ToolError, ToolFuture, ToolOutput, ToolSource, ToolSpec, declarations, declarations_with,
};
pub use codemode_base::limit_settings::LimitSettings;
pub use codemode_base::limits::Limits;
pub use codemode_base::{display_text, limit_settings};
pub use codemode_program::{Batch, BatchCall, BatchError, ExecuteInput, Program};
pub use engine::{
    BatchItem, BatchOptions, BatchRun, BuildError, CallOutcome, Canceller, ClockPause, EXECUTE_TOOLS, Engine,
    EngineBuilder, ItemStatus, Run, RunOptions,
};
pub use gate::{
    AllowApprover, Answer, Approval, ApprovalFuture, ApprovalRequest, Approver, ApproverError,
    CommandApprover, DEFAULT_HOOK_TIMEOUT, DenyApprover, ElicitationReply, ElicitationReplyFuture,
    ElicitationRequest, HookSpec, Mode, NOT_ANSWERED_REASON, PauseApprover, Policy, PolicyError, Posture,
    PromptApprover, Rule, Rules, ToolSettings, approver_from_spec, default_approver,
};
pub use receipt::{
    CallReceipt, CallStatus, Caller, Decision, ElicitationRecord, ErrorKind, LogEntry, PendingCall,
    RECEIPT_VERSION, Receipt, RenderOptions, RunError, RunStatus, Truncation,
};
pub use vm::{PRELUDE_NAME, Vm};
