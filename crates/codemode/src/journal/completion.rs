//! [`Completion`]: how one call ended, as the program gets it and the
//! journal's `done` line records it. Made by the engine's dispatcher, read
//! by the VM and by replay; it lives here, below both, so the journal's
//! format does not depend on the dispatcher.

use serde_json::Value;

use crate::receipt::ledger::CallEnd;

/// The end of a call, for the ledger and for the program.
#[derive(Debug)]
pub(crate) struct Completion {
    pub seq: u64,
    pub end: CallEnd,
    /// What the program gets: resolve with `payload` (the envelope JSON) when
    /// `ok`, else reject with a ToolError built from `payload`.
    pub ok: bool,
    pub payload: String,
    /// Text content, passed to the program as a string rather than inside
    /// the JSON; `payload` then holds only `{metadata, truncated}`.
    pub text: Option<String>,
    /// Set when the approver paused the call: it did not run, and the run
    /// pauses on it (`end.decision` is `pending`).
    pub pause: Option<Box<super::record::PendingRecord>>,
    /// Its `done` line is already in the journal, durable (a call that may
    /// change something: durable.rs); handing it to the program writes a
    /// `settle` line instead.
    pub journaled: bool,
}

impl Completion {
    /// The envelope of a successful call as a JSON value.
    pub(crate) fn envelope(&self) -> Value {
        let mut v: Value = serde_json::from_str(&self.payload).unwrap_or(Value::Null);
        if let (Some(text), Some(obj)) = (&self.text, v.as_object_mut()) {
            let mut with_content = serde_json::Map::new();
            with_content.insert("content".into(), Value::String(text.clone()));
            with_content.extend(std::mem::take(obj));
            *obj = with_content;
        }
        v
    }
}
