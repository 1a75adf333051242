//! QuickJS hosting: runtime setup, limits, the run clock, the `tools.call`
//! binding, and the VM threads.
//!
//! Nothing here knows about policy: every call goes to the dispatcher.

mod args_json;
mod blank;
pub(crate) mod calls;
pub(crate) mod clock;
mod hints;
pub(crate) mod host_call;
mod instance;
pub(crate) use instance::{over_source_limit, paused_again, stopped_in_replay};
pub(crate) mod journaling;
mod js_error;
mod late_builtins;
pub(crate) mod pool;
mod prelude;
mod prelude_bytecode;
mod recent;

pub use codemode_base::limits::Limits;
pub use instance::Vm;
pub(crate) use instance::VmSetup;
pub use prelude::PRELUDE_NAME;
