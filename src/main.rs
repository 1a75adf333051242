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
    let log = tracing_subscriber::fmt()
        .with_writer(|| RedactedStderr(Vec::new()))
        .with_max_level(cli.log_level())
        .without_time()
        .with_target(false)
        .with_ansi(false);
    if cli.log_level() == tracing::Level::WARN {
        // Warnings and errors only: said as the CLI says its own.
        log.event_format(WarningLine).init();
    } else {
        log.init();
    }
    cli::main(cli)
}

/// A warning or error the library logs, as one stderr line the way the
/// CLI says its own (`codemode: warning: ...`), after the spans it
/// happened in (`run{run_id=...}: `) as the default format gives them.
struct WarningLine;

impl<S, N> tracing_subscriber::fmt::FormatEvent<S, N> for WarningLine
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
    N: for<'a> tracing_subscriber::fmt::FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        ctx: &tracing_subscriber::fmt::FmtContext<'_, S, N>,
        mut writer: tracing_subscriber::fmt::format::Writer<'_>,
        event: &tracing::Event<'_>,
    ) -> std::fmt::Result {
        let level = if *event.metadata().level() == tracing::Level::ERROR { "error" } else { "warning" };
        write!(writer, "codemode: {level}: ")?;
        for span in ctx.event_scope().into_iter().flat_map(|scope| scope.from_root()) {
            write!(writer, "{}", span.name())?;
            let extensions = span.extensions();
            if let Some(fields) = extensions.get::<tracing_subscriber::fmt::FormattedFields<N>>()
                && !fields.is_empty()
            {
                write!(writer, "{{{fields}}}")?;
            }
            write!(writer, ": ")?;
        }
        ctx.field_format().format_fields(writer.by_ref(), event)?;
        writeln!(writer)
    }
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
