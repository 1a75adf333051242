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
    // What the library logs as a warning (a journal written or synced
    // after its run's receipt that failed, an MCP tool left out of the
    // catalog, a schema cache that could not be written) goes to stderr:
    // nothing else would say it.
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_max_level(tracing::Level::WARN)
        .without_time()
        .with_target(false)
        .with_ansi(false)
        .init();
    cli::main()
}
