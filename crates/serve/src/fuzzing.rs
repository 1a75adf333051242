//! Entry points for the fuzz targets in `fuzz/` (see `docs/FUZZING.md`):
//! server mode's reading of requests. Not part of the supported API; each
//! returns what the reader made and never panics.

use std::time::Duration;

use serde_json::Value;

use super::arguments::{Request, read_request};
use super::request_state::{ApprovalState, StateSigner};

/// What `execute_tools` makes of a request with `args`, `request_state`
/// and (when `answered`) `inputResponses`, without running anything:
/// `program <bytes>`, `batch <calls>`, `resume <run_id>`, `answered
/// <state bytes>`, `malformed: <error>` or `refused: <sentence>`.
pub fn execute_request(args: &Value, request_state: Option<&str>, answered: bool) -> String {
    match read_request(args, request_state, answered) {
        Request::Input(Ok(codemode::run::ExecuteInput::Program(p))) => {
            format!("program {}", p.source().len())
        }
        Request::Input(Ok(codemode::run::ExecuteInput::Batch(b))) => format!("batch {}", b.len()),
        Request::Input(Err(e)) => format!("malformed: {e}"),
        Request::Resume(run_id) => format!("resume {run_id}"),
        Request::Answered(sealed) => format!("answered {}", sealed.len()),
        Request::Refused(why) => format!("refused: {why}"),
    }
}

/// A request-state signer with a fixed test key, as a server seals and
/// opens `requestState`.
pub struct StateCodec(StateSigner);

impl Default for StateCodec {
    fn default() -> Self {
        StateCodec(StateSigner::new(&[7u8; 32], Duration::from_secs(3600)).expect("a 32-byte key"))
    }
}

impl StateCodec {
    /// Opens `sealed` for a retry with `arguments`: the run id and seqs.
    ///
    /// # Errors
    /// The sentence the client gets.
    pub fn open(&self, sealed: &str, arguments: &Value) -> Result<(String, Vec<u64>), String> {
        self.0.open(sealed, arguments).map(|s| (s.run_id, s.seqs))
    }

    /// Seals run `run_id`'s pending `seqs` for a retry with `arguments`.
    pub fn seal(&self, run_id: &str, seqs: &[u64], arguments: &Value) -> String {
        self.0.seal(
            &ApprovalState {
                run_id: run_id.to_owned(),
                seqs: seqs.to_vec(),
                granted: vec![],
                offered: vec![],
            },
            arguments,
        )
    }
}
