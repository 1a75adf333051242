//! The attack suite: every way a program was once found to decide a later
//! call, read run state or a secret, or act beyond what a person approved,
//! run as the attack was, each with the defence that stops it
//! (docs/SECURITY.md names the structural reason each holds). A test here
//! must fail when its defence is taken out.
//!
//! One file per defence; round three's breaks (issue 30) and round two's
//! (issue 11) side by side.

mod approval_binding;
mod git_dir;
mod pinned_commands;
mod questions;
mod read_once;
mod retention;
mod round_two;
mod run_state;
mod secrets;
mod server_env;
