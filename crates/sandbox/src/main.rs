//! `codemode-sandbox __sandbox-exec 4 spec-on-stdin`: the bash tool's launcher as a
//! small binary of its own (no VM, no engine), started by the engine for
//! each confined bash call. Anything else is refused.

use std::process::ExitCode;

fn main() -> ExitCode {
    match codemode_sandbox::launcher::main_if_launcher() {
        Some(code) => code,
        None => {
            eprintln!(
                "codemode-sandbox is the launcher of codemode's bash tool, started by codemode as \
                 `codemode-sandbox {} {} {}` with its spec on stdin; it is not meant to be run by hand",
                codemode_sandbox::launcher::SUBCOMMAND,
                codemode_sandbox::launcher::PROTOCOL,
                codemode_sandbox::launcher::SPEC_ON_STDIN
            );
            ExitCode::from(2)
        }
    }
}
