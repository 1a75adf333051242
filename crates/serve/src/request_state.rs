//! The signed `requestState` of approvals asked with an `input_required`
//! result (MCP 2026-07-28, multi round-trip requests, SEP-2322).
//!
//! A 2026-07-28 client that declared elicitation gets, for a run that
//! paused on approvals, an `input_required` result: one
//! `elicitation/create` listing the pending calls and a `requestState`
//! naming the run, the pending calls, and the tools granted (and offered)
//! for the rest of the run (input_required.rs). The client retries the
//! same `tools/call` with the person's answer (`inputResponses`) and the
//! state echoed back. The state is attacker-controlled input on the way
//! back (the spec says so), and it decides which run resumes with which
//! calls and grants allowed, so it is sealed with
//! HMAC-SHA256 (rmcp's [`RequestStateCodec`]) under the server's key, bound
//! to a digest of the call's arguments, and expires. A replica sharing the
//! key and the journal store opens it as well as the one that sealed it.

use std::time::Duration;

use rmcp::model::{RequestStateCodec, SealOptions};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

/// Bytes of a generated key, and the fewest a given key may have.
pub const STATE_KEY_BYTES: usize = 32;

/// What a sealed state carries: the paused run, the seqs of the calls
/// whose approvals were asked, and the tools an answer for the rest of the
/// run allowed, or would allow.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct ApprovalState {
    /// The paused run.
    pub run_id: String,
    /// The pending calls asked about, by seq.
    pub seqs: Vec<u64>,
    /// The tools earlier answers for the rest of the run allowed: the
    /// resumed run's calls of them are allowed unasked.
    #[serde(default)]
    pub granted: Vec<String>,
    /// The tools the question offered for the rest of the run: an answer
    /// that takes the offer adds them to `granted`.
    #[serde(default)]
    pub offered: Vec<String>,
}

/// Seals and opens [`ApprovalState`]s with the server's key.
pub(crate) struct StateSigner {
    codec: RequestStateCodec,
    ttl: Duration,
}

impl StateSigner {
    /// A signer with `key` (at least [`STATE_KEY_BYTES`] bytes) whose
    /// states expire after `ttl`.
    ///
    /// # Errors
    /// The key is too short.
    pub fn new(key: &[u8], ttl: Duration) -> Result<StateSigner, String> {
        if key.len() < STATE_KEY_BYTES {
            return Err(format!(
                "the request-state key has {} bytes; it needs at least {STATE_KEY_BYTES} \
                 (e.g. `head -c 32 /dev/urandom | base64 > key`)",
                key.len()
            ));
        }
        let codec = RequestStateCodec::try_new(key.to_vec()).map_err(|e| e.to_string())?;
        Ok(StateSigner { codec, ttl })
    }

    /// Seals `state` for a retry of a call with `arguments`.
    pub fn seal(&self, state: &ApprovalState, arguments: &Value) -> String {
        let payload = serde_json::to_vec(state).expect("the state serialises");
        let bound = binding(arguments);
        self.codec.seal_with(&payload, &SealOptions::new().associated_data(&bound).ttl(self.ttl))
    }

    /// Opens `sealed`, echoed back by a retry of a call with `arguments`.
    ///
    /// # Errors
    /// A sentence for the client: forged, tampered with, sealed for other
    /// arguments or another key, or expired.
    pub fn open(&self, sealed: &str, arguments: &Value) -> Result<ApprovalState, String> {
        use rmcp::model::RequestStateError as E;
        let bound = binding(arguments);
        self.codec.open_json_with(sealed, &bound).map_err(|e| match e {
            E::Expired => {
                "the approval request expired before it was answered; run the program again".to_owned()
            }
            E::IntegrityCheckFailed | E::UnknownKeyId => {
                "requestState failed verification: it was not issued by this server (or its replicas' \
                 shared key) for these arguments; nothing was resumed"
                    .to_owned()
            }
            other => format!("requestState is not one this server issued ({other}); nothing was resumed"),
        })
    }
}

/// The associated data binding a state to the call's arguments: a domain
/// label and the SHA-256 of their compact JSON (keys sorted).
fn binding(arguments: &Value) -> Vec<u8> {
    let mut bound = b"codemode/serve/approval/v1|".to_vec();
    let json = serde_json::to_vec(arguments).expect("JSON values serialise");
    bound.extend_from_slice(&Sha256::digest(&json));
    bound
}

/// A fresh random key of [`STATE_KEY_BYTES`] bytes (from the OS).
///
/// # Errors
/// The OS random source could not be read.
pub(crate) fn random_key() -> std::io::Result<Vec<u8>> {
    use std::io::Read as _;
    let mut key = vec![0u8; STATE_KEY_BYTES];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut key)?;
    Ok(key)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn signer() -> StateSigner {
        StateSigner::new(&[7u8; 32], Duration::from_secs(60)).unwrap()
    }

    #[test]
    fn a_state_opens_for_the_same_arguments_only() {
        let state = ApprovalState {
            run_id: "r1".into(),
            seqs: vec![1, 3],
            granted: vec!["write".into()],
            offered: vec![],
        };
        let args = json!({"code": "return 1"});
        let sealed = signer().seal(&state, &args);
        assert_eq!(signer().open(&sealed, &args).unwrap(), state);
        let other = json!({"code": "return 2"});
        assert!(signer().open(&sealed, &other).unwrap_err().contains("failed verification"));
    }

    #[test]
    fn a_forged_or_foreign_state_is_refused() {
        let state = ApprovalState { run_id: "r1".into(), seqs: vec![1], granted: vec![], offered: vec![] };
        let args = json!({"code": "x"});
        let sealed = signer().seal(&state, &args);
        let foreign = StateSigner::new(&[8u8; 32], Duration::from_secs(60)).unwrap();
        assert!(foreign.open(&sealed, &args).is_err());
        // Tampering with the readable payload breaks the tag.
        let mut tampered = sealed.clone();
        let last = tampered.pop().unwrap();
        tampered.push(if last == 'A' { 'B' } else { 'A' });
        assert!(signer().open(&tampered, &args).is_err());
        assert!(signer().open("not a state", &args).is_err());
    }

    #[test]
    fn an_expired_state_is_refused() {
        let short = StateSigner::new(&[7u8; 32], Duration::from_millis(1)).unwrap();
        let args = json!({});
        let sealed = short.seal(
            &ApprovalState { run_id: "r".into(), seqs: vec![], granted: vec![], offered: vec![] },
            &args,
        );
        std::thread::sleep(Duration::from_millis(20));
        assert!(short.open(&sealed, &args).unwrap_err().contains("expired"));
    }

    #[test]
    fn a_short_key_is_refused() {
        let refused = StateSigner::new(b"short", Duration::from_secs(1)).err().unwrap();
        assert!(refused.contains("at least 32"), "{refused}");
    }
}
