//! Server mode's reading of an `execute_tools` request (crates/serve/src/arguments.rs
//! `read_request`, crates/program/src/batch.rs `ExecuteInput`): which of a program, a batch, a
//! resume or the answer to an `input_required` result it is, or its refusal, without running it.
//!
//! Input: JSON; an array `[arguments, requestState?, answered?]` gives the request's parts, any
//! other value is the arguments alone.
//!
//! Property: no panic; arguments over `MAX_ARGUMENTS_BYTES` are refused naming the bound, and only
//! they; a `requestState` over `MAX_REQUEST_STATE_BYTES` is never passed on to be opened; a
//! program or batch read is never larger than the arguments it came from.
#![no_main]

use codemode_serve::{MAX_ARGUMENTS_BYTES, MAX_REQUEST_STATE_BYTES};
use libfuzzer_sys::fuzz_target;
use serde_json::Value;

fuzz_target!(|data: &[u8]| {
    let Ok(value) = serde_json::from_slice::<Value>(data) else { return };
    let (args, state, answered) = match value {
        Value::Array(parts) if (1..=3).contains(&parts.len()) => {
            let state = parts.get(1).and_then(Value::as_str).map(str::to_owned);
            let answered = parts.get(2).and_then(Value::as_bool).unwrap_or(false);
            (parts[0].clone(), state, answered)
        }
        args => (args, None, false),
    };
    let bytes = serde_json::to_vec(&args).map(|v| v.len()).unwrap_or(0);
    let read = codemode_serve::fuzzing::execute_request(&args, state.as_deref(), answered);
    let over = read.starts_with("refused: the arguments are over");
    assert_eq!(over, bytes > MAX_ARGUMENTS_BYTES, "{bytes} bytes read as {read}");
    if let Some(n) = read.strip_prefix("answered ") {
        assert!(n.parse::<usize>().is_ok_and(|n| n <= MAX_REQUEST_STATE_BYTES), "{read}");
    }
    if let Some(n) = read.strip_prefix("program ") {
        assert!(n.parse::<usize>().is_ok_and(|n| n <= bytes), "{read}");
    }
    if let Some(n) = read.strip_prefix("batch ") {
        assert!(n.parse::<usize>().is_ok_and(|n| n >= 1 && n <= bytes), "{read}");
    }
});
