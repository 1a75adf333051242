//! The `codemode` binary: a thin layer over the library.

mod cli;

fn main() -> std::process::ExitCode {
    // First, before any thread or runtime: `codemode __sandbox-exec` is the
    // bash tool's sandbox launcher (hidden; src/sandbox/launcher.rs).
    if let Some(code) = codemode::sandbox::launcher::main_if_launcher() {
        return code;
    }
    // Processes of the same uid (hooks, approvers, MCP servers, a sandboxed
    // command that reached the host's /proc) cannot read this process's
    // memory or /proc/<pid>/environ, nor ptrace it; root in the initial user
    // namespace still can.
    #[cfg(target_os = "linux")]
    let _ = nix::sys::prctl::set_dumpable(false);
    cli::main()
}
