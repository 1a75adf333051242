//! OpenTelemetry in the CLI: the process's OTLP sink, made once from the
//! standard `OTEL_*` variables (codemode-otel; docs/TELEMETRY.md), handed
//! to every engine the CLI builds, and flushed before the process exits;
//! and the `TRACEPARENT` variable (the OpenTelemetry specification's
//! environment carrier) a `codemode run` starts its run under.

use std::sync::{Arc, OnceLock};

use codemode::telemetry::TraceContext;
use codemode_otel::OtlpSink;

/// The process's sink once made: `None` inside when the environment asks
/// for no export.
static SINK: OnceLock<Option<Arc<OtlpSink>>> = OnceLock::new();

/// The process's sink, made on first use; `None` when the environment asks
/// for no export (or its settings are wrong: said once on stderr).
fn cell() -> &'static Option<Arc<OtlpSink>> {
    SINK.get_or_init(|| match OtlpSink::from_env() {
        Ok(sink) => sink,
        Err(e) => {
            tracing::warn!("OpenTelemetry export is off: {e}");
            None
        }
    })
}

/// The sink an engine the CLI builds exports to, when there is one.
pub(crate) fn sink() -> Option<Arc<dyn codemode::telemetry::TraceSink>> {
    cell().clone().map(|sink| sink as Arc<dyn codemode::telemetry::TraceSink>)
}

/// The span a run of this process starts under: the `TRACEPARENT`
/// variable, when it holds a valid `traceparent` (a malformed one is
/// ignored, as W3C Trace Context asks).
pub(crate) fn parent_from_env() -> Option<TraceContext> {
    TraceContext::parse(&std::env::var("TRACEPARENT").ok()?)
}

/// Sends what the sink holds, if one was made (before the process exits).
pub(crate) fn shutdown() {
    if let Some(Some(sink)) = SINK.get() {
        sink.shutdown();
    }
}
