//! The span a request's run starts under: the `traceparent` the client
//! sent in the request's `_meta` (SEP-414), else in the HTTP request's
//! `traceparent` header (W3C Trace Context §3); a malformed value is
//! ignored and the run starts a trace of its own when codemode exports
//! traces.

use codemode::telemetry::TraceContext;
use rmcp::RoleServer;
use rmcp::model::CallToolRequestParams;
use rmcp::service::RequestContext;

/// The parent span of the run `params` starts, from `_meta` first, then
/// the HTTP header; `None` when neither holds a valid `traceparent`.
pub(crate) fn of(params: &CallToolRequestParams, cx: &RequestContext<RoleServer>) -> Option<TraceContext> {
    let from_meta = |meta: &rmcp::model::RequestMetaObject| {
        meta.0.0.get("traceparent").and_then(|v| v.as_str()).and_then(TraceContext::parse)
    };
    from_meta(&cx.meta).or_else(|| params.meta.as_ref().and_then(from_meta)).or_else(|| from_header(cx))
}

/// The `traceparent` header of the HTTP request that carried `cx`'s
/// request.
#[cfg(feature = "http")]
fn from_header(cx: &RequestContext<RoleServer>) -> Option<TraceContext> {
    let parts = cx.extensions.get::<::http::request::Parts>()?;
    TraceContext::parse(parts.headers.get("traceparent")?.to_str().ok()?)
}

/// Without HTTP, no header.
#[cfg(not(feature = "http"))]
fn from_header(_cx: &RequestContext<RoleServer>) -> Option<TraceContext> {
    None
}
