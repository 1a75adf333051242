//! `W2_traced`: W1 and W2 with OpenTelemetry tracing off and on, in one
//! sitting (runs alternate between the two engines).
//!
//! "On" is what `codemode run` does when `OTEL_EXPORTER_OTLP_ENDPOINT` is
//! set: the engine has the OTLP sink of `codemode-otel`, every run is one
//! span plus one per call and adds to the counters, and the batch
//! processor's thread sends them over HTTP (protobuf) to a collector. Here
//! the collector is a local endpoint that reads each request and answers
//! `200` (its cost is on this machine's two cores too); the spans the
//! processor could not queue (its queue holds 2,048; W2 makes 10,001 spans
//! a run) are dropped, as a real exporter does under load.

use codemode::Limits;
use codemode_otel::{OtlpSink, Signals};
use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::net::TcpListener;

use super::{engine, engine_with};

/// A local OTLP/HTTP endpoint that takes anything and answers `200`;
/// its base URL.
fn collector() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").expect("a local port");
    let url = format!("http://{}", listener.local_addr().expect("bound"));
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            std::thread::spawn(move || {
                let mut reader = BufReader::new(stream);
                loop {
                    let mut length = 0usize;
                    let mut line = String::new();
                    loop {
                        line.clear();
                        if reader.read_line(&mut line).unwrap_or(0) == 0 {
                            return;
                        }
                        if line == "\r\n" {
                            break;
                        }
                        let lower = line.to_ascii_lowercase();
                        if let Some(v) = lower.strip_prefix("content-length:") {
                            length = v.trim().parse().unwrap_or(0);
                        }
                    }
                    let mut body = vec![0; length];
                    if reader.read_exact(&mut body).is_err() {
                        return;
                    }
                    let answer = b"HTTP/1.1 200 OK\r\ncontent-type: application/x-protobuf\r\ncontent-length: 0\r\n\r\n";
                    if reader.get_mut().write_all(answer).is_err() {
                        return;
                    }
                }
            });
        }
    });
    url
}

/// Runs W2 and W1 through `Engine::execute_blocking` on an engine with
/// the OTLP sink and one without, alternating; emits the traced W2 rate
/// and prints both on stderr.
pub(super) fn run() {
    let mut limits = Limits::default();
    limits.max_calls = 10_000;
    let signals = Signals { traces: true, metrics: true };
    let sink = std::sync::Arc::new(
        OtlpSink::to_endpoint(signals, &collector()).unwrap_or_else(|e| super::die(format!("the sink: {e}"))),
    );
    let (on, _dir_on) = engine_with(limits.clone(), |b| b.trace_sink(sink.clone()));
    let (off, _dir_off) = engine(limits);
    super::on_and_off(&on, &off, "W2_traced", "tracing");
    sink.shutdown();
}
