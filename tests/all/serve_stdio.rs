//! `codemode mcp serve` over stdio, driven with raw JSON-RPC as an MCP
//! client of either era would send it: approvals through elicitation
//! (2025-11-25), through `input_required` and a signed `requestState`
//! (2026-07-28), or a pause; progress; cancellation; a run cut by its
//! deadline. (The official SDK clients are in serve_clients.rs.)

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin};
use std::sync::mpsc;
use std::time::Duration;

use serde_json::{Value, json};

/// Longest wait for one message from the server.
const WAIT: Duration = Duration::from_secs(60);

/// A `codemode mcp serve` process and its message stream.
pub struct Served {
    child: Child,
    stdin: ChildStdin,
    messages: mpsc::Receiver<Value>,
    next_id: u64,
}

impl Served {
    /// Starts `codemode mcp serve` in `ws` with `args`.
    pub fn start(ws: &std::path::Path, args: &[&str]) -> Served {
        let mut all = vec!["mcp", "serve", "--workspace", ws.to_str().unwrap()];
        all.extend_from_slice(args);
        let mut child = crate::cli::spawn(&all, ws, &[]);
        let stdin = child.stdin.take().unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, messages) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { return };
                let Ok(v) = serde_json::from_str::<Value>(&line) else { continue };
                if tx.send(v).is_err() {
                    return;
                }
            }
        });
        Served { child, stdin, messages, next_id: 100 }
    }

    /// Sends one JSON-RPC message.
    pub fn send(&mut self, message: Value) {
        writeln!(self.stdin, "{message}").unwrap();
        self.stdin.flush().unwrap();
    }

    /// The next message from the server.
    pub fn next(&mut self) -> Value {
        self.messages.recv_timeout(WAIT).expect("the server answers within a minute")
    }

    /// Sends request `method` with `params`; returns its id.
    pub fn request(&mut self, method: &str, params: Value) -> u64 {
        self.next_id += 1;
        let id = self.next_id;
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        id
    }

    /// The response to request `id`, handing every other message to
    /// `other` (server requests, notifications).
    pub fn response(&mut self, id: u64, mut other: impl FnMut(&mut Served, Value)) -> Value {
        loop {
            let m = self.next();
            if m.get("id") == Some(&json!(id)) && m.get("method").is_none() {
                return m;
            }
            other(self, m);
        }
    }

    /// A 2025-11-25 session: `initialize` with `capabilities`, then
    /// `notifications/initialized`.
    pub fn initialize(&mut self, capabilities: Value) {
        let id = self.request(
            "initialize",
            json!({"protocolVersion": "2025-11-25", "capabilities": capabilities, "clientInfo": {"name": "raw-legacy", "version": "1"}}),
        );
        let r = self.response(id, |_, _| {});
        assert_eq!(r["result"]["protocolVersion"], "2025-11-25", "{r}");
        self.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    }

    /// Sends `ping` with `params` (`{}`, or a 2026-07-28 request's
    /// `_meta`) and waits for its answer: every receipt file named in an
    /// earlier answer is written by then.
    pub fn ping(&mut self, params: Value) {
        let id = self.request("ping", params);
        let r = self.response(id, |_, _| {});
        assert_eq!(r["result"], json!({}), "{r}");
    }

    /// SIGKILLs the process (a replica lost) and reaps it.
    pub fn kill(mut self) {
        self.child.kill().unwrap();
        let _ = self.child.wait();
    }

    /// Closes stdin and waits a minute at most for the process to end
    /// (liveness, not speed); kills it and panics when it does not.
    pub fn ends_when_closed(mut self) {
        drop(self.stdin);
        ended_within(
            &mut self.child,
            600,
            Duration::from_millis(100),
            "the server did not end when its client left",
        );
    }

    /// Closes stdin and waits for the process.
    pub fn close(self) -> std::process::ExitStatus {
        self.close_and_read().0
    }

    /// Closes stdin, waits for the process, and returns what it wrote
    /// after (every message not read yet).
    pub fn close_and_read(mut self) -> (std::process::ExitStatus, Vec<Value>) {
        drop(self.stdin);
        let status = self.child.wait().unwrap();
        // The reader thread ends at the end of stdout, which the process's
        // end closed.
        let rest = std::iter::from_fn(|| self.messages.recv_timeout(WAIT).ok()).collect();
        (status, rest)
    }
}

/// The `_meta` of a 2026-07-28 request from a client with `capabilities`.
fn modern_meta(capabilities: Value) -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": capabilities,
        "io.modelcontextprotocol/clientInfo": {"name": "raw-modern", "version": "1"}
    })
}

/// A program whose bash call (which needs an approval under posture ask)
/// appends to count.txt; it returns how the call went.
const COUNTING: &str = "return await tools.bash({command: 'echo ran >> count.txt'}).then(() => 'ran', e => e.kind + ': ' + e.message);";

/// Waits (at most 10 s) until `path` holds a whole line: a bash call of
/// the program has started.
fn wait_for_line(path: &std::path::Path) {
    for _ in 0..400 {
        if std::fs::read_to_string(path).is_ok_and(|t| t.ends_with('\n')) {
            return;
        }
        std::thread::sleep(Duration::from_millis(25));
    }
    panic!("{} was not written: the bash call did not start", path.display());
}

fn count(ws: &std::path::Path) -> usize {
    std::fs::read_to_string(ws.join("count.txt")).map(|s| s.lines().count()).unwrap_or(0)
}

#[test]
fn a_legacy_client_with_elicitation_is_asked_and_its_wait_is_not_counted_against_the_deadline() {
    for (answer, runs, value) in [("accept", 1, "ran"), ("decline", 0, "denied: "), ("cancel", 0, "denied: ")]
    {
        let ws = crate::common::workspace();
        let mut s = Served::start(ws.path(), &["--deadline", "1"]);
        s.initialize(json!({"elicitation": {}}));
        let id = s.request("tools/call", json!({"name": "execute_tools", "arguments": {"code": COUNTING}}));
        let mut asked = Vec::new();
        let r = s.response(id, |s, m| {
            if m["method"] == "elicitation/create" {
                asked.push(m["params"]["message"].as_str().unwrap().to_owned());
                // Longer than the run's deadline: the person's time is not
                // the program's.
                std::thread::sleep(Duration::from_millis(1500));
                let mut result = json!({"action": answer});
                if answer == "accept" {
                    result["content"] = json!({});
                }
                s.send(json!({"jsonrpc": "2.0", "id": m["id"], "result": result}));
            }
        });
        assert_eq!(asked.len(), 1, "{answer}: one question per call needing approval");
        assert!(
            asked[0].contains("`bash`") && asked[0].contains(r#""echo ran >> count.txt""#),
            "{}",
            asked[0]
        );
        let sc = &r["result"]["structuredContent"];
        assert_eq!(sc["status"], "completed", "{answer}: {r}");
        assert!(sc["value"].as_str().unwrap().starts_with(value), "{answer}: {sc}");
        assert_eq!(r["result"]["isError"], false, "a caught denial is not an error of the program");
        assert_eq!(count(ws.path()), runs, "{answer}: the call ran {runs} times");
        if answer != "accept" {
            assert!(
                sc["value"].as_str().unwrap().contains("raw-legacy"),
                "the reason names the client: {sc}"
            );
        }
        assert!(s.close().success());
    }
}

#[test]
fn a_legacy_client_that_never_answers_is_denied_at_the_approval_timeout() {
    let ws = crate::common::workspace();
    let mut s = Served::start(ws.path(), &["--approval-timeout", "0.5"]);
    s.initialize(json!({"elicitation": {"form": {}}}));
    let id = s.request("tools/call", json!({"name": "execute_tools", "arguments": {"code": COUNTING}}));
    let r = s.response(id, |_, _| {});
    let value = r["result"]["structuredContent"]["value"].as_str().unwrap().to_owned();
    assert!(value.starts_with("denied: ") && value.contains("approval timeout"), "{value}");
    assert_eq!(count(ws.path()), 0);
    s.close();
}

#[test]
fn a_modern_client_gets_input_required_and_its_retry_resumes_the_run_once() {
    let ws = crate::common::workspace();
    let mut s = Served::start(ws.path(), &[]);
    let meta = modern_meta(json!({"elicitation": {"form": {}}}));
    let id = s.request("server/discover", json!({"_meta": meta}));
    let r = s.response(id, |_, _| {});
    assert!(r["result"]["supportedVersions"].as_array().unwrap().contains(&json!("2026-07-28")), "{r}");

    let args = json!({"code": COUNTING});
    let id = s.request("tools/call", json!({"_meta": meta, "name": "execute_tools", "arguments": args}));
    let r = s.response(id, |_, _| {});
    let result = &r["result"];
    assert_eq!(result["resultType"], "input_required", "{r}");
    let question = &result["inputRequests"]["approve"];
    assert_eq!(question["method"], "elicitation/create");
    assert!(question["params"]["message"].as_str().unwrap().contains("echo ran >> count.txt"));
    let state = result["requestState"].as_str().unwrap().to_owned();
    assert_eq!(count(ws.path()), 0, "nothing runs before the person answers");

    // Forged answers: a state for other arguments, a tampered state.
    for (arguments, sealed) in [
        (json!({"code": "return 2"}), state.clone()),
        (args.clone(), format!("{}x", &state[..state.len() - 1])),
        (args.clone(), "rs1.forged.state".to_owned()),
    ] {
        let id = s.request(
            "tools/call",
            json!({"_meta": meta, "name": "execute_tools", "arguments": arguments,
                   "requestState": sealed, "inputResponses": {"approve": {"action": "accept", "content": {}}}}),
        );
        let r = s.response(id, |_, _| {});
        assert_eq!(r["result"]["isError"], true, "{r}");
        assert!(r["result"]["content"][0]["text"].as_str().unwrap().contains("nothing was resumed"), "{r}");
    }
    assert_eq!(count(ws.path()), 0, "a forged answer runs nothing");

    let retry = json!({"_meta": meta, "name": "execute_tools", "arguments": args,
        "requestState": state, "inputResponses": {"approve": {"action": "accept", "content": {}}}});
    let id = s.request("tools/call", retry.clone());
    let r = s.response(id, |_, _| {});
    let sc = &r["result"]["structuredContent"];
    assert_eq!(sc["status"], "completed", "{r}");
    assert_eq!(sc["value"], "ran");
    assert_eq!(count(ws.path()), 1);
    let receipt_path = sc["receipt_path"].as_str().unwrap().to_owned();
    // 2026-07-28 has no `ping`: `tools/list` is answered once the file is
    // written.
    let id = s.request("tools/list", json!({"_meta": meta}));
    s.response(id, |_, _| {});
    let receipt: Value = serde_json::from_str(&std::fs::read_to_string(&receipt_path).unwrap()).unwrap();
    assert_eq!(receipt["calls"][0]["decision"], "approved");

    // The same answer again: the run has ended; nothing runs and the
    // run's receipt is not overwritten by the refusal.
    let id = s.request("tools/call", retry);
    let r = s.response(id, |_, _| {});
    assert!(r["result"]["structuredContent"]["error"]["kind"] == "not_resumable", "{r}");
    assert_eq!(count(ws.path()), 1, "a replayed answer runs nothing");
    let again: Value = serde_json::from_str(&std::fs::read_to_string(&receipt_path).unwrap()).unwrap();
    assert_eq!(again["status"], "completed", "the run's receipt is kept");
    s.close();
}

#[test]
fn a_modern_decline_denies_the_call() {
    let ws = crate::common::workspace();
    let mut s = Served::start(ws.path(), &[]);
    let meta = modern_meta(json!({"elicitation": {}}));
    let args = json!({"code": COUNTING});
    let id = s.request("tools/call", json!({"_meta": meta, "name": "execute_tools", "arguments": args}));
    let r = s.response(id, |_, _| {});
    let state = r["result"]["requestState"].as_str().expect("input_required").to_owned();
    let id = s.request(
        "tools/call",
        json!({"_meta": meta, "name": "execute_tools", "arguments": args,
               "requestState": state, "inputResponses": {"approve": {"action": "decline"}}}),
    );
    let r = s.response(id, |_, _| {});
    let value = r["result"]["structuredContent"]["value"].as_str().unwrap().to_owned();
    assert!(
        value.starts_with("denied: ") && value.contains("declined by the person in raw-modern"),
        "{value}"
    );
    assert_eq!(count(ws.path()), 0);
    s.close();
}

#[test]
fn a_client_without_elicitation_gets_a_paused_result_and_cannot_resume_it_into_an_approval() {
    let ws = crate::common::workspace();
    let mut s = Served::start(ws.path(), &[]);
    s.initialize(json!({}));
    let id = s.request("tools/call", json!({"name": "execute_tools", "arguments": {"code": COUNTING}}));
    let r = s.response(id, |_, m| panic!("no question may reach a client without elicitation: {m}"));
    let sc = r["result"]["structuredContent"].clone();
    assert_eq!(sc["status"], "paused", "{r}");
    assert_eq!(sc["pending"][0]["subject"], "echo ran >> count.txt");
    let run_id = sc["run_id"].as_str().unwrap().to_owned();
    let text = r["result"]["content"][0]["text"].as_str().unwrap().to_owned();
    assert!(text.contains(&format!("codemode approve {run_id} --allow 1")), "{text}");
    assert_eq!(r["result"]["isError"], false);

    // The model resumes without a person's decision: still paused, not run.
    let id = s.request("tools/call", json!({"name": "execute_tools", "arguments": {"resume": run_id}}));
    let r = s.response(id, |_, _| {});
    assert_eq!(r["result"]["structuredContent"]["status"], "paused", "{r}");
    // ... or tries to slip a decision in.
    let id = s.request(
        "tools/call",
        json!({"name": "execute_tools", "arguments": {"resume": run_id, "allow": [1]}}),
    );
    let r = s.response(id, |_, _| {});
    assert_eq!(r["result"]["isError"], true, "{r}");
    assert!(r["result"]["content"][0]["text"].as_str().unwrap().contains("never in this call"), "{r}");
    assert_eq!(count(ws.path()), 0, "the model cannot approve its own call");

    // A person runs the command the result names, in another process ...
    let decide = text.lines().find_map(|l| l.strip_prefix("decide: ")).expect("a decide line").to_owned();
    let command = decide.split(" (or --deny").next().unwrap();
    let words: Vec<&str> = command.split_whitespace().collect();
    assert_eq!(&words[..4], ["codemode", "approve", run_id.as_str(), "--allow"], "{decide}");
    let out = crate::cli::codemode(&words[1..], "", ws.path());
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    // ... and the model's resume goes on with that decision: the call runs once.
    let id = s.request("tools/call", json!({"name": "execute_tools", "arguments": {"resume": run_id}}));
    let r = s.response(id, |_, _| {});
    let sc = &r["result"]["structuredContent"];
    assert_eq!(sc["status"], "completed", "{r}");
    assert_eq!(sc["value"], "ran");
    assert_eq!(count(ws.path()), 1);
    let id = s.request("tools/call", json!({"name": "execute_tools", "arguments": {"resume": run_id}}));
    let r = s.response(id, |_, _| {});
    assert_eq!(r["result"]["structuredContent"]["error"]["kind"], "not_resumable", "{r}");
    assert_eq!(count(ws.path()), 1, "an ended run is not run again");
    s.close();
}

#[test]
fn progress_comes_per_finished_call_and_stops_before_the_result() {
    let ws = crate::common::workspace();
    std::fs::write(ws.path().join("a.txt"), "a").unwrap();
    let mut s = Served::start(ws.path(), &[]);
    s.initialize(json!({}));
    let code = "for (let i = 0; i < 3; i++) { await tools.read({path: 'a.txt'}); } return 3;";
    let id = s.request(
        "tools/call",
        json!({"name": "execute_tools", "arguments": {"code": code}, "_meta": {"progressToken": "p1"}}),
    );
    let mut progress = Vec::new();
    let r = s.response(id, |_, m| {
        if m["method"] == "notifications/progress" {
            progress.push(m["params"].clone());
        }
    });
    assert_eq!(r["result"]["structuredContent"]["value"], 3);
    assert!(!progress.is_empty(), "at least one progress notification");
    assert!(progress.iter().all(|p| p["progressToken"] == "p1"));
    let counts: Vec<f64> = progress.iter().map(|p| p["progress"].as_f64().unwrap()).collect();
    // Coalesced: the first may already name a later call when calls end
    // within one interval.
    let first = format!("call {} read", counts[0]);
    assert!(progress[0]["message"].as_str().unwrap().starts_with(&first), "{progress:?}");
    assert!(counts.windows(2).all(|w| w[0] < w[1]) && *counts.last().unwrap() <= 3.0, "{counts:?}");
    // Nothing after the result.
    s.request("ping", json!({}));
    let next = s.next();
    assert!(next.get("method").is_none(), "no progress after the result: {next}");
    s.close();
}

#[test]
fn a_cancelled_request_cancels_the_run_ends_its_calls_and_keeps_its_receipt() {
    let ws = crate::common::workspace();
    let mut s = Served::start(ws.path(), &["--posture", "full-access"]);
    s.initialize(json!({}));
    // bash runs in its own PID namespace: the sleep is found by its
    // unusual argument.
    let code = "await tools.bash({command: 'echo started > pid.txt; exec sleep 61.4321'}); return 1;";
    let sleeping = || {
        std::fs::read_dir("/proc")
            .unwrap()
            .flatten()
            .any(|e| std::fs::read(e.path().join("cmdline")).is_ok_and(|c| c == b"sleep\x0061.4321\x00"))
    };
    let id = s.request("tools/call", json!({"name": "execute_tools", "arguments": {"code": code}}));
    let pid_file = ws.path().join("pid.txt");
    for _ in 0..200 {
        if std::fs::read_to_string(&pid_file).is_ok_and(|p| !p.trim().is_empty()) {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    std::fs::read_to_string(&pid_file).expect("the bash call started");
    for _ in 0..100 {
        if sleeping() {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(sleeping(), "the call's sleep is running");
    s.send(json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": id, "reason": "user"}}));
    let runs = crate::common::runs_dir(ws.path());
    let mut receipt = None;
    for _ in 0..200 {
        receipt = std::fs::read_dir(&runs)
            .into_iter()
            .flatten()
            .flatten()
            .find_map(|e| std::fs::read_to_string(e.path().join("receipt.json")).ok());
        if receipt.is_some() {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let receipt: Value = serde_json::from_str(&receipt.expect("the receipt is saved")).unwrap();
    assert_eq!(receipt["status"], "cancelled", "{receipt}");
    assert_eq!(receipt["calls"][0]["status"], "in_flight");
    let gone = (0..200).any(|_| {
        std::thread::sleep(Duration::from_millis(50));
        !sleeping()
    });
    assert!(gone, "the call's process was ended");
    s.close();
}

#[test]
fn a_run_cut_by_its_deadline_says_which_calls_ran_and_which_never_started() {
    let ws = crate::common::workspace();
    let mut s = Served::start(ws.path(), &["--posture", "full-access", "--deadline", "1.5"]);
    s.initialize(json!({}));
    // 20 calls, 16 in flight at most: 4 wait for a slot and never start.
    let code = "await tools.bash({command: 'true'}); \
                await Promise.all(Array.from({length: 20}, () => tools.bash({command: 'sleep 30'}))); return 1;";
    let id = s.request("tools/call", json!({"name": "execute_tools", "arguments": {"code": code}}));
    let r = s.response(id, |_, _| {});
    let result = &r["result"];
    assert_eq!(result["isError"], true, "{r}");
    let stopped = &result["structuredContent"]["stopped"];
    assert_eq!(stopped["finished"], json!([1]), "{stopped}");
    assert_eq!(stopped["running"].as_array().unwrap().len(), 16, "{stopped}");
    assert_eq!(stopped["never_started"].as_array().unwrap().len(), 4, "{stopped}");
    let text = result["content"][0]["text"].as_str().unwrap();
    assert!(text.contains("never started: 18,19,20,21"), "{text}");
    s.close();
}

#[test]
fn tools_list_is_the_small_default_surface_within_6_kib() {
    let ws = crate::common::workspace();
    // Four configured servers (none started): their names are in the
    // description, and the list still fits; thirty with long names: some
    // are counted rather than named, and it still fits.
    let configs = tempfile::tempdir().unwrap();
    let config = |name: &str, servers: Vec<String>| {
        let path = configs.path().join(format!("{name}.json"));
        let servers: serde_json::Map<String, Value> = servers
            .iter()
            .map(|n| (n.to_string(), json!({"command": "node", "args": [format!("/opt/{n}/index.js")]})))
            .collect();
        std::fs::write(&path, json!({"mcpServers": servers}).to_string()).unwrap();
        path.to_str().unwrap().to_owned()
    };
    let four = config("four", ["files", "memory", "issues", "calendar"].map(String::from).to_vec());
    let thirty = config(
        "thirty",
        (0..30).map(|i| format!("a-server-with-a-rather-long-name-number-{i:02}")).collect(),
    );
    for args in [vec![], vec!["--mcp-config", four.as_str()], vec!["--mcp-config", thirty.as_str()]] {
        let mut s = Served::start(ws.path(), &args);
        s.initialize(json!({}));
        let id = s.request("tools/list", json!({}));
        let r = s.response(id, |_, _| {});
        let tools = r["result"]["tools"].as_array().unwrap();
        let names: Vec<&str> = tools.iter().map(|t| t["name"].as_str().unwrap()).collect();
        assert_eq!(names, ["execute_tools", "tool_search"], "{args:?}");
        let bytes = serde_json::to_vec(tools).unwrap().len();
        assert!(bytes <= codemode_serve::LIST_BUDGET, "{args:?}: tools/list is {bytes} bytes");
        let execute = &tools[0];
        assert_eq!(execute["annotations"]["destructiveHint"], true);
        assert_eq!(execute["outputSchema"]["required"][0], "status");
        assert!(execute["inputSchema"]["properties"]["resume"].is_object());
        assert_eq!(tools[1]["annotations"]["readOnlyHint"], true);
        let d = execute["description"].as_str().unwrap();
        if args.contains(&four.as_str()) {
            assert!(d.contains("calendar (not started: mcp_connect__calendar)"), "{d}");
        }
        if args.contains(&thirty.as_str()) {
            assert!(d.contains("more, whose tools tools.search finds"), "{d}");
        }
        s.close();
    }
}

#[test]
fn direct_tools_and_tool_search_pass_the_same_gate() {
    let ws = crate::common::workspace();
    std::fs::write(ws.path().join("a.txt"), "alpha\n").unwrap();
    let mut s = Served::start(ws.path(), &["--direct-tools"]);
    s.initialize(json!({}));
    let id = s.request("tools/list", json!({}));
    let r = s.response(id, |_, _| {});
    let names: Vec<String> = r["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_owned())
        .collect();
    for native in ["read", "write", "edit", "bash", "file_search", "grep_files"] {
        assert!(names.iter().any(|n| n == native), "{native} listed: {names:?}");
    }
    let id = s.request("tools/call", json!({"name": "read", "arguments": {"path": "a.txt"}}));
    let r = s.response(id, |_, _| {});
    assert!(r["result"]["content"][0]["text"].as_str().unwrap().contains("alpha"), "{r}");
    // bash needs an approval under posture ask, and this client cannot
    // be asked: the call pauses for a person, not run.
    let id =
        s.request("tools/call", json!({"name": "bash", "arguments": {"command": "echo ran >> count.txt"}}));
    let r = s.response(id, |_, _| {});
    assert_eq!(r["result"]["structuredContent"]["status"], "paused", "{r}");
    assert!(r["result"]["content"][0]["text"].as_str().unwrap().contains("codemode approve"), "{r}");
    assert_eq!(count(ws.path()), 0);
    // A batch pauses the same way (it runs as a program that can).
    let batch = json!({"batch": [{"tool": "read", "arguments": {"path": "a.txt"}},
                                 {"tool": "bash", "arguments": {"command": "echo ran >> count.txt"}}]});
    let id = s.request("tools/call", json!({"name": "execute_tools", "arguments": batch}));
    let r = s.response(id, |_, _| {});
    let sc = &r["result"]["structuredContent"];
    assert_eq!(sc["status"], "paused", "{r}");
    assert_eq!(sc["pending"][0]["seq"], 2, "{r}");
    assert_eq!(count(ws.path()), 0);
    let id = s.request("tools/call", json!({"name": "tool_search", "arguments": {"query": "read a file"}}));
    let r = s.response(id, |_, _| {});
    let found = r["result"]["structuredContent"]["tools"].as_array().expect("structured search results");
    assert!(found.iter().any(|t| t["name"] == "read"), "{r}");
    let id = s.request("tools/call", json!({"name": "no_such_tool", "arguments": {}}));
    let r = s.response(id, |_, _| {});
    assert!(r["error"]["message"].as_str().unwrap().contains("unknown tool `no_such_tool`"), "{r}");
    s.close();
}

#[test]
fn sigterm_cancels_a_run_in_flight_answers_it_and_saves_its_receipt() {
    let ws = crate::common::workspace();
    let mut s = Served::start(ws.path(), &["--posture", "full-access"]);
    s.initialize(json!({}));
    let code = "await tools.bash({command: 'echo go > started.txt; exec sleep 62.5'}); return 1;";
    let id = s.request("tools/call", json!({"name": "execute_tools", "arguments": {"code": code}}));
    wait_for_line(&ws.path().join("started.txt"));
    let pid = nix::unistd::Pid::from_raw(s.child.id() as i32);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).unwrap();
    let r = s.response(id, |_, _| {});
    let sc = &r["result"]["structuredContent"];
    assert_eq!(sc["status"], "cancelled", "{r}");
    let path = sc["receipt_path"].as_str().unwrap().to_owned();
    let status = s.close();
    assert!(status.success(), "the server stops cleanly: {status:?}");
    let receipt = std::fs::read_to_string(path).expect("the receipt file is written before the server exits");
    assert!(receipt.contains("\"cancelled\""), "{receipt}");
}

#[test]
fn a_serve_process_prunes_old_runs_to_the_retention() {
    let ws = crate::common::workspace();
    for _ in 0..4 {
        let out = crate::cli::codemode(
            &["run", "-", "--workspace", ws.path().to_str().unwrap()],
            "return 1;",
            ws.path(),
        );
        assert_eq!(out.status.code(), Some(0));
    }
    let runs = || {
        std::fs::read_dir(crate::common::runs_dir(ws.path()))
            .unwrap()
            .flatten()
            .filter(|e| e.path().is_dir())
            .count()
    };
    assert_eq!(runs(), 4);
    let dir = tempfile::tempdir().unwrap();
    let policy = dir.path().join("codemode.toml");
    std::fs::write(&policy, "[journal]\nkeep_runs = 1\n").unwrap();
    let mut s = Served::start(ws.path(), &["--config", policy.to_str().unwrap()]);
    s.initialize(json!({}));
    let pruned = (0..200).any(|_| {
        std::thread::sleep(Duration::from_millis(25));
        runs() <= 1
    });
    assert!(pruned, "old runs pruned to keep_runs = 1 when serving starts: {} left", runs());
    s.close();
}

/// A client closing stdin is going away: the runs in flight are
/// cancelled at once (their commands ended, their answers sent while
/// stdout is open, their receipts saved), not left to run for rmcp's 5 s
/// wait for the answers in flight, which let a command finish its work.
#[test]
fn closing_stdin_mid_run_cancels_the_run_and_saves_its_receipt() {
    let ws = crate::common::workspace();
    let mut s = Served::start(ws.path(), &["--posture", "full-access"]);
    s.initialize(json!({}));
    let code =
        "await tools.bash({command: 'echo go > started.txt; sleep 2; echo late > late.txt'}); return 1;";
    let id = s.request("tools/call", json!({"name": "execute_tools", "arguments": {"code": code}}));
    wait_for_line(&ws.path().join("started.txt"));
    let (status, rest) = s.close_and_read();
    assert!(status.success(), "{status:?}");
    let answer = rest.iter().find(|m| m["id"] == json!(id)).unwrap_or_else(|| panic!("no answer: {rest:?}"));
    assert_eq!(answer["result"]["structuredContent"]["status"], "cancelled", "{answer}");
    // Had the command gone on, it would have written this by now.
    std::thread::sleep(Duration::from_millis(2500));
    assert!(!ws.path().join("late.txt").exists(), "the command ran on after the client left");
    let receipts: Vec<String> = std::fs::read_dir(crate::common::runs_dir(ws.path()))
        .unwrap()
        .flatten()
        .filter_map(|e| std::fs::read_to_string(e.path().join("receipt.json")).ok())
        .collect();
    assert_eq!(receipts.len(), 1, "the run's receipt is saved");
    let receipt: Value = serde_json::from_str(&receipts[0]).unwrap();
    assert_eq!(receipt["status"], "cancelled", "{receipt}");
}

#[test]
fn a_run_made_in_another_workspace_is_not_resumed_here() {
    // One journal folder shared by two projects' servers.
    let (first, second, store) =
        (crate::common::workspace(), crate::common::workspace(), tempfile::tempdir().unwrap());
    let journal = store.path().to_str().unwrap();
    let mut a = Served::start(first.path(), &["--journal", journal]);
    a.initialize(json!({}));
    let id = a.request("tools/call", json!({"name": "execute_tools", "arguments": {"code": COUNTING}}));
    let r = a.response(id, |_, _| {});
    let run_id = r["result"]["structuredContent"]["run_id"].as_str().unwrap().to_owned();
    assert_eq!(r["result"]["structuredContent"]["status"], "paused", "{r}");
    a.close();
    let out = crate::cli::codemode(
        &[
            "approve",
            &run_id,
            "--allow",
            "1",
            "--journal",
            journal,
            "--workspace",
            first.path().to_str().unwrap(),
        ],
        "",
        first.path(),
    );
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let mut b = Served::start(second.path(), &["--journal", journal]);
    b.initialize(json!({}));
    let id = b.request("tools/call", json!({"name": "execute_tools", "arguments": {"resume": run_id}}));
    let r = b.response(id, |_, _| {});
    assert_eq!(r["result"]["isError"], true, "{r}");
    assert!(r["result"]["content"][0]["text"].as_str().unwrap().contains("was made in workspace"), "{r}");
    assert_eq!(count(second.path()) + count(first.path()), 0, "nothing ran anywhere");
    b.close();
    // From its own workspace it goes on.
    let mut a = Served::start(first.path(), &["--journal", journal]);
    a.initialize(json!({}));
    let id = a.request("tools/call", json!({"name": "execute_tools", "arguments": {"resume": run_id}}));
    let r = a.response(id, |_, _| {});
    assert_eq!(r["result"]["structuredContent"]["status"], "completed", "{r}");
    assert_eq!(count(first.path()), 1);
    a.close();
}

/// Calls `execute_tools` with `code` and returns the answer's
/// `structuredContent`.
fn execute(s: &mut Served, code: &str) -> Value {
    let id = s.request("tools/call", json!({"name": "execute_tools", "arguments": {"code": code}}));
    let r = s.response(id, |_, _| {});
    r["result"]["structuredContent"].clone()
}

#[test]
fn receipt_files_follow_their_answers_and_are_written_by_a_ping_and_by_shutdown() {
    let ws = crate::common::workspace();
    let mut s = Served::start(ws.path(), &[]);
    s.initialize(json!({}));
    let mut named = Vec::new();
    for i in 0..5 {
        let sc = execute(&mut s, &format!("return {i}"));
        assert_eq!(sc["status"], "completed", "{sc}");
        let path = sc["receipt_path"].as_str().expect("the answer names the receipt file").to_owned();
        assert!(path.ends_with("receipt.json") && path.contains(sc["run_id"].as_str().unwrap()), "{path}");
        named.push((path, sc["run_id"].clone(), i));
    }
    // A ping is answered once every earlier answer's file is written.
    s.ping(json!({}));
    for (path, run_id, i) in &named {
        let receipt: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        assert_eq!(
            (&receipt["run_id"], &receipt["status"], &receipt["value"]),
            (run_id, &json!("completed"), &json!(i))
        );
    }
    // And the server exits only once the last ones are written.
    let last: Vec<String> = (0..3)
        .map(|i| execute(&mut s, &format!("return {i}"))["receipt_path"].as_str().unwrap().to_owned())
        .collect();
    assert!(s.close().success());
    for path in last {
        let receipt: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        assert_eq!(receipt["status"], "completed", "{path}");
    }
}

#[test]
fn every_run_has_its_journal_on_disk_when_the_server_exits() {
    // Runs that never wait are journaled after their answers; the process
    // (whose prune thread holds the journal store) exits only once they
    // are written, on stdin's close as on SIGTERM. (Without the wait, the
    // journals still queued at exit were lost: on a warm disk the queue is
    // usually empty by then, on a cold one most of 200 were.)
    for by_signal in [false, true] {
        let ws = crate::common::workspace();
        let mut s = Served::start(ws.path(), &[]);
        s.initialize(json!({}));
        let mut ids: Vec<u64> = (0..100)
            .map(|i| {
                let code = format!("return {i}");
                s.request("tools/call", json!({"name": "execute_tools", "arguments": {"code": code}}))
            })
            .collect();
        // Answers come in any order.
        let mut runs = Vec::new();
        while !ids.is_empty() {
            let m = s.next();
            let Some(at) = ids.iter().position(|id| m.get("id") == Some(&json!(id))) else { continue };
            ids.remove(at);
            runs.push(m["result"]["structuredContent"]["run_id"].as_str().unwrap().to_owned());
        }
        if by_signal {
            let pid = nix::unistd::Pid::from_raw(s.child.id() as i32);
            nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).unwrap();
        }
        assert!(s.close().success());
        for run_id in &runs {
            let journal = crate::common::runs_dir(ws.path()).join(run_id).join("journal.jsonl");
            let text = std::fs::read_to_string(&journal)
                .unwrap_or_else(|e| panic!("{} (by signal: {by_signal}): {e}", journal.display()));
            assert!(text.lines().last().is_some_and(|l| l.contains(r#""state":"completed""#)), "{text}");
        }
    }
}

#[test]
fn a_run_whose_receipt_cannot_be_saved_still_answers_and_says_so() {
    let ws = crate::common::workspace();
    // Where the run folders go is a file: no receipt can be saved there.
    crate::common::block_runs_dir(ws.path());
    let mut s = Served::start(ws.path(), &["--journal", "off", "--approve", "deny"]);
    s.initialize(json!({}));
    let id = s.request("tools/call", json!({"name": "execute_tools", "arguments": {"code": "return 1"}}));
    let r = s.response(id, |_, _| {});
    let result = &r["result"];
    assert_eq!(result["structuredContent"]["status"], "completed", "{r}");
    assert_eq!(result["structuredContent"]["value"], 1);
    assert_eq!(result["structuredContent"]["receipt_path"], Value::Null, "{r}");
    let text = result["content"][0]["text"].as_str().unwrap();
    assert!(text.contains("the receipt could not be saved") && text.contains("is not a folder"), "{text}");
    s.ping(json!({}));
    assert!(s.close().success());
    assert_eq!(std::fs::read_to_string(crate::common::runs_dir(ws.path())).unwrap(), "in the way");
}

/// A `codemode mcp serve` over `ws` with `extra` options, initialized by
/// hand over its pipes: the child, a way to send one message (dropping it
/// closes stdin), and its stdout.
fn served_by_hand(
    ws: &tempfile::TempDir,
    extra: &[&str],
    client: &str,
) -> (Child, impl FnMut(Value), BufReader<std::process::ChildStdout>) {
    let mut args = vec!["mcp", "serve", "--workspace", ws.path().to_str().unwrap()];
    args.extend_from_slice(extra);
    let mut child = crate::cli::spawn(&args, ws.path(), &[]);
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut send = move |m: Value| {
        writeln!(stdin, "{m}").unwrap();
        stdin.flush().unwrap();
    };
    send(
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-11-25",
        "capabilities": {}, "clientInfo": {"name": client, "version": "1"}}}),
    );
    let mut line = String::new();
    stdout.read_line(&mut line).unwrap();
    assert!(line.contains("\"id\":1"), "{line}");
    send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    (child, send, stdout)
}

/// Waits up to `polls` times `every` for `child` to end; kills it and
/// panics with `why` when it does not.
fn ended_within(child: &mut Child, polls: u32, every: Duration, why: &str) {
    for _ in 0..polls {
        if child.try_wait().unwrap().is_some() {
            return;
        }
        std::thread::sleep(every);
    }
    let _ = child.kill();
    let _ = child.wait();
    panic!("{why}");
}

/// A client that stops reading the server's answers (its stdout pipe
/// full) and closes stdin is still stopped by SIGTERM: the answers
/// rmcp cannot send are dropped after a wait, instead of holding the
/// process for good.
#[test]
fn sigterm_stops_a_server_whose_client_stopped_reading() {
    let ws = crate::common::workspace();
    let (mut child, mut send, stdout) = served_by_hand(&ws, &["--max-value", "64MiB"], "stops reading");
    // Answers of 10 MiB each, far more than the pipe holds; none is read.
    for id in 2..5 {
        send(json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": "execute_tools", "arguments": {"code": "return 'x'.repeat(10 * 1024 * 1024)"}}}));
    }
    std::thread::sleep(Duration::from_secs(2));
    drop(send);
    std::thread::sleep(Duration::from_secs(1));
    let _ = std::process::Command::new("kill").args(["-TERM", &child.id().to_string()]).status();
    // Liveness, not speed: the server waits 5 s for the answers it cannot
    // send; a minute means it would never end.
    let why = "SIGTERM did not stop a server whose client stopped reading";
    ended_within(&mut child, 600, Duration::from_millis(100), why);
    drop(stdout);
}

/// A client that closes the server's stdout (and keeps stdin open) stops
/// the server: the run in flight is cancelled (its bash call killed, its
/// receipt saved) and the process ends, instead of running programs whose
/// answers nobody can read.
#[test]
fn a_client_that_closes_stdout_stops_the_server_and_its_runs() {
    let ws = crate::common::workspace();
    let (mut child, mut send, stdout) = served_by_hand(&ws, &["--approve", "allow"], "closer");
    let program =
        "await tools.bash({command: 'echo started > started.txt; sleep 20; echo late > late.txt'});";
    send(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "execute_tools", "arguments": {"code": program}}}));
    wait_for_line(&ws.path().join("started.txt"));
    drop(stdout);
    ended_within(&mut child, 400, Duration::from_millis(25), "the server went on after its stdout closed");
    assert!(!ws.path().join("late.txt").exists(), "the run went on");
    // Its receipt says it was cancelled.
    let runs = crate::common::runs_dir(ws.path());
    let receipt = std::fs::read_dir(&runs)
        .unwrap()
        .map(|e| e.unwrap().path().join("receipt.json"))
        .find(|p| p.exists())
        .expect("a saved receipt");
    let receipt: Value = serde_json::from_str(&std::fs::read_to_string(receipt).unwrap()).unwrap();
    assert_eq!(receipt["status"], "cancelled", "{receipt}");
    drop(send);
}

/// A program inside work QuickJS does not interrupt (sorts of a large
/// typed array in a loop) does not hold the server: from a second past its
/// deadline the programs after it run on a VM thread it does not hold (the
/// VM pool passes over its thread); it is answered `timed_out` after its
/// deadline and a grace (engine/overrun_watch.rs), the command it started
/// ended with it; and the server still ends when its client leaves.
#[test]
fn a_program_stuck_in_slow_built_ins_is_answered_and_does_not_hold_the_server() {
    let ws = crate::common::workspace();
    let mut s = Served::start(ws.path(), &["--posture", "full-access", "--deadline", "3"]);
    s.initialize(json!({}));
    let started = std::time::Instant::now();
    let code = "tools.bash({command: 'sleep 20 && echo late > late.txt'});\n\
                const a = new Float64Array(1 << 20); for (;;) a.sort();";
    let stuck = s.request("tools/call", json!({"name": "execute_tools", "arguments": {"code": code}}));
    // Past its deadline and a poll (3 + 1 s, and a margin for a loaded
    // machine), before its answer (3 + 10 s):
    // two programs at once, each holding a VM thread's slot for a second.
    // The stuck program holds the first VM thread, so both must go to the
    // other (by the fewest runs, the second would be sent to it).
    std::thread::sleep(Duration::from_millis(6500).saturating_sub(started.elapsed()));
    let ids: Vec<u64> = (0..2)
        .map(|i| {
            let code = format!("await tools.bash({{command: 'sleep 1'}}); return {i};");
            s.request("tools/call", json!({"name": "execute_tools", "arguments": {"code": code}}))
        })
        .collect();
    let mut answers = std::collections::HashMap::new();
    while answers.len() < 3 {
        let m = s.next();
        if let Some(id) = m["id"].as_u64().filter(|id| ids.contains(id) || *id == stuck) {
            answers.insert(id, m["result"]["structuredContent"].clone());
        }
    }
    assert_eq!(answers[&stuck]["status"], "timed_out", "{}", answers[&stuck]);
    assert!(answers[&stuck].to_string().contains("without its VM"), "{}", answers[&stuck]);
    if std::thread::available_parallelism().map_or(1, |n| n.get()) >= 2 {
        for (i, id) in ids.iter().enumerate() {
            assert_eq!((&answers[id]["status"], &answers[id]["value"]), (&json!("completed"), &json!(i)));
        }
    }
    // The command it started before its deadline was ended with the
    // answer, as the run's own end would end it.
    std::thread::sleep(Duration::from_secs(23).saturating_sub(started.elapsed()));
    assert!(!ws.path().join("late.txt").exists(), "the command went on after the run was answered");
    s.ends_when_closed();
}

/// With every VM thread held by a program QuickJS has not interrupted yet
/// (each answered `timed_out` after its deadline and a grace), a new
/// program still runs: on a reserve VM thread started for it, not queued
/// behind them until its own deadline.
#[test]
fn a_program_runs_when_every_vm_thread_is_held_by_a_stuck_one() {
    // The server has a VM thread per CPU; hold them all (a few at most).
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    if threads > 4 {
        eprintln!("skipped: {threads} VM threads to hold");
        return;
    }
    let ws = crate::common::workspace();
    let mut s = Served::start(ws.path(), &["--deadline", "3"]);
    s.initialize(json!({}));
    let stuck = "const a = new Float64Array(1 << 20); for (;;) a.sort();";
    let ids: Vec<u64> = (0..threads)
        .map(|_| s.request("tools/call", json!({"name": "execute_tools", "arguments": {"code": stuck}})))
        .collect();
    let mut answered = 0;
    while answered < ids.len() {
        let m = s.next();
        if m["id"].as_u64().is_some_and(|id| ids.contains(&id)) {
            assert_eq!(m["result"]["structuredContent"]["status"], "timed_out", "{m}");
            answered += 1;
        }
    }
    let after = execute(&mut s, "return 'ran'");
    assert_eq!((&after["status"], &after["value"]), (&json!("completed"), &json!("ran")), "{after}");
    s.ends_when_closed();
}

/// A batch over the call budget is refused whole, no call made, on every
/// route: where approvals pause (a client without elicitation), a batch
/// runs as the equivalent program, which used to make the calls up to the
/// budget (writes among them) before it stopped.
#[test]
fn a_batch_over_the_call_budget_makes_no_call_where_approvals_pause() {
    let ws = crate::common::workspace();
    let mut s = Served::start(ws.path(), &["--posture", "full-access", "--max-calls", "3"]);
    s.initialize(json!({}));
    let calls: Vec<Value> = (0..4)
        .map(|i| json!({"tool": "write", "arguments": {"path": format!("w{i}.txt"), "content": "x"}}))
        .collect();
    let id = s.request("tools/call", json!({"name": "execute_tools", "arguments": {"batch": calls}}));
    let r = s.response(id, |_, m| panic!("nothing to ask: {m}"));
    let sc = &r["result"]["structuredContent"];
    assert_eq!(sc["error"]["kind"], "limit", "{r}");
    assert!(sc["error"]["message"].as_str().unwrap().contains("no call was made"), "{r}");
    let written: Vec<_> = (0..4).filter(|i| ws.path().join(format!("w{i}.txt")).exists()).collect();
    assert_eq!(written, Vec::<i32>::new(), "calls were made");
    s.close();
}

/// Over stdio, a request whose arguments are just over their 4 MiB bound
/// gets an answer saying so (its line is within the line bound), and a
/// longer line is dropped without ending the session.
#[test]
fn oversized_requests_over_stdio_are_refused_or_dropped_and_the_session_goes_on() {
    let ws = crate::common::workspace();
    let mut s = Served::start(ws.path(), &[]);
    s.initialize(json!({}));
    let code = format!("return 1; // {}", "x".repeat((4 << 20) + 1024));
    let id = s.request("tools/call", json!({"name": "execute_tools", "arguments": {"code": code}}));
    let r = s.response(id, |_, _| {});
    assert_eq!(r["result"]["isError"], true, "{}", &r.to_string()[..300.min(r.to_string().len())]);
    let text = r["result"]["content"][0]["text"].as_str().unwrap();
    assert!(text.contains("4 MiB"), "{text}");
    let code = format!("return 2; // {}", "x".repeat(5 << 20));
    s.request("tools/call", json!({"name": "execute_tools", "arguments": {"code": code}}));
    assert_eq!(execute(&mut s, "return 3")["value"], 3, "the session went on");
    s.close();
}

/// A syntax error's position is in the structured result too, not only
/// in its text.
#[test]
fn a_syntax_errors_position_is_in_the_structured_result() {
    let ws = crate::common::workspace();
    let mut s = Served::start(ws.path(), &[]);
    s.initialize(json!({}));
    let sc = execute(&mut s, "const a = 1;\nreturn (");
    assert_eq!(sc["error"]["kind"], "syntax", "{sc}");
    assert!(sc["error"]["line"].as_u64().is_some() && sc["error"]["column"].as_u64().is_some(), "{sc}");
    s.close();
}
