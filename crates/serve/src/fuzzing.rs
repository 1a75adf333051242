//! Entry points for the fuzz targets in `fuzz/` (see `docs/FUZZING.md`):
//! server mode's reading of requests. Not part of the supported API; each
//! returns what the reader made and never panics.

use std::time::Duration;

use serde_json::Value;

use super::arguments::{Request, read_request};
use super::request_state::{ApprovalState, StateSigner};

/// What `execute_tools` makes of a request with `args`, `request_state`
/// and (when `answered`) `inputResponses`, without running anything:
/// `program <bytes>`, `batch <calls>`, `resume <run_id>`, `rollback
/// <run_id>`, `wait <run_id>`, `cancel <run_id>`, `answered
/// <state bytes>`, `malformed: <error>` or `refused: <sentence>`.
pub fn execute_request(args: &Value, request_state: Option<&str>, answered: bool) -> String {
    match read_request(args, request_state, answered) {
        Request::Input(Ok(codemode::run::ExecuteInput::Program(p))) => {
            format!("program {}", p.source().len())
        }
        Request::Input(Ok(codemode::run::ExecuteInput::Batch(b))) => format!("batch {}", b.len()),
        Request::Input(Err(e)) => format!("malformed: {e}"),
        Request::Resume(run_id) => format!("resume {run_id}"),
        Request::Rollback(run_id) => format!("rollback {run_id}"),
        Request::Answered(sealed) => format!("answered {}", sealed.len()),
        Request::Refused(why) => format!("refused: {why}"),
        Request::Wait(run_id) => format!("wait {run_id}"),
        Request::Cancel(run_id) => format!("cancel {run_id}"),
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

/// An `mcp serve --http` front served over in-memory streams: the HTTP
/// parser, the path and bearer-token checks and rmcp's service (Host,
/// Origin, sessions, protocol version, body), as a client on loopback meets
/// them. Its engine has no tools, no journal and no MCP servers, so a
/// request the fuzzer makes can run a program but reach nothing.
#[cfg(feature = "http")]
pub struct HttpFront {
    runtime: tokio::runtime::Runtime,
    server: super::http::HttpServer,
}

#[cfg(feature = "http")]
impl HttpFront {
    /// A front that requires `token` (at least 16 bytes) as `Authorization:
    /// Bearer`, or none. Its engine's workspace is `workspace`.
    ///
    /// # Panics
    /// When the engine or the server cannot be built (a fuzz target's
    /// setup).
    pub fn new(workspace: &std::path::Path, token: Option<&str>) -> HttpFront {
        let runtime =
            tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a tokio runtime");
        let engine = codemode::Engine::builder()
            .workspace(workspace)
            .native_tools(false)
            .no_journal()
            .build()
            .expect("an engine without tools");
        let server = super::CodeModeServer::new(engine, super::ServeOptions::default()).expect("a server");
        let mut options = super::http::HttpOptions::new(([127, 0, 0, 1], 0).into());
        options.token = token.map(str::to_owned);
        let server = runtime.block_on(server.bind_http(options)).expect("bound on loopback");
        HttpFront { runtime, server }
    }

    /// What the front answers to the raw bytes `request` of one HTTP/1.1
    /// connection (the client closes its side after them): the raw
    /// response bytes, or what was written within 5 s.
    pub fn answer(&self, request: &[u8]) -> Vec<u8> {
        use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
        self.runtime.block_on(async {
            let (mut client, server_side) = tokio::io::duplex(64 << 10);
            let connection = self.server.connection(server_side);
            let served = tokio::spawn(async move {
                let _ = connection.await;
            });
            let mut response = Vec::new();
            let exchange = async {
                let (mut reading, mut writing) = tokio::io::split(&mut client);
                let write = async {
                    let _ = writing.write_all(request).await;
                    let _ = writing.shutdown().await;
                };
                let read = async {
                    let _ = reading.read_to_end(&mut response).await;
                };
                tokio::join!(write, read);
            };
            let _ = tokio::time::timeout(Duration::from_secs(5), exchange).await;
            served.abort();
            response
        })
    }
}
