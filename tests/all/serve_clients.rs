//! `codemode mcp serve` against real MCP clients over stdio (and, in
//! `the_clients_over_http`, streamable HTTP): the official
//! TypeScript SDK v1 (`@modelcontextprotocol/sdk`, MCP 2025-11-25) and v2
//! (`@modelcontextprotocol/client`, which negotiates 2026-07-28 with this
//! server), driven by the plans of tests/node/clients/*.mjs, and the MCP
//! inspector CLI. Each client spawns the codemode binary; the tests read
//! what the client printed and what is on disk (counter files, receipts,
//! processes).
//!
//! Also: the model can never approve its own call (a model-sent resume, a
//! resume with extra fields, a forged or foreign `requestState`, a program
//! that runs `codemode approve` or writes into the journal folder).
//!
//! The packages are pinned in tests/node/package.json (`npm ci --prefix
//! tests/node`); without them a test says SKIPPED, and fails under CI.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use serde_json::{Value, json};

use crate::mcp_support::{node_server, root};

/// The client scripts' folder, when the SDK packages are installed.
pub(crate) fn clients() -> Option<PathBuf> {
    let modules = root().join("tests/node/node_modules/@modelcontextprotocol");
    let ready = ["sdk", "client", "inspector-cli", "server-everything"]
        .iter()
        .all(|p| modules.join(p).join("package.json").is_file());
    if ready {
        return Some(root().join("tests/node/clients"));
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "the MCP client packages are not installed under CI: .ci/run runs `npm ci --prefix tests/node`"
    );
    let _ = writeln!(
        std::io::stderr(),
        "\n*** SKIPPED serve_clients: `npm ci --prefix tests/node` installs the MCP SDK clients ***\n"
    );
    None
}

/// A served workspace: files to read, an MCP config (outside the
/// workspace, so trusted) naming server-everything, and where the server's
/// trust record is looked for (none).
pub(crate) struct Served {
    ws: tempfile::TempDir,
    config: tempfile::TempDir,
}

impl Served {
    pub(crate) fn new() -> Served {
        let ws = crate::common::workspace();
        std::fs::write(ws.path().join("b.txt"), "one\ntwo\nthree\nfour\n").unwrap();
        let config = tempfile::tempdir().unwrap();
        let servers = json!({"mcpServers": {
            "everything": {"command": "node", "args": [node_server("server-everything"), "stdio"]}
        }});
        std::fs::write(config.path().join("mcp.json"), servers.to_string()).unwrap();
        Served { ws, config }
    }

    pub(crate) fn path(&self) -> &Path {
        self.ws.path()
    }

    /// The `server` of a plan: `codemode mcp serve` over this workspace,
    /// with `extra` options.
    pub(crate) fn server(&self, extra: &[&str]) -> Value {
        let mut args = vec![
            "mcp".to_owned(),
            "serve".to_owned(),
            "--workspace".to_owned(),
            self.path().display().to_string(),
            "--mcp-config".to_owned(),
            self.config.path().join("mcp.json").display().to_string(),
        ];
        args.extend(extra.iter().map(|s| (*s).to_owned()));
        json!({
            "command": env!("CARGO_BIN_EXE_codemode"),
            "args": args,
            "env": {
                "PATH": std::env::var("PATH").unwrap_or_default(),
                "HOME": self.config.path(),
                "XDG_CONFIG_HOME": self.config.path().join("no-trust-record"),
                "XDG_STATE_HOME": crate::common::XDG_STATE,
            },
        })
    }

    /// Lines the program's bash calls appended to `count.txt`.
    fn count(&self) -> usize {
        std::fs::read_to_string(self.path().join("count.txt")).map(|s| s.lines().count()).unwrap_or(0)
    }

    /// The receipt saved for `run_id`.
    pub(crate) fn receipt(&self, run_id: &str) -> Value {
        let path = crate::common::runs_dir(self.path()).join(run_id).join("receipt.json");
        serde_json::from_slice(&std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display())))
            .unwrap()
    }
}

/// What a client printed for a plan: the connection, then one value per
/// step, then the elicitations it was sent.
pub(crate) struct Outcome {
    connected: Value,
    pub(crate) steps: Vec<Value>,
    pub(crate) elicitations: Vec<String>,
    /// The indexes of the elicitations the server cancelled before they
    /// were answered (v1 only).
    pub(crate) withdrawn: Vec<u64>,
}

impl Outcome {
    /// Step `i`'s tool result (panics with the step when it failed).
    pub(crate) fn result(&self, i: usize) -> &Value {
        let step = &self.steps[i];
        step.get("result").unwrap_or_else(|| panic!("step {i} has no result: {step}"))
    }

    /// Step `i`'s `structuredContent`.
    pub(crate) fn structured(&self, i: usize) -> &Value {
        &self.result(i)["structuredContent"]
    }

    /// Step `i`'s text content.
    pub(crate) fn text(&self, i: usize) -> &str {
        self.result(i)["content"][0]["text"].as_str().unwrap_or_default()
    }
}

/// Runs client `sdk` (`v1` or `v2`) with `plan` to its end.
pub(crate) fn client(dir: &Path, sdk: &str, plan: &Value) -> Outcome {
    let output = Command::new("node")
        .env("XDG_STATE_HOME", crate::common::XDG_STATE)
        .arg(dir.join(format!("{sdk}.mjs")))
        .arg(plan.to_string())
        .current_dir(dir)
        .output()
        .expect("node runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "client {sdk} failed:\n{stdout}\n{stderr}");
    let lines: Vec<Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}\n{stderr}")))
        .collect();
    let done = lines.last().filter(|l| l["done"] == true).unwrap_or_else(|| panic!("{stdout}\n{stderr}"));
    let elicitations =
        done["elicitations"].as_array().unwrap().iter().map(|m| m.as_str().unwrap().to_owned()).collect();
    let withdrawn =
        done["withdrawn"].as_array().map_or_else(Vec::new, |w| w.iter().filter_map(Value::as_u64).collect());
    Outcome {
        connected: lines[0]["connected"].clone(),
        steps: lines[1..lines.len() - 1].to_vec(),
        elicitations,
        withdrawn,
    }
}

/// A `tools/call` of `execute_tools` with `code`.
pub(crate) fn execute(code: &str) -> Value {
    json!({"name": "execute_tools", "arguments": {"code": code}})
}

/// A program whose one bash call appends to `count.txt` (a writer: under
/// posture ask it needs a person's approval); it returns `ran`, or the
/// kind of the call's error.
const COUNTED: &str =
    "try { await tools.bash({command: 'echo ran >> count.txt'}); return 'ran' } catch (e) { return e.kind }";

#[test]
fn sdk_clients_run_a_program_that_reads_files_and_calls_an_upstream_server() {
    let Some(dir) = clients() else { return };
    let program = "const a = await tools.read({path: 'a.txt'}); \
                   const b = await tools.read({path: 'b.txt'}); \
                   const e = await tools.mcp__everything__echo({message: 'hi'}); \
                   return {lines: a.metadata.total_lines + b.metadata.total_lines, echo: e.content}";
    for (sdk, era) in [("v1", "2025-11-25"), ("v2", "2026-07-28")] {
        let served = Served::new();
        let plan = json!({
            "server": served.server(&[]),
            // The last list: the receipt file is written by its answer.
            "steps": [{"list": true}, {"call": execute(program), "progress": true}, {"list": true}],
        });
        let out = client(&dir, sdk, &plan);
        if sdk == "v2" {
            assert_eq!(out.connected["protocolVersion"], era, "{}", out.connected);
        }
        let listed = &out.steps[0];
        assert_eq!(listed["tools"], json!(["execute_tools", "tool_search"]), "{sdk}");
        assert!(listed["bytes"].as_u64().unwrap() <= 6 << 10, "{sdk}: {}", listed["bytes"]);
        let execute_tools = &listed["listed"][0];
        assert!(execute_tools["outputSchema"]["properties"]["pending"].is_object(), "{sdk}");

        let s = out.structured(1);
        assert_eq!(s["status"], "completed", "{sdk}: {}", out.text(1));
        assert_eq!(s["value"], json!({"lines": 7, "echo": "Echo: hi"}), "{sdk}");
        assert_eq!(s["calls"], json!({"read": {"ok": 2}, "mcp__everything__echo": {"ok": 1}}), "{sdk}");
        assert_eq!(out.result(1)["isError"], false, "{sdk}");
        assert!(out.text(1).contains("completed") && out.text(1).contains("full receipt:"), "{sdk}");
        // The receipt on disk is the run's.
        assert_eq!(served.receipt(s["run_id"].as_str().unwrap())["status"], "completed");
        // Progress: one notification per finished call, at most one per
        // 100 ms (calls in between are counted in the next), all before the
        // result. What the server sent is read off the wire: the SDK drops a
        // notification that arrives in the same read as the response
        // (typescript-sdk issue 2580), so `progress` may lack the last one.
        let step = &out.steps[1];
        let wire = step["wire_progress"].as_array().unwrap();
        assert_eq!(step["late_progress"], json!([]), "{sdk}: progress after the result");
        let last = wire.last().unwrap_or_else(|| panic!("{sdk}: no progress notification"));
        assert_eq!(last["progress"], 3, "{sdk}: {wire:?}");
        assert!(last["message"].as_str().unwrap().contains("mcp__everything__echo ok"), "{sdk}: {wire:?}");
        let counts: Vec<f64> = wire.iter().map(|p| p["progress"].as_f64().unwrap()).collect();
        assert!(counts.windows(2).all(|w| w[0] < w[1]), "{sdk}: {counts:?}");
        // What the SDK handed the callback is a prefix of what was sent.
        let delivered: Vec<f64> =
            step["progress"].as_array().unwrap().iter().map(|p| p["progress"].as_f64().unwrap()).collect();
        assert!(!delivered.is_empty() && counts.starts_with(&delivered), "{sdk}: {delivered:?} {counts:?}");
    }
}

#[test]
fn without_a_progress_callback_no_progress_is_sent() {
    let Some(dir) = clients() else { return };
    let served = Served::new();
    let plan = json!({
        "server": served.server(&[]),
        "steps": [{"call": execute("await tools.read({path: 'a.txt'}); return 1")}],
    });
    let out = client(&dir, "v1", &plan);
    assert_eq!(out.structured(0)["status"], "completed");
    assert_eq!(out.steps[0]["progress"], json!([]));
}

#[test]
fn elicitation_accept_runs_the_call_and_decline_does_not() {
    let Some(dir) = clients() else { return };
    // v1 is asked with elicitation/create while the run waits; v2, on
    // 2026-07-28, gets input_required and retries with the answer.
    for sdk in ["v1", "v2"] {
        for (answer, value, count) in
            [("accept", "ran", 1), ("decline", "denied", 0), ("cancel", "denied", 0)]
        {
            let served = Served::new();
            let plan = json!({
                "server": served.server(&[]),
                "elicitation": answer,
                // The list: the receipt file is written by its answer.
                "steps": [{"call": execute(COUNTED)}, {"list": true}],
            });
            let out = client(&dir, sdk, &plan);
            let s = out.structured(0);
            assert_eq!(s["status"], "completed", "{sdk} {answer}: {}", out.text(0));
            assert_eq!(s["value"], value, "{sdk} {answer}");
            assert_eq!(served.count(), count, "{sdk} {answer}: the counter file");
            assert_eq!(out.elicitations.len(), 1, "{sdk} {answer}: {:?}", out.elicitations);
            let asked = &out.elicitations[0];
            assert!(asked.contains("`bash`") && asked.contains("echo ran >> count.txt"), "{asked}");
            let receipt = served.receipt(s["run_id"].as_str().unwrap());
            let decision = &receipt["calls"][0]["decision"];
            let expected = if answer == "accept" { "approved" } else { "denied" };
            assert_eq!(decision, expected, "{sdk} {answer}: {receipt}");
        }
    }
}

/// Starts a run that pauses on its bash call, through a client without
/// elicitation; returns its run id after checking the paused result.
fn paused(dir: &Path, served: &Served, sdk: &str) -> String {
    let plan = json!({"server": served.server(&[]), "steps": [{"call": execute(COUNTED)}]});
    let out = client(dir, sdk, &plan);
    let s = out.structured(0);
    assert_eq!(s["status"], "paused", "{sdk}: {}", out.text(0));
    assert_eq!(out.result(0)["isError"], false, "{sdk}: a paused run is not an error");
    assert_eq!(s["pending"][0]["seq"], 1, "{sdk}: {s}");
    assert_eq!(s["pending"][0]["tool"], "bash", "{sdk}: {s}");
    assert_eq!(s["pending"][0]["subject"], "echo ran >> count.txt", "{sdk}: {s}");
    let run_id = s["run_id"].as_str().unwrap().to_owned();
    let text = out.text(0);
    assert!(text.contains(&format!("codemode approve {run_id} --allow 1")), "{sdk}: {text}");
    assert!(text.contains(&format!("{{\"resume\": \"{run_id}\"}}")), "{sdk}: {text}");
    assert!(out.elicitations.is_empty());
    assert_eq!(served.count(), 0, "{sdk}: the paused call ran");
    run_id
}

#[test]
fn a_client_without_elicitation_gets_a_paused_result_naming_codemode_approve() {
    let Some(dir) = clients() else { return };
    for sdk in ["v1", "v2"] {
        let served = Served::new();
        let run_id = paused(&dir, &served, sdk);
        assert_eq!(served.receipt(&run_id)["status"], "paused");
    }
}

#[test]
fn a_model_sent_resume_without_a_persons_decision_does_not_run_the_call() {
    let Some(dir) = clients() else { return };
    for sdk in ["v1", "v2"] {
        let served = Served::new();
        let run_id = paused(&dir, &served, sdk);
        let resume = |args: Value| json!({"name": "execute_tools", "arguments": args});
        let plan = json!({
            "server": served.server(&[]),
            "steps": [
                {"call": resume(json!({"resume": run_id}))},
                {"call": resume(json!({"resume": run_id, "allow": [1]}))},
                {"call": resume(json!({"resume": run_id, "code": "return 1", "decisions": {"1": "allow"}}))},
                {"call": resume(json!({"resume": run_id}))},
            ],
        });
        let out = client(&dir, sdk, &plan);
        // A resume continues with the person's decisions only: none, so the
        // call is gated again and the run pauses again.
        for i in [0, 3] {
            let s = out.structured(i);
            assert_eq!(s["status"], "paused", "{sdk} step {i}: {}", out.text(i));
            assert_eq!(s["run_id"], run_id.as_str());
            assert_eq!(s["pending"][0]["seq"], 1, "{sdk}: {s}");
        }
        // Any field besides `resume` is refused, and says why.
        for i in [1, 2] {
            assert_eq!(out.result(i)["isError"], true, "{sdk} step {i}: {}", out.steps[i]);
            let text = out.text(i);
            assert!(text.contains("takes no other field") && text.contains("codemode approve"), "{text}");
        }
        assert!(out.text(1).contains("`allow`"), "{}", out.text(1));
        assert_eq!(served.count(), 0, "{sdk}: a call ran without a person's decision");
        assert_eq!(served.receipt(&run_id)["status"], "paused", "{sdk}");
    }
}

#[test]
fn a_forged_foreign_or_replayed_request_state_runs_nothing() {
    let Some(dir) = clients() else { return };
    let served = Served::new();
    let accept = json!({"approve": {"action": "accept", "content": {}}});
    let other = "try { await tools.bash({command: 'echo other >> count.txt'}); return 'ran' } catch (e) { return e.kind }";
    // The v2 client in manual mode: it hands input_required back, and the
    // plan sends the retries.
    let plan = json!({
        "server": served.server(&[]),
        "elicitation": "accept",
        "steps": [
            {"call": execute(COUNTED), "allow_input_required": true},
            // Not issued by this server.
            {"call": execute(COUNTED), "allow_input_required": true, "responses": accept,
             "state": "rs1.AAABojQJzsp7InJ1bl9pZCI6InJ1bi0xIiwic2VxcyI6WzFdfQ.KXO2823Jxy00kR6I-1_Y_VOFG67XqK0macgYus17SEg"},
            // Issued for other arguments.
            {"call": execute(other), "allow_input_required": true, "responses": accept, "state_from": 0},
            // Answers without a state.
            {"call": execute(COUNTED), "allow_input_required": true, "responses": accept},
        ],
    });
    let out = client(&dir, "v2", &plan);
    let first = out.result(0);
    assert_eq!(first["resultType"], "input_required", "{first}");
    let state = first["requestState"].as_str().unwrap().to_owned();
    let asked = first["inputRequests"]["approve"]["params"]["message"].as_str().unwrap();
    assert!(asked.contains("echo ran >> count.txt"), "{asked}");
    for i in [1, 2] {
        assert_eq!(out.result(i)["isError"], true, "step {i}: {}", out.steps[i]);
        assert!(out.text(i).contains("requestState failed verification"), "step {i}: {}", out.text(i));
    }
    assert_eq!(out.result(3)["isError"], true, "{}", out.steps[3]);
    assert!(out.text(3).contains("without the requestState"), "{}", out.text(3));
    assert_eq!(served.count(), 0, "a forged state ran a call");

    // Another server process (another key) does not honour this one's
    // state either.
    let plan = json!({
        "server": served.server(&[]),
        "elicitation": "accept",
        "steps": [{"call": execute(COUNTED), "allow_input_required": true, "responses": accept, "state": state}],
    });
    let out = client(&dir, "v2", &plan);
    assert!(out.text(0).contains("requestState failed verification"), "{}", out.text(0));
    assert_eq!(served.count(), 0, "another server's state ran a call");

    // The genuine retry runs the call once; replaying it runs nothing and
    // leaves the run's receipt as it was.
    let plan = json!({
        "server": served.server(&[]),
        "elicitation": "accept",
        "steps": [
            {"call": execute(COUNTED), "allow_input_required": true},
            {"call": execute(COUNTED), "allow_input_required": true, "responses": accept, "state_from": 0},
            {"call": execute(COUNTED), "allow_input_required": true, "responses": accept, "state_from": 0},
        ],
    });
    let out = client(&dir, "v2", &plan);
    let s = out.structured(1);
    assert_eq!(
        (s["status"].as_str(), s["value"].as_str()),
        (Some("completed"), Some("ran")),
        "{}",
        out.text(1)
    );
    let run_id = s["run_id"].as_str().unwrap();
    assert_eq!(served.count(), 1);
    let replay = out.structured(2);
    assert_eq!(replay["error"]["kind"], "not_resumable", "{}", out.text(2));
    assert_eq!(replay["receipt_path"], Value::Null, "a refused resume saves no receipt");
    assert_eq!(served.count(), 1, "the replay ran the call again");
    assert_eq!(served.receipt(run_id)["status"], "completed", "the replay overwrote the run's receipt");
}

#[test]
fn a_program_cannot_approve_its_own_calls() {
    let Some(dir) = clients() else { return };
    let served = Served::new();
    // Running `codemode approve` is a bash call like any other: gated, so
    // it pauses for the person too.
    let approve = format!(
        "await tools.bash({{command: '{} approve run-x --allow 1'}}); return 1",
        env!("CARGO_BIN_EXE_codemode")
    );
    // The journal folder cannot be written by the writer tools, nor by
    // bash, even under full access (its sandbox mounts it read-only).
    let write = "const out = []; \
                 for (const path of ['.codemode/runs/x/journal.jsonl', '.codemode/decisions.json']) { \
                   try { await tools.write({path, content: '{}'}); out.push('written') } catch (e) { out.push(e.kind) } } \
                 return out";
    let bash = "return (await tools.bash({command: 'echo {} > .codemode/runs/forged.jsonl; echo $?'})).content.exit_code";
    let plan = json!({
        "server": served.server(&[]),
        "steps": [{"call": execute(&approve)}, {"call": execute(write)}],
    });
    let out = client(&dir, "v1", &plan);
    let s = out.structured(0);
    assert_eq!(s["status"], "paused", "{}", out.text(0));
    assert!(s["pending"][0]["subject"].as_str().unwrap().contains("approve run-x"), "{s}");
    assert_eq!(out.structured(1)["value"], json!(["refused", "refused"]), "{}", out.text(1));

    let plan =
        json!({"server": served.server(&["--posture", "full-access"]), "steps": [{"call": execute(bash)}]});
    let out = client(&dir, "v1", &plan);
    assert_eq!(out.structured(0)["status"], "completed", "{}", out.text(0));
    assert!(
        !served.path().join(".codemode/runs/forged.jsonl").exists(),
        "bash wrote into the journal folder"
    );
    assert!(!served.path().join(".codemode/decisions.json").exists());
}

/// Pids of live processes whose command line contains `marker`.
fn processes_with(marker: &str) -> Vec<i32> {
    let mut pids = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else { continue };
        let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        let stat = std::fs::read_to_string(entry.path().join("stat")).unwrap_or_default();
        let zombie = stat.rsplit(')').next().and_then(|s| s.split_whitespace().next()) == Some("Z");
        if !zombie && String::from_utf8_lossy(&cmdline).replace('\0', " ").contains(marker) {
            pids.push(pid);
        }
    }
    pids
}

#[test]
fn cancelling_the_request_cancels_the_run() {
    let Some(dir) = clients() else { return };
    for sdk in ["v1", "v2"] {
        let served = Served::new();
        // A sleep no other test runs, to find its process.
        let seconds = format!("{}.{}", 40 + u32::from(sdk == "v2"), std::process::id());
        let started = served.path().join("started");
        let program = format!(
            "await tools.bash({{command: 'touch started; exec sleep {seconds}'}}); return 'not cancelled'"
        );
        let plan = json!({
            "server": served.server(&["--posture", "full-access"]),
            "steps": [
                {"call": execute(&program), "abort_when_file": started},
                {"call": execute("return 2")},
            ],
        });
        let out = client(&dir, sdk, &plan);
        let aborted = &out.steps[0];
        assert!(aborted["error"].as_str().is_some_and(|e| e.contains("aborted")), "{sdk}: {aborted}");
        // The session goes on.
        assert_eq!(out.structured(1)["value"], 2, "{sdk}");
        // The cancelled run's receipt is on disk, and its sleep is gone
        // (polling: bounds, not timings).
        let runs = crate::common::runs_dir(served.path());
        let mut cancelled = None;
        for _ in 0..500 {
            cancelled = std::fs::read_dir(&runs).unwrap().flatten().find_map(|e| {
                let r: Value =
                    serde_json::from_slice(&std::fs::read(e.path().join("receipt.json")).ok()?).ok()?;
                (r["status"] == "cancelled").then_some(r)
            });
            if cancelled.is_some() {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let receipt =
            cancelled.unwrap_or_else(|| panic!("{sdk}: no cancelled receipt in {}", runs.display()));
        assert_eq!(receipt["calls"][0]["tool"], "bash", "{sdk}: {receipt}");
        assert_ne!(receipt["calls"][0]["status"], "ok", "{sdk}: {receipt}");
        let marker = format!("sleep {seconds}");
        for _ in 0..500 {
            if processes_with(&marker).is_empty() {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        assert_eq!(processes_with(&marker), Vec::<i32>::new(), "{sdk}: the cancelled call's process is left");
    }
}

/// Runs the inspector CLI (`@modelcontextprotocol/inspector-cli`) against
/// `codemode mcp serve` over stdio with `method_args`; its JSON output.
fn inspector(served: &Served, method_args: &[&str]) -> Value {
    let build = root().join("tests/node/node_modules/@modelcontextprotocol/inspector-cli/build");
    // The CLI reads its own package.json relative to the working
    // directory, hence `build` as the working directory.
    let output = Command::new("node")
        .env("XDG_STATE_HOME", crate::common::XDG_STATE)
        .arg(build.join("index.js"))
        .arg(env!("CARGO_BIN_EXE_codemode"))
        .args(["mcp", "serve", "--workspace"])
        .arg(served.path())
        .args(method_args)
        .current_dir(&build)
        .env("XDG_CONFIG_HOME", served.config.path().join("no-trust-record"))
        .output()
        .expect("node runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&output.stderr));
    serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}"))
}

#[test]
fn the_inspector_cli_lists_tools_and_calls_execute_tools() {
    if clients().is_none() {
        return;
    }
    let served = Served::new();
    let listed = inspector(&served, &["--method", "tools/list"]);
    let names: Vec<&str> =
        listed["tools"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["execute_tools", "tool_search"]);
    let called = inspector(
        &served,
        &[
            "--method",
            "tools/call",
            "--tool-name",
            "execute_tools",
            "--tool-arg",
            "code=const r = await tools.read({path: 'b.txt'}); return r.metadata.total_lines",
        ],
    );
    assert_eq!(called["structuredContent"]["status"], "completed", "{called}");
    assert_eq!(called["structuredContent"]["value"], 4, "{called}");
    assert_eq!(called["isError"], false);
}

#[test]
fn the_persons_wait_does_not_count_against_the_deadline_and_no_answer_denies() {
    let Some(dir) = clients() else { return };
    // The person takes 2 s to accept; the run's deadline is 1 s.
    let served = Served::new();
    let plan = json!({
        "server": served.server(&["--deadline", "1"]),
        "elicitation": "accept",
        "elicitation_delay_ms": 2000,
        "steps": [{"call": execute(COUNTED)}],
    });
    let out = client(&dir, "v1", &plan);
    let s = out.structured(0);
    assert_eq!(
        (s["status"].as_str(), s["value"].as_str()),
        (Some("completed"), Some("ran")),
        "{}",
        out.text(0)
    );
    assert_eq!(served.count(), 1);
    let receipt = served.receipt(s["run_id"].as_str().unwrap());
    assert!(receipt["approval_wait_ms"].as_f64().unwrap() >= 1000.0, "{receipt}");

    // The person never answers: the approval timeout denies the call, and
    // the receipt says so (not that the person cancelled).
    let served = Served::new();
    let plan = json!({
        "server": served.server(&["--approval-timeout", "0.5"]),
        "elicitation": "accept",
        "elicitation_delay_ms": 30000,
        "steps": [{"call": execute(COUNTED)}],
    });
    let out = client(&dir, "v1", &plan);
    let s = out.structured(0);
    assert_eq!(
        (s["status"].as_str(), s["value"].as_str()),
        (Some("completed"), Some("denied")),
        "{}",
        out.text(0)
    );
    assert_eq!(served.count(), 0);
    let receipt = served.receipt(s["run_id"].as_str().unwrap());
    assert_eq!(receipt["calls"][0]["decision"], "denied", "{receipt}");
    assert!(receipt.to_string().contains("within the approval timeout"), "{receipt}");
}

/// A question put to the person about a call of a run told to stop (here
/// its deadline passed while the program is stuck in work QuickJS does
/// not interrupt) is cancelled on the client (`notifications/cancelled`),
/// not left up for an answer that would act on nothing; a first question
/// answered before it changes nothing.
#[test]
fn a_question_about_a_call_of_a_run_told_to_stop_is_withdrawn_from_the_client() {
    let Some(dir) = clients() else { return };
    let served = Served::new();
    let stuck = "await tools.bash({command: 'echo first >> count.txt'});\n\
                 tools.bash({command: 'echo ran >> count.txt'});\n\
                 const a = new Float64Array(1 << 20);\n\
                 for (;;) a.sort();";
    let accept = |delay_ms: u64| json!({"action": "accept", "content": {}, "delay_ms": delay_ms});
    let plan = json!({
        "server": served.server(&["--deadline", "1"]),
        "elicitation": "accept",
        "answers": [accept(0), accept(20000)],
        "steps": [{"call": execute(stuck)}],
    });
    let out = client(&dir, "v1", &plan);
    let s = out.structured(0);
    assert_eq!(s["status"], "timed_out", "{}", out.text(0));
    assert_eq!(out.elicitations.len(), 2, "{:?}", out.elicitations);
    assert_eq!(out.withdrawn, [1], "the question was left up on the client");
    assert_eq!(served.count(), 1, "the second call ran");
}

/// Over HTTP, one server serves many sessions, each numbering the
/// server's requests from 0: every session's first question is withdrawn
/// too (a `ping` goes before each question).
#[test]
fn every_sessions_first_question_over_http_is_withdrawn_too() {
    let Some(dir) = clients() else { return };
    let served = Served::new();
    let http =
        crate::serve_http::Served::start(&["--http", "127.0.0.1:0", "--deadline", "1"], served.path(), &[]);
    // A first session asks and is answered at once ...
    let plan = json!({
        "server": {"url": http.url},
        "elicitation": "accept",
        "steps": [{"call": execute("await tools.bash({command: 'echo ran >> count.txt'}); return 1")}],
    });
    let out = client(&dir, "v1", &plan);
    assert_eq!(out.structured(0)["value"], 1, "{}", out.text(0));
    // ... and a second session's first question is withdrawn at the deadline.
    let stuck = "tools.bash({command: 'echo ran >> count.txt'});\n\
                 const a = new Float64Array(1 << 20);\n\
                 for (;;) a.sort();";
    let plan = json!({
        "server": {"url": http.url},
        "elicitation": "accept",
        "answers": [{"action": "accept", "content": {}, "delay_ms": 20000}],
        "steps": [{"call": execute(stuck)}],
    });
    let out = client(&dir, "v1", &plan);
    assert_eq!(out.structured(0)["status"], "timed_out", "{}", out.text(0));
    assert_eq!(out.withdrawn, [0], "the second session's question was left up on the client");
    assert_eq!(served.count(), 1, "the withdrawn call ran");
}

/// The session's first question is withdrawn as any other: a `ping` goes
/// before each question, since the TypeScript SDK drops a cancel of
/// request 0.
#[test]
fn the_first_question_of_a_session_is_withdrawn_from_the_client_too() {
    let Some(dir) = clients() else { return };
    let served = Served::new();
    let stuck = "tools.bash({command: 'echo ran >> count.txt'});\n\
                 const a = new Float64Array(1 << 20);\n\
                 for (;;) a.sort();";
    let plan = json!({
        "server": served.server(&["--deadline", "1"]),
        "elicitation": "accept",
        "answers": [{"action": "accept", "content": {}, "delay_ms": 20000}],
        "steps": [{"call": execute(stuck)}],
    });
    let out = client(&dir, "v1", &plan);
    assert_eq!(out.structured(0)["status"], "timed_out", "{}", out.text(0));
    assert_eq!(out.elicitations.len(), 1, "{:?}", out.elicitations);
    assert_eq!(out.withdrawn, [0], "the first question was left up on the client");
    assert_eq!(served.count(), 0, "the call ran");
}

/// A call that reaches the gate just before its run's deadline, while
/// its question waits for others to gather with it, is not asked at all:
/// it is dropped at the deadline itself, not at the next look.
#[test]
fn a_call_gathered_for_a_question_across_the_deadline_is_not_asked() {
    let Some(dir) = clients() else { return };
    let served = Served::new();
    let stuck = "const t = Date.now(); while (Date.now() - t < 900) {}\n\
                 tools.bash({command: 'echo ran >> count.txt'});\n\
                 const a = new Float64Array(1 << 20);\n\
                 for (;;) a.sort();";
    let plan = json!({
        "server": served.server(&["--deadline", "1"]),
        "elicitation": "accept",
        "steps": [{"call": execute(stuck)}],
    });
    let out = client(&dir, "v1", &plan);
    assert_eq!(out.structured(0)["status"], "timed_out", "{}", out.text(0));
    assert_eq!(out.elicitations, Vec::<String>::new(), "asked after the deadline");
    assert_eq!(served.count(), 0, "the call ran");
}

#[test]
fn direct_tools_and_tool_search_through_a_client() {
    let Some(dir) = clients() else { return };
    let served = Served::new();
    let call = |name: &str, args: Value| json!({"name": name, "arguments": args});
    let plan = json!({
        "server": served.server(&["--direct-tools"]),
        "elicitation": "decline",
        "steps": [
            {"list": true},
            // An upstream server's tools are known once it started (here
            // by a program's call; its start is the gate's business).
            {"call": execute("return (await tools.mcp__everything__echo({message: 'hi'})).content")},
            {"call": call("tool_search", json!({"query": "echo message"}))},
            {"call": call("read", json!({"path": "a.txt"}))},
            {"call": call("bash", json!({"command": "echo ran >> count.txt"}))},
            {"call": call("mcp__everything__echo", json!({"message": "x"}))},
        ],
    });
    let out = client(&dir, "v1", &plan);
    let names = out.steps[0]["tools"].as_array().unwrap();
    for name in ["execute_tools", "tool_search", "read", "write", "edit", "file_search", "grep_files", "bash"]
    {
        assert!(names.contains(&json!(name)), "{name} not listed: {names:?}");
    }
    assert_eq!(out.structured(1)["value"], "Echo: hi", "{}", out.text(1));
    let found = out.text(2);
    assert!(found.contains("mcp__everything__echo"), "{found}");
    assert!(out.text(3).contains("alpha"), "{}", out.steps[3]);
    // A direct bash call passes the same gate: the person declined.
    assert_eq!(out.result(4)["isError"], true, "{}", out.steps[4]);
    assert_eq!(out.elicitations.len(), 1, "{:?}", out.elicitations);
    assert_eq!(served.count(), 0);
    // Upstream tools are reached inside programs, not listed.
    let unknown = &out.steps[5];
    assert!(unknown["error"].as_str().is_some_and(|e| e.contains("unknown tool")), "{unknown}");
}

#[test]
fn an_untrusted_workspace_servers_start_is_put_to_the_person() {
    let Some(dir) = clients() else { return };
    for (answer, value) in [("accept", "Echo: hi"), ("decline", "denied")] {
        let served = Served::new();
        // The workspace's own .mcp.json: untrusted until `codemode trust`.
        let everything = node_server("server-everything");
        let servers =
            json!({"mcpServers": {"everything": {"command": "node", "args": [everything, "stdio"]}}});
        std::fs::write(served.path().join(".mcp.json"), servers.to_string()).unwrap();
        let mut server = served.server(&[]);
        let args: Vec<Value> =
            server["args"].as_array().unwrap().iter().take_while(|a| *a != "--mcp-config").cloned().collect();
        server["args"] = json!(args);
        let program = "try { return (await tools.mcp__everything__echo({message: 'hi'})).content } catch (e) { return e.kind }";
        let plan = json!({"server": server, "elicitation": answer, "steps": [{"call": execute(program)}]});
        let out = client(&dir, "v1", &plan);
        assert_eq!(out.structured(0)["value"], value, "{answer}: {}", out.text(0));
        assert_eq!(out.elicitations.len(), 1, "{answer}: {:?}", out.elicitations);
        let asked = &out.elicitations[0];
        assert!(asked.contains("mcp_connect__everything") && asked.contains(&everything), "{asked}");
    }
}

/// The same clients over streamable HTTP (`codemode mcp serve --http`): v1
/// and v2 run a program that reads a file and calls the upstream server,
/// and have an approval put to them (v1: `elicitation/create` on its
/// session; v2: `input_required`); the inspector CLI lists the tools and
/// calls `execute_tools`.
#[test]
fn the_clients_over_http() {
    let Some(dir) = clients() else { return };
    let served = Served::new();
    let config = served.config.path().join("mcp.json");
    let no_trust = served.config.path().join("no-trust-record");
    let http = crate::serve_http::Served::start(
        &["--http", "127.0.0.1:0", "--mcp-config", config.to_str().unwrap()],
        served.path(),
        &[("XDG_CONFIG_HOME", no_trust.to_str().unwrap())],
    );
    let program = "const b = await tools.read({path: 'b.txt'}); \
                   const e = await tools.mcp__everything__echo({message: 'hi'}); \
                   return {lines: b.metadata.total_lines, echo: e.content}";
    for (sdk, runs) in [("v1", 1), ("v2", 2)] {
        let plan = json!({
            "server": {"url": http.url},
            "elicitation": "accept",
            "steps": [{"list": true}, {"call": execute(program)}, {"call": execute(COUNTED)}],
        });
        let out = client(&dir, sdk, &plan);
        assert_eq!(out.steps[0]["tools"], json!(["execute_tools", "tool_search"]), "{sdk}");
        let s = out.structured(1);
        assert_eq!(s["status"], "completed", "{sdk}: {}", out.text(1));
        assert_eq!(s["value"], json!({"lines": 4, "echo": "Echo: hi"}), "{sdk}");
        assert_eq!(out.structured(2)["value"], "ran", "{sdk}: {}", out.text(2));
        assert_eq!(out.elicitations.len(), 1, "{sdk}: the person was asked once");
        assert_eq!(served.count(), runs, "{sdk}: the approved call ran once");
    }

    let build = root().join("tests/node/node_modules/@modelcontextprotocol/inspector-cli/build");
    let inspect = |args: &[&str]| -> Value {
        let output = Command::new("node")
            .env("XDG_STATE_HOME", crate::common::XDG_STATE)
            .arg(build.join("index.js"))
            .arg(&http.url)
            .args(["--transport", "http"])
            .args(args)
            .current_dir(&build)
            .output()
            .expect("node runs");
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(output.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&output.stderr));
        serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}"))
    };
    let listed = inspect(&["--method", "tools/list"]);
    let names: Vec<&str> =
        listed["tools"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["execute_tools", "tool_search"]);
    let called = inspect(&[
        "--method",
        "tools/call",
        "--tool-name",
        "execute_tools",
        "--tool-arg",
        "code=return (await tools.read({path: 'b.txt'})).metadata.total_lines",
    ]);
    assert_eq!(called["structuredContent"]["value"], 4, "{called}");
}
