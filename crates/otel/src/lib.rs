//! codemode's runs and calls as OpenTelemetry spans and counters, exported
//! with OTLP over HTTP (protobuf) when the standard environment variables
//! say so (docs/TELEMETRY.md).
//!
//! ```no_run
//! // OTEL_EXPORTER_OTLP_ENDPOINT=http://collector:4318 turns it on.
//! let sink = codemode_otel::OtlpSink::from_env().expect("valid settings");
//! let mut builder = codemode::Engine::builder();
//! if let Some(sink) = &sink {
//!     builder = builder.trace_sink(sink.clone());
//! }
//! let engine = builder.build()?;
//! // ... runs ...
//! if let Some(sink) = sink {
//!     sink.shutdown(); // sends what is queued
//! }
//! # Ok::<(), codemode::Error>(())
//! ```
//!
//! Each traced run gives one span (`codemode.run`) and one span per call
//! (`execute_tool <tool>`, the OpenTelemetry GenAI conventions' name),
//! children of the run's span, with the ids the engine gave them (so the
//! `traceparent` an MCP server received names the span exported here).
//! Counters: `codemode.runs`, `codemode.calls`, `codemode.calls.refused`,
//! `codemode.runs.paused`, `codemode.errors`.

#![deny(missing_docs)]

use std::borrow::Cow;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use codemode::receipt::{CallReceipt, CallStatus, Decision, Receipt, RunStatus};
use codemode::telemetry::{CallTiming, FinishedRun, TraceContext, TraceSink};
use opentelemetry::metrics::{Counter, MeterProvider as _};
use opentelemetry::trace::{SpanContext, SpanId, SpanKind, Status, TraceFlags, TraceId, TraceState};
use opentelemetry::{InstrumentationScope, KeyValue};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::metrics::SdkMeterProvider;
use opentelemetry_sdk::trace::{BatchSpanProcessor, SpanData, SpanEvents, SpanLinks, SpanProcessor};

/// What the environment asks for: which signals go out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Signals {
    /// Spans of runs and calls.
    pub traces: bool,
    /// Counters.
    pub metrics: bool,
}

impl Signals {
    /// The signals `var` (an environment lookup) turns on, by the
    /// OpenTelemetry specification's variables: none unless an OTLP
    /// endpoint is set (`OTEL_EXPORTER_OTLP_ENDPOINT`, or the signal's
    /// own `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` /
    /// `OTEL_EXPORTER_OTLP_METRICS_ENDPOINT`); none with
    /// `OTEL_SDK_DISABLED=true`; a signal whose `OTEL_TRACES_EXPORTER` /
    /// `OTEL_METRICS_EXPORTER` is `none` stays off.
    pub fn from(var: impl Fn(&str) -> Option<String>) -> Signals {
        let set = |name: &str| var(name).is_some_and(|v| !v.trim().is_empty());
        let is = |name: &str, value: &str| var(name).is_some_and(|v| v.trim().eq_ignore_ascii_case(value));
        if is("OTEL_SDK_DISABLED", "true") {
            return Signals { traces: false, metrics: false };
        }
        let any = set("OTEL_EXPORTER_OTLP_ENDPOINT");
        Signals {
            traces: (any || set("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")) && !is("OTEL_TRACES_EXPORTER", "none"),
            metrics: (any || set("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT"))
                && !is("OTEL_METRICS_EXPORTER", "none"),
        }
    }
}

/// A [`TraceSink`] exporting spans and counters with OTLP over HTTP.
///
/// Spans queue in a batch processor and go out from its own thread (at
/// most every `OTEL_BSP_SCHEDULE_DELAY` ms, 5000 by default), counters
/// every `OTEL_METRIC_EXPORT_INTERVAL` ms (60000); [`OtlpSink::shutdown`]
/// sends what is left. The exporters read the standard variables
/// themselves (`OTEL_EXPORTER_OTLP_*ENDPOINT`, `*_HEADERS`, `*_TIMEOUT`).
pub struct OtlpSink {
    spans: Option<BatchSpanProcessor>,
    meters: Option<(SdkMeterProvider, Counters)>,
    scope: InstrumentationScope,
}

impl std::fmt::Debug for OtlpSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OtlpSink")
            .field("traces", &self.spans.is_some())
            .field("metrics", &self.meters.is_some())
            .finish()
    }
}

/// The counters a sink adds to.
struct Counters {
    runs: Counter<u64>,
    calls: Counter<u64>,
    refused: Counter<u64>,
    paused: Counter<u64>,
    errors: Counter<u64>,
}

impl OtlpSink {
    /// The sink the process environment asks for: `Ok(None)` when it asks
    /// for none ([`Signals::from`]).
    ///
    /// # Errors
    /// When an exporter cannot be made (a malformed endpoint URL, an
    /// `OTEL_EXPORTER_OTLP_PROTOCOL` other than `http/protobuf`): a
    /// sentence naming the variable.
    pub fn from_env() -> Result<Option<Arc<OtlpSink>>, String> {
        let signals = Signals::from(|name| std::env::var(name).ok());
        if !signals.traces && !signals.metrics {
            return Ok(None);
        }
        for name in [
            "OTEL_EXPORTER_OTLP_PROTOCOL",
            "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
            "OTEL_EXPORTER_OTLP_METRICS_PROTOCOL",
        ] {
            if let Ok(protocol) = std::env::var(name)
                && !protocol.trim().is_empty()
                && protocol.trim() != "http/protobuf"
            {
                return Err(format!(
                    "{name}={protocol}: codemode exports OTLP over HTTP with protobuf only; set it to \
                     `http/protobuf` (and the endpoint to the collector's HTTP port, 4318 by default) or unset it"
                ));
            }
        }
        OtlpSink::new(signals).map(|sink| Some(Arc::new(sink)))
    }

    /// A sink exporting `signals` to the endpoints the environment names.
    ///
    /// # Errors
    /// When an exporter cannot be made: a sentence saying which.
    pub fn new(signals: Signals) -> Result<OtlpSink, String> {
        OtlpSink::build(signals, None)
    }

    /// A sink exporting `signals` to the OTLP/HTTP collector at `base`
    /// (`http://host:4318`: spans go to `<base>/v1/traces`, counters to
    /// `<base>/v1/metrics`), whatever the environment says.
    ///
    /// # Errors
    /// When an exporter cannot be made: a sentence saying which.
    pub fn to_endpoint(signals: Signals, base: &str) -> Result<OtlpSink, String> {
        OtlpSink::build(signals, Some(base.trim_end_matches('/')))
    }

    /// [`OtlpSink::new`], or [`OtlpSink::to_endpoint`] with `base`.
    fn build(signals: Signals, base: Option<&str>) -> Result<OtlpSink, String> {
        use opentelemetry_otlp::WithExportConfig as _;
        // The exporters' HTTP client (reqwest with rustls, built without a
        // crypto provider of its own, as for MCP servers over HTTPS) takes
        // the process's default provider: ring, unless one is installed.
        if rustls::crypto::CryptoProvider::get_default().is_none() {
            let _ = rustls::crypto::ring::default_provider().install_default();
        }
        let resource = resource();
        let spans = match signals.traces {
            true => {
                let mut exporter = opentelemetry_otlp::SpanExporter::builder().with_http();
                if let Some(base) = base {
                    exporter = exporter.with_endpoint(format!("{base}/v1/traces"));
                }
                let exporter = exporter.build().map_err(|e| {
                    format!("the OTLP span exporter: {e} (check OTEL_EXPORTER_OTLP_ENDPOINT)")
                })?;
                let mut processor = BatchSpanProcessor::builder(exporter).build();
                processor.set_resource(&resource);
                Some(processor)
            }
            false => None,
        };
        let meters = match signals.metrics {
            true => {
                let mut exporter = opentelemetry_otlp::MetricExporter::builder().with_http();
                if let Some(base) = base {
                    exporter = exporter.with_endpoint(format!("{base}/v1/metrics"));
                }
                let exporter = exporter.build().map_err(|e| {
                    format!("the OTLP metric exporter: {e} (check OTEL_EXPORTER_OTLP_ENDPOINT)")
                })?;
                let provider = SdkMeterProvider::builder()
                    .with_periodic_exporter(exporter)
                    .with_resource(resource)
                    .build();
                let counters = counters(&provider);
                Some((provider, counters))
            }
            false => None,
        };
        let scope = InstrumentationScope::builder("codemode").with_version(env!("CARGO_PKG_VERSION")).build();
        Ok(OtlpSink { spans, meters, scope })
    }

    /// Sends what is queued and stops the exporters (waits for the
    /// collector, at most the exporters' timeouts). Spans of runs that end
    /// afterwards are dropped.
    pub fn shutdown(&self) {
        // Both at once: a collector that does not answer holds the exit
        // for one exporter timeout (`OTEL_EXPORTER_OTLP_TIMEOUT`), not two.
        std::thread::scope(|scope| {
            if let Some(spans) = &self.spans {
                scope.spawn(move || {
                    if let Err(e) = spans.shutdown() {
                        tracing::warn!("OpenTelemetry: the last spans could not be sent: {e}");
                    }
                });
            }
            if let Some((meters, _)) = &self.meters
                && let Err(e) = meters.shutdown()
            {
                tracing::warn!("OpenTelemetry: the last counters could not be sent: {e}");
            }
        });
    }

    /// The spans of `run`: the run's, then each call's.
    fn spans(&self, run: &FinishedRun<'_>) -> Vec<SpanData> {
        let receipt = run.receipt;
        let ended = SystemTime::now();
        let mut spans = Vec::with_capacity(receipt.calls.len() + 1);
        let (parent_span_id, parent_remote) = match run.parent {
            Some(parent) => (SpanId::from_bytes(parent.span_id), true),
            None => (SpanId::INVALID, false),
        };
        spans.push(self.span(
            run.context,
            (parent_span_id, parent_remote),
            ("codemode.run".into(), SpanKind::Internal),
            (run_start(run, ended), ended.max(run.started)),
            run_attributes(receipt),
            run_status(receipt),
        ));
        let run_span = SpanId::from_bytes(run.context.span_id);
        for call in &receipt.calls {
            // `run.calls` is in seq order, as the receipt's calls are.
            let Ok(i) = run.calls.binary_search_by_key(&call.seq, |t| t.seq) else { continue };
            let timing = &run.calls[i];
            let start = timing.started;
            let end = start + Duration::from_micros((call.elapsed_ms.max(0.0) * 1000.0) as u64);
            // A name the gate did not find in the catalog is the program's
            // text: neither the span's name nor an attribute carries it.
            let name = match tool_known(timing) {
                true => format!("execute_tool {}", call.tool).into(),
                false => Cow::Borrowed("execute_tool"),
            };
            spans.push(self.span(
                run.context.with_span(timing.span_id),
                (run_span, false),
                (name, SpanKind::Internal),
                (start, end),
                call_attributes(&receipt.run_id, call, timing),
                call_status(call),
            ));
        }
        spans
    }

    /// One finished span.
    fn span(
        &self,
        context: TraceContext,
        (parent_span_id, parent_span_is_remote): (SpanId, bool),
        (name, span_kind): (Cow<'static, str>, SpanKind),
        (start_time, end_time): (SystemTime, SystemTime),
        attributes: Vec<KeyValue>,
        status: Status,
    ) -> SpanData {
        let flags = if context.sampled { TraceFlags::SAMPLED } else { TraceFlags::default() };
        SpanData {
            span_context: SpanContext::new(
                TraceId::from_bytes(context.trace_id),
                SpanId::from_bytes(context.span_id),
                flags,
                false,
                TraceState::default(),
            ),
            parent_span_id,
            parent_span_is_remote,
            span_kind,
            name,
            start_time,
            end_time,
            attributes,
            dropped_attributes_count: 0,
            events: SpanEvents::default(),
            links: SpanLinks::default(),
            status,
            instrumentation_scope: self.scope.clone(),
        }
    }

    /// Adds `run` to the counters: the run's calls summed first, one add
    /// per distinct (status, decision), so a run of many calls costs a
    /// few adds.
    fn count(&self, counters: &Counters, receipt: &Receipt) {
        counters.runs.add(1, &[KeyValue::new("codemode.run.status", receipt.status.as_str())]);
        if receipt.status == RunStatus::Paused {
            counters.paused.add(1, &[]);
        }
        if matches!(receipt.status, RunStatus::Failed | RunStatus::TimedOut) {
            counters.errors.add(1, &[KeyValue::new("codemode.error.source", "run")]);
        }
        let mut sums: Vec<((CallStatus, Decision), u64)> = Vec::new();
        for call in &receipt.calls {
            let key = (call.status, call.decision);
            match sums.iter_mut().find(|(k, _)| *k == key) {
                Some((_, n)) => *n += 1,
                None => sums.push((key, 1)),
            }
        }
        for ((status, decision), n) in sums {
            let decided = KeyValue::new("codemode.call.decision", decision.as_str());
            counters.calls.add(n, &[KeyValue::new("codemode.call.status", status.as_str()), decided.clone()]);
            if matches!(decision, Decision::Refused | Decision::Denied) {
                counters.refused.add(n, &[decided]);
            }
            if status == CallStatus::Failed {
                counters.errors.add(n, &[KeyValue::new("codemode.error.source", "call")]);
            }
        }
    }
}

/// When `run` began: its receipt's wall time back from `ended` (which for
/// a resumed run reaches back to its first start), else when this process
/// started it.
fn run_start(run: &FinishedRun<'_>, ended: SystemTime) -> SystemTime {
    let elapsed = Duration::from_micros((run.receipt.elapsed_ms.max(0.0) * 1000.0) as u64);
    ended.checked_sub(elapsed).map_or(run.started, |start| start.min(run.started))
}

impl TraceSink for OtlpSink {
    fn run_ended(&self, run: &FinishedRun<'_>) {
        if let Some(processor) = &self.spans
            && run.context.sampled
        {
            for span in self.spans(run) {
                processor.on_end(span);
            }
        }
        if let Some((_, counters)) = &self.meters {
            self.count(counters, run.receipt);
        }
    }
}

/// The process's resource: the SDK's detectors (`OTEL_SERVICE_NAME`,
/// `OTEL_RESOURCE_ATTRIBUTES`), with `service.name` `codemode` unless one
/// of them names it.
fn resource() -> Resource {
    let named = std::env::var("OTEL_SERVICE_NAME").is_ok_and(|v| !v.is_empty())
        || std::env::var("OTEL_RESOURCE_ATTRIBUTES").is_ok_and(|v| v.contains("service.name="));
    let builder = Resource::builder();
    let builder = if named { builder } else { builder.with_service_name("codemode") };
    builder.with_attribute(KeyValue::new("service.version", env!("CARGO_PKG_VERSION"))).build()
}

/// The counters of `provider`'s meter `codemode`.
fn counters(provider: &SdkMeterProvider) -> Counters {
    let meter = provider.meter("codemode");
    let counter =
        |name: &'static str, what: &'static str| meter.u64_counter(name).with_description(what).build();
    Counters {
        runs: counter("codemode.runs", "Runs that ended, by status"),
        calls: counter("codemode.calls", "Tool calls, by status and decision"),
        refused: counter("codemode.calls.refused", "Tool calls the gate refused or an approver denied"),
        paused: counter("codemode.runs.paused", "Runs that paused on a call waiting for a decision"),
        errors: counter("codemode.errors", "Failed tool calls and failed or timed-out runs"),
    }
}

/// The JSON name of a receipt enum as the receipt writes it (an error's
/// kind: `exception`, `timeout`).
fn name_of<T: serde::Serialize>(value: &T) -> String {
    match serde_json::to_value(value) {
        Ok(serde_json::Value::String(s)) => s,
        _ => "unknown".to_owned(),
    }
}

/// The run span's attributes.
fn run_attributes(receipt: &Receipt) -> Vec<KeyValue> {
    let mut attributes = vec![
        KeyValue::new("codemode.run.id", receipt.run_id.clone()),
        KeyValue::new("codemode.run.status", receipt.status.as_str()),
        KeyValue::new("codemode.run.calls", receipt.calls.len() as i64),
        KeyValue::new("codemode.run.elapsed_ms", receipt.elapsed_ms),
        KeyValue::new("codemode.run.approval_wait_ms", receipt.approval_wait_ms),
    ];
    if let Some(error) = &receipt.error {
        attributes.push(KeyValue::new("error.type", name_of(&error.kind)));
    }
    attributes
}

/// The run span's status: an error for a run that failed or timed out,
/// described by its error kind alone (the message may be the program's
/// text: a thrown `Error`'s).
fn run_status(receipt: &Receipt) -> Status {
    match (&receipt.status, &receipt.error) {
        (RunStatus::Failed | RunStatus::TimedOut, Some(error)) => Status::error(name_of(&error.kind)),
        (RunStatus::Failed | RunStatus::TimedOut, None) => Status::error(receipt.status.as_str()),
        _ => Status::Unset,
    }
}

/// Whether the gate found the call's tool in the catalog: it was decided
/// by a step after `tool_exists` (the steps before it, and the refusals
/// outside the gate's steps, see any name the program wrote).
fn tool_known(timing: &CallTiming) -> bool {
    !matches!(
        timing.decided_by,
        "budget" | "direct_only" | "posture_epoch" | "plan_mode" | "tool_exists" | "refused"
    )
}

/// A call span's attributes: what the call was, how the gate decided it,
/// how it ended, its sizes and waits.
fn call_attributes(run_id: &str, call: &CallReceipt, timing: &CallTiming) -> Vec<KeyValue> {
    let mut attributes = vec![
        KeyValue::new("gen_ai.operation.name", "execute_tool"),
        KeyValue::new("gen_ai.tool.call.id", format!("{run_id}/{}", call.seq)),
        KeyValue::new("codemode.run.id", run_id.to_owned()),
        KeyValue::new("codemode.call.seq", call.seq as i64),
        KeyValue::new("codemode.call.caller", call.caller.as_str()),
        KeyValue::new("codemode.gate.step", timing.decided_by),
        KeyValue::new("codemode.call.decision", call.decision.as_str()),
        KeyValue::new("codemode.call.status", call.status.as_str()),
        KeyValue::new("codemode.call.result_bytes", call.bytes as i64),
    ];
    if tool_known(timing) {
        attributes.push(KeyValue::new("gen_ai.tool.name", call.tool.clone()));
    }
    if call.truncated.is_some() {
        attributes.push(KeyValue::new("codemode.call.truncated", true));
    }
    if let Some(queued) = call.queued_ms {
        attributes.push(KeyValue::new("codemode.call.queued_ms", queued));
    }
    if let Some(later) = timing.later_steps {
        attributes.push(KeyValue::new("codemode.gate.later_steps_ms", later.as_secs_f64() * 1000.0));
    }
    if call.attempts > 1 {
        attributes.push(KeyValue::new("codemode.call.attempts", i64::from(call.attempts)));
    }
    if call.never_started {
        attributes.push(KeyValue::new("codemode.call.never_started", true));
    }
    if call.status != CallStatus::Ok {
        attributes.push(KeyValue::new("error.type", call.status.as_str()));
    }
    attributes
}

/// A call span's status: an error for a call that failed, described by
/// its status alone (the error text may hold what the program or the tool
/// put there: a path, a server's message; it stays in the receipt).
fn call_status(call: &CallReceipt) -> Status {
    match call.status {
        CallStatus::Failed => Status::error(call.status.as_str()),
        _ => Status::Unset,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env<'a>(pairs: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |name| pairs.iter().find(|(k, _)| *k == name).map(|(_, v)| (*v).to_owned())
    }

    #[test]
    fn nothing_is_exported_without_an_endpoint() {
        assert_eq!(Signals::from(env(&[])), Signals { traces: false, metrics: false });
        let both = Signals::from(env(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318")]));
        assert_eq!(both, Signals { traces: true, metrics: true });
        let traces = Signals::from(env(&[("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://x:4318/v1/traces")]));
        assert_eq!(traces, Signals { traces: true, metrics: false });
        let disabled = Signals::from(env(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318"),
            ("OTEL_SDK_DISABLED", "TRUE"),
        ]));
        assert_eq!(disabled, Signals { traces: false, metrics: false });
        let no_metrics = Signals::from(env(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318"),
            ("OTEL_METRICS_EXPORTER", "none"),
        ]));
        assert_eq!(no_metrics, Signals { traces: true, metrics: false });
    }
}
