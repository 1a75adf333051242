//! codemode: an embedded-JavaScript composition engine, code-mode first.
//!
//! A model writes one short program; the engine runs it in a fresh QuickJS
//! VM whose only way out is `await tools.call(name, args)`. Every call
//! passes the same gate as a direct call, and every run returns a
//! [`Receipt`] naming each call, its decision and its status.
//!
//! ```
//! use codemode::receipt::{CallStatus, RunStatus};
//! use codemode::{Engine, Program};
//!
//! let workspace = tempfile::tempdir()?;
//! std::fs::write(workspace.path().join("notes.md"), "# Notes\nship it\n")?;
//! # // Run state goes to the user's state folder; here, a private one.
//! # let state = tempfile::tempdir()?;
//! let engine = Engine::builder().workspace(workspace.path())
//! #   .state_dir(state.path())
//!     .build()?;
//! let receipt = engine.execute_blocking(Program::new(r#"
//!     const files = await tools.file_search({query: "*.md"});
//!     const first = await tools.read({path: files.content[0], limit: 1});
//!     return {files: files.content.length, head: first.content};
//! "#));
//! assert_eq!(receipt.status, RunStatus::Completed);
//! assert_eq!(receipt.value["files"], 1);
//! assert!(receipt.calls.iter().all(|c| c.status == CallStatus::Ok));
//! println!("{}", receipt.to_json_pretty());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! The root holds the nouns: [`Engine`] (a cheap-clone handle) built by
//! [`EngineBuilder`], a [`Program`] in, a [`Receipt`] out, the [`Tool`]
//! trait and its [`ToolSpec`], the [`Approver`] trait, the [`Policy`], the
//! [`Limits`], the QuickJS [`Vm`] and one [`Error`]. The rest is in named
//! modules: [`run`], [`batch`], [`tool`], [`approval`], [`elicitation`],
//! [`policy`], [`config`] (`codemode.toml`: the policy, `[sandbox]`,
//! `[journal]`, `[limits]`), [`receipt`], [`error`], [`journal`], [`mcp`],
//! [`trust`], [`sandbox`] (the bash tool's confinement).
//!
//! See `docs/ARCHITECTURE.md` for the modules and the data flow, and
//! `docs/RECEIPTS.md` for the receipt JSON.

#![deny(missing_docs)]
// Denied crate-wide; the exceptions are the VM's calls into QuickJS's C API
// that rquickjs does not wrap (vm/args_json.rs, vm/late_builtins.rs,
// vm/prelude.rs, vm/prelude_bytecode.rs, vm/host_call.rs), each
// `#[allow(unsafe_code)]` with a SAFETY comment; docs/ARCHITECTURE.md
// lists them.
#![deny(unsafe_code)]

mod catalog;
pub mod config;
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
pub mod telemetry;
mod tools;
pub mod trust;
mod vm;

pub use catalog::{Tool, ToolSpec};
pub use codemode_base::limits::Limits;
pub use codemode_program::Program;
pub use engine::{Engine, EngineBuilder};
pub use error::Error;
pub use gate::{Approver, Policy};
pub use receipt::Receipt;
pub use vm::Vm;

pub use codemode_base::{display_text, limit_settings};

/// Running programs: the handle of a run, its options, and what the
/// engine's entry points take and give besides [`Program`] and
/// [`Receipt`].
pub mod run {
    pub use crate::engine::{
        CallOutcome, Canceller, ClockPause, Compensated, EXECUTE_TOOLS, NotUndone, OVERRUN_GRACE,
        RollbackOptions, RollbackReport, Run, RunOptions, ToolsShown,
    };
    pub use crate::vm::PRELUDE_NAME;
    pub use codemode_program::{BLANK_PROGRAM, ExecuteInput, MAX_INPUT_BYTES, is_blank};
}

/// Batches: many single calls through the gate, with bounds and one
/// receipt (docs/BATCH.md).
pub mod batch {
    pub use crate::engine::{BatchItem, BatchOptions, BatchRun, ItemStatus};
    pub use codemode_program::{Batch, BatchCall, BatchError};
}

/// Tools: what a tool is given and returns, how it describes itself, and
/// the catalog's TypeScript declarations (docs/TOOL_CONTRACT.md,
/// docs/CATALOG.md).
pub mod tool {
    pub use crate::catalog::{
        Annotations, CatalogError, DeclarationOptions, Loading, PrimaryArgument, RetryHint, TOOL_SEARCH,
        TOOL_SEARCH_ACTIVATION, Tool, ToolContext, ToolError, ToolFuture, ToolOutput, ToolSource, ToolSpec,
        compact_type, declarations, declarations_with, signature_line,
    };
}

/// Questions an MCP server asks the user during a call (MCP
/// `elicitation/create`), and the trait that answers them.
pub mod elicitation {
    pub use crate::catalog::{
        Elicitation, ElicitationAction, ElicitationAnswer, ElicitationFuture, ElicitationMode, Elicitor,
    };
    pub use crate::gate::{ElicitationReply, ElicitationReplyFuture, ElicitationRequest};
}

/// Approvals: the [`Approver`] trait's requests and answers, and the
/// approvers codemode ships (docs/POLICY.md).
pub mod approval {
    pub use crate::gate::{
        AllowApprover, Answer, Approval, ApprovalFuture, ApprovalRequest, Approver, ApproverError,
        BatchApprover, CommandApprover, DenyApprover, NOT_ANSWERED_REASON, PauseApprover, PromptApprover,
        RunGrant, RunGrants, approver_from_spec, default_approver,
    };
}

/// The policy's parts: mode, posture, rules, per-tool settings and hooks
/// (docs/POLICY.md); the rest of `codemode.toml` is in [`config`].
pub mod policy {
    pub use crate::config::PolicyError;
    pub use crate::gate::compensation::Compensation;
    pub use crate::gate::{DEFAULT_HOOK_TIMEOUT, HookSpec, Mode, Policy, Posture, Rule, Rules, ToolSettings};
    pub use codemode_base::limit_settings::LimitSettings;
    /// Limits per tool and per MCP server: `max_in_flight`, `rate`,
    /// `retry` (docs/LIMITS.md).
    pub use codemode_base::pacing::{self, CallLimits, Rate, RetryPolicy};
}

pub mod error;
