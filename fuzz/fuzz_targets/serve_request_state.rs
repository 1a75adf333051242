//! Server mode's `requestState` (crates/serve/src/request_state.rs): the signed state of an
//! `input_required` answer, echoed back by the client and so attacker-controlled (rmcp's
//! `RequestStateCodec`, HMAC-SHA256 bound to the call's arguments).
//!
//! Input: bytes. All of them, as text, are a `requestState` to open; then the first byte's length
//! of the rest is a run id and what follows, by 8 bytes, the pending seqs, sealed and opened back.
//!
//! Property: no panic; text the fuzzer made never opens (it cannot forge the tag); a state sealed
//! by the server opens to the same run and seqs for the same arguments, and not for others.
#![no_main]

use std::sync::OnceLock;

use codemode_serve::fuzzing::StateCodec;
use libfuzzer_sys::fuzz_target;
use serde_json::json;

fn codec() -> &'static StateCodec {
    static CODEC: OnceLock<StateCodec> = OnceLock::new();
    CODEC.get_or_init(StateCodec::default)
}

fuzz_target!(|data: &[u8]| {
    let codec = codec();
    let args = json!({"tool": "execute_tools", "arguments": {"code": "return 1"}});
    let text = String::from_utf8_lossy(data);
    assert!(codec.open(&text, &args).is_err(), "a state the fuzzer made opened");
    let Some((&n, rest)) = data.split_first() else { return };
    let (run, seqs) = rest.split_at(usize::from(n).min(rest.len()));
    let run_id = String::from_utf8_lossy(run).into_owned();
    let seqs: Vec<u64> =
        seqs.chunks_exact(8).map(|c| u64::from_le_bytes(c.try_into().expect("8 bytes"))).collect();
    let sealed = codec.seal(&run_id, &seqs, &args);
    assert_eq!(codec.open(&sealed, &args), Ok((run_id, seqs)));
    let other = json!({"tool": "execute_tools", "arguments": {"code": "return 2"}});
    assert!(codec.open(&sealed, &other).is_err(), "a state opened for other arguments");
});
