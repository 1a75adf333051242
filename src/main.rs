//! The `codemode` binary: a thin layer over the library.

mod cli;

fn main() -> std::process::ExitCode {
    // First, before any thread or runtime: `codemode __sandbox-exec` is the
    // bash tool's sandbox launcher (hidden; crates/sandbox/src/launcher.rs;
    // the small codemode-sandbox binary runs the same code).
    if let Some(code) = codemode::sandbox::launcher::main_if_launcher() {
        return code;
    }
    // Processes of the same uid (hooks, approvers, MCP servers, a sandboxed
    // command that reached the host's /proc) cannot read this process's
    // memory or /proc/<pid>/environ, nor ptrace it; root in the initial user
    // namespace still can.
    #[cfg(target_os = "linux")]
    let _ = nix::sys::prctl::set_dumpable(false);
    let cli = cli::parse();
    // What the library logs as a warning (a journal written or synced
    // after its run's receipt that failed, an MCP tool left out of the
    // catalog, a schema cache that could not be written) goes to stderr:
    // nothing else would say it. `-v` adds its debug log, `-q` keeps only
    // errors.
    tracing_subscriber::fmt()
        .with_writer(|| RedactedStderr(Vec::new()))
        .with_max_level(cli.log_level())
        .without_time()
        .with_target(false)
        .with_ansi(false)
        .init();
    cli::main(cli)
}

/// One log line for stderr, written when dropped with every MCP secret
/// known so far redacted (`codemode::mcp::redact_known_secrets`): the
/// libraries under codemode log what they have, and rmcp's error lines
/// quote request URLs with their `${VAR}` values expanded.
struct RedactedStderr(Vec<u8>);

impl std::io::Write for RedactedStderr {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Drop for RedactedStderr {
    fn drop(&mut self) {
        let text = String::from_utf8_lossy(&self.0);
        let shown = codemode::mcp::redact_known_secrets(&text);
        let _ = std::io::Write::write_all(&mut std::io::stderr().lock(), shown.as_bytes());
    }
}
