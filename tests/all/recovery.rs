//! Recovery of runs whose process was killed (docs/JOURNAL.md,
//! "Recovery"): real `codemode` processes, SIGKILLed during a bash call,
//! during a write and between calls, on the local store and on
//! PostgreSQL; the recovered runs finish with no finished call repeated
//! (the tools' effects are counted in files), and a call in flight at the
//! kill waits for a person (`unknown_outcome`), who allows or denies it.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::cli::{codemode, spawn};

/// A run's journal text, by workspace and run id.
type Lines = Box<dyn Fn(&Path, &str) -> String>;

/// The runs' ids, by workspace.
type RunIds = Box<dyn Fn(&Path) -> Vec<String>>;

/// Where the runs' journals are: the local state folder, or PostgreSQL.
pub(crate) struct Store {
    /// Options every command gets: `--journal URL` for PostgreSQL,
    /// nothing for the local store (or a `--config`).
    pub(crate) flag: Vec<String>,
    /// A run's journal text.
    pub(crate) lines: Lines,
    /// The runs' ids.
    pub(crate) runs: RunIds,
}

impl Store {
    pub(crate) fn local() -> Store {
        Store {
            flag: Vec::new(),
            lines: Box::new(|ws, id| {
                let path = crate::common::runs_dir(ws).join(id).join("journal.jsonl");
                std::fs::read_to_string(path).unwrap_or_default()
            }),
            runs: Box::new(|ws| {
                let Ok(entries) = std::fs::read_dir(crate::common::runs_dir(ws)) else { return Vec::new() };
                let mut ids: Vec<String> = entries
                    .flatten()
                    .filter(|e| e.path().join("journal.jsonl").exists())
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect();
                ids.sort();
                ids
            }),
        }
    }

    fn postgres(db: &std::sync::Arc<crate::journal_postgres::Db>) -> Store {
        let block = |f: std::pin::Pin<Box<dyn std::future::Future<Output = Value> + '_>>| {
            tokio::task::block_in_place(|| tokio::runtime::Handle::current().block_on(f))
        };
        let (a, b) = (db.clone(), db.clone());
        Store {
            flag: vec!["--journal".into(), db.url.clone()],
            lines: Box::new(move |_, id| {
                let id = id.to_owned();
                block(Box::pin(async { Value::String(a.journal_text(&id).await) }))
                    .as_str()
                    .unwrap()
                    .to_owned()
            }),
            runs: Box::new(move |_| {
                let ids = block(Box::pin(async { Value::from(b.run_ids().await) }));
                ids.as_array().unwrap().iter().map(|v| v.as_str().unwrap().to_owned()).collect()
            }),
        }
    }

    /// `codemode ARGS` (with this store's flag) in `ws`, to its end.
    pub(crate) fn run(&self, ws: &Path, args: &[&str]) -> std::process::Output {
        let mut all: Vec<&str> = args.to_vec();
        all.extend(self.flag.iter().map(String::as_str));
        codemode(&all, "", ws)
    }

    /// Starts `codemode run prog.js --approve allow` in `ws` with `env`,
    /// waits until its journal holds `seen` (and `ready` says yes), and
    /// SIGKILLs it. Returns the run's id.
    pub(crate) fn run_and_kill(
        &self,
        ws: &Path,
        env: &[(&str, &Path)],
        seen: &str,
        ready: &dyn Fn() -> bool,
    ) -> String {
        let mut args = vec!["run", "prog.js", "--approve", "allow"];
        args.extend(self.flag.iter().map(String::as_str));
        let mut child = spawn(&args, ws, env);
        let start = Instant::now();
        let run_id = loop {
            assert!(start.elapsed() < Duration::from_secs(60), "the run got to `{seen}`");
            std::thread::sleep(Duration::from_millis(50));
            if let Some(id) = (self.runs)(ws).into_iter().next()
                && (self.lines)(ws, &id).contains(seen)
                && ready()
            {
                break id;
            }
            if let Ok(Some(status)) = child.try_wait() {
                let out = child.wait_with_output().unwrap();
                panic!("the run ended first ({status}): {}", String::from_utf8_lossy(&out.stderr));
            }
        };
        child.kill().unwrap(); // SIGKILL
        let _ = child.wait();
        run_id
    }
}

pub(crate) fn json(out: &std::process::Output) -> Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!("{e}: {}\n{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
    })
}

pub(crate) fn read(ws: &Path, file: &str) -> String {
    std::fs::read_to_string(ws.join(file)).unwrap_or_default()
}

/// A workspace whose `add.sh X` appends X to count.txt (so each run of a
/// command is counted) and whose `hold.sh` waits while `hold` exists.
pub(crate) fn workspace(program: &str) -> tempfile::TempDir {
    let ws = crate::common::workspace();
    std::fs::write(ws.path().join("add.sh"), "echo $1 >> count.txt\n").unwrap();
    std::fs::write(ws.path().join("hold.sh"), "while [ -f hold ]; do sleep 0.05; done\n").unwrap();
    std::fs::write(ws.path().join("hold"), "").unwrap();
    std::fs::write(ws.path().join("prog.js"), program).unwrap();
    ws
}

/// The calls' seqs of a receipt, in order.
fn seqs(receipt: &Value) -> Vec<u64> {
    receipt["calls"].as_array().unwrap().iter().map(|c| c["seq"].as_u64().unwrap()).collect()
}

pub(crate) const DURING_BASH: &str = r#"
await tools.bash({command: 'sh add.sh a'});
await tools.write({path: 'w.txt', content: 'written'});
let got = 'ran';
try { await tools.bash({command: 'sh add.sh b && sh hold.sh'}); } catch (e) { got = e.kind; }
await tools.bash({command: 'sh add.sh d'});
return got;
"#;

/// Killed while a bash command runs: calls 1 and 2 are answered from the
/// journal, call 3 waits for a person; `allow` runs it again, `deny`
/// rejects it in the program (caught: kind `unknown_outcome`).
fn killed_during_bash(store: &Store, allow: bool) {
    let ws = workspace(DURING_BASH);
    let ws = ws.path();
    let run_id =
        store.run_and_kill(ws, &[], r#"{"t":"start","seq":3}"#, &|| read(ws, "count.txt") == "a\nb\n");
    std::fs::remove_file(ws.join("hold")).unwrap();

    // Deciding call 3 before the recovery paused on it: nothing waits for
    // a decision yet, and the refusal says how to get there.
    let early = store.run(ws, &["resume", &run_id, "--deny", "3"]);
    let said = String::from_utf8_lossy(&early.stderr);
    assert_eq!(early.status.code(), Some(2), "{said}");
    assert!(said.contains("recover it first with `codemode resume"), "{said}");

    let recovered = store.run(ws, &["resume", &run_id, "--json"]);
    assert_eq!(recovered.status.code(), Some(4), "{}", String::from_utf8_lossy(&recovered.stdout));
    let paused = json(&recovered);
    assert_eq!(paused["status"], "paused");
    let pending = &paused["pending"][0];
    assert_eq!((pending["seq"].as_u64(), pending["kind"].as_str()), (Some(3), Some("unknown_outcome")));
    assert_eq!(pending["tool"], "bash");
    assert_eq!(read(ws, "count.txt"), "a\nb\n", "nothing finished ran again");
    // A person sees why it waits.
    let listed = store.run(ws, &["approve", &run_id, "--json"]);
    assert_eq!(json(&listed)["pending"][0]["kind"], "unknown_outcome");
    let shown = store.run(ws, &["runs", "show", &run_id, "--json"]);
    assert_eq!(json(&shown)["pending"][0]["kind"], "unknown_outcome");

    let decision = if allow { "--allow" } else { "--deny" };
    let done = store.run(ws, &["resume", &run_id, decision, "3", "--approve", "allow", "--json"]);
    assert_eq!(done.status.code(), Some(0), "{}", String::from_utf8_lossy(&done.stdout));
    let receipt = json(&done);
    assert_eq!(seqs(&receipt), [1, 2, 3, 4], "one receipt, one seq numbering");
    if allow {
        assert_eq!(receipt["value"], "ran");
        assert_eq!(read(ws, "count.txt"), "a\nb\nb\nd\n", "call 3 ran again, as allowed; nothing else");
    } else {
        assert_eq!(receipt["value"], "unknown_outcome");
        assert_eq!(receipt["calls"][2]["decision"], "denied");
        assert_eq!(read(ws, "count.txt"), "a\nb\nd\n", "call 3 did not run again");
    }
    assert_eq!(read(ws, "w.txt"), "written");
}

const DURING_WRITE: &str = r#"
await tools.bash({command: 'sh add.sh a'});
await tools.write({path: 'w.txt', content: 'written'});
await tools.bash({command: 'sh add.sh c'});
return 'done';
"#;

/// Killed between a write's durable start and its end (the test hook
/// holds the write there): the write waits for a person.
fn killed_during_a_write(store: &Store) {
    let ws = workspace(DURING_WRITE);
    let ws = ws.path();
    let hold = [("CODEMODE_TEST_HOLD_STARTED", Path::new("write:60000"))];
    let run_id = store.run_and_kill(ws, &hold, r#"{"t":"start","seq":2}"#, &|| true);
    assert!(!ws.join("w.txt").exists());
    let recovered = store.run(ws, &["resume", &run_id, "--json"]);
    assert_eq!(recovered.status.code(), Some(4), "{}", String::from_utf8_lossy(&recovered.stdout));
    let pending = &json(&recovered)["pending"][0];
    assert_eq!((pending["seq"].as_u64(), pending["tool"].as_str()), (Some(2), Some("write")));
    assert_eq!(pending["kind"], "unknown_outcome");
    let done = store.run(ws, &["resume", &run_id, "--allow", "2", "--approve", "allow", "--json"]);
    assert_eq!(done.status.code(), Some(0), "{}", String::from_utf8_lossy(&done.stdout));
    assert_eq!(seqs(&json(&done)), [1, 2, 3]);
    assert_eq!(read(ws, "w.txt"), "written");
    assert_eq!(read(ws, "count.txt"), "a\nc\n", "call 1 ran once");
}

/// A write whose outcome a recovery cannot tell waits for a person, bound
/// to what its file held then: a file made by someone else before the
/// allow is not run over (gate/binding.rs).
#[test]
fn a_write_of_unknown_outcome_is_not_run_over_a_file_made_since_its_recovery() {
    let store = Store::local();
    let ws = workspace(DURING_WRITE);
    let ws = ws.path();
    let hold = [("CODEMODE_TEST_HOLD_STARTED", Path::new("write:60000"))];
    let run_id = store.run_and_kill(ws, &hold, r#"{"t":"start","seq":2}"#, &|| true);
    let recovered = store.run(ws, &["resume", &run_id, "--json"]);
    assert_eq!(recovered.status.code(), Some(4), "{}", String::from_utf8_lossy(&recovered.stdout));
    std::fs::write(ws.join("w.txt"), "a person's own").unwrap();
    let done = store.run(ws, &["resume", &run_id, "--allow", "2", "--approve", "allow", "--json"]);
    let receipt = json(&done);
    assert_eq!(receipt["calls"][1]["decision"], "refused", "{receipt}");
    let error = receipt["calls"][1]["error"].as_str().unwrap_or_default();
    assert!(error.contains("`w.txt` was made since the run paused"), "{receipt}");
    assert_eq!(read(ws, "w.txt"), "a person's own");
}

/// Reads `b.txt` and `own.txt`, pauses on a bash call, writes `own.txt`,
/// holds in a bash call (killed there), then writes both files.
const READ_PAUSE_WRITE_HOLD: &str = r#"
const before = await tools.read({path: 'b.txt', format: 'text'});
await tools.read({path: 'own.txt', format: 'text'});
await tools.bash({command: 'true'});
await tools.write({path: 'own.txt', content: 'mine\n'});
await tools.bash({command: 'sh hold.sh'});
const results = [];
for (const [path, content] of [['own.txt', 'again\n'], ['b.txt', before.content + 'added\n']]) {
  try { await tools.write({path, content}); results.push(path + ' written'); } catch (e) { results.push(path + ' ' + e.kind); }
}
return results;
"#;

/// A resume that found a file changed while the run was paused, killed
/// before it paused again: its recovery finds the change again (it
/// compares with the pause's record), so a write made from the read
/// before the pause is still refused; and the run's own write after the
/// pause is taken for its own, not for someone else's change.
#[test]
fn a_recovery_still_refuses_a_write_over_a_file_changed_while_the_run_was_paused() {
    let store = Store::local();
    let ws = workspace(READ_PAUSE_WRITE_HOLD);
    let ws = ws.path();
    std::fs::write(ws.join("b.txt"), "b\n").unwrap();
    std::fs::write(ws.join("own.txt"), "own\n").unwrap();
    let paused = store.run(ws, &["run", "prog.js", "--approve", "pause", "--json"]);
    assert_eq!(paused.status.code(), Some(4), "{}", String::from_utf8_lossy(&paused.stderr));
    let run_id = json(&paused)["run_id"].as_str().unwrap().to_owned();
    std::fs::write(ws.join("b.txt"), "b\na person's own\n").unwrap();
    // The resume writes own.txt, then holds in bash: killed there.
    let mut resume = spawn(&["resume", &run_id, "--allow", "3", "--approve", "allow"], ws, &[]);
    let start = Instant::now();
    while !(store.lines)(ws, &run_id).contains(r#"{"t":"start","seq":5"#) {
        assert!(start.elapsed() < Duration::from_secs(60), "the resume got to its bash call");
        std::thread::sleep(Duration::from_millis(50));
    }
    resume.kill().unwrap();
    let _ = resume.wait();
    assert_eq!(read(ws, "own.txt"), "mine\n");
    std::fs::remove_file(ws.join("hold")).unwrap();
    // The recovery asks about the bash call in flight; allowed, the run ends.
    let recovered = store.run(ws, &["resume", &run_id, "--json"]);
    assert_eq!(recovered.status.code(), Some(4), "{}", String::from_utf8_lossy(&recovered.stdout));
    let done = store.run(ws, &["resume", &run_id, "--allow", "5", "--approve", "allow", "--json"]);
    let receipt = json(&done);
    assert_eq!(receipt["value"], serde_json::json!(["own.txt written", "b.txt refused"]), "{receipt}");
    assert_eq!(read(ws, "b.txt"), "b\na person's own\n");
    assert_eq!(read(ws, "own.txt"), "again\n");
}

const BETWEEN_CALLS: &str = r#"
await tools.bash({command: 'sh add.sh a'});
await tools.write({path: 'w.txt', content: 'written'});
const end = Date.now() + 3000;
while (Date.now() < end) {}
await tools.bash({command: 'sh add.sh c'});
return 'done';
"#;

/// Killed while the program computes between calls: nothing is in
/// flight, so the recovery runs to its end with no person asked.
fn killed_between_calls(store: &Store) {
    let ws = workspace(BETWEEN_CALLS);
    let ws = ws.path();
    let run_id = store.run_and_kill(ws, &[], r#"{"t":"done","seq":2"#, &|| true);
    let done = store.run(ws, &["resume", &run_id, "--approve", "allow", "--json"]);
    assert_eq!(done.status.code(), Some(0), "{}", String::from_utf8_lossy(&done.stdout));
    let receipt = json(&done);
    assert_eq!(receipt["value"], "done");
    assert_eq!(seqs(&receipt), [1, 2, 3]);
    assert_eq!(read(ws, "count.txt"), "a\nc\n", "call 1 ran once");
    // Recovered once: the run has ended.
    let again = store.run(ws, &["resume", &run_id, "--json"]);
    assert_eq!(again.status.code(), Some(5));
}

#[test]
fn local_killed_during_bash_then_denied() {
    killed_during_bash(&Store::local(), false);
}

#[test]
fn local_killed_during_bash_then_allowed() {
    killed_during_bash(&Store::local(), true);
}

#[test]
fn local_killed_during_a_write() {
    killed_during_a_write(&Store::local());
}

#[test]
fn local_killed_between_calls() {
    killed_between_calls(&Store::local());
}

/// A sandboxed bash call sets its sandbox up while the journal makes its
/// start durable, but its shell starts only after (the launcher waits for
/// the engine's go on stdin). Held just after the durable start (the
/// test hook) and killed there, the command never ran: not during the
/// hold, and not after the engine died (the launcher and its init die
/// with it).
#[test]
fn a_sandboxed_bash_call_starts_its_shell_only_once_its_start_is_durable() {
    let store = Store::local();
    let ws = workspace("await tools.bash({command: 'sh add.sh a'}); return 1;");
    let ws = ws.path();
    let hold = [("CODEMODE_TEST_HOLD_STARTED", Path::new("bash:60000"))];
    let first_seen = std::cell::Cell::new(None::<Instant>);
    // Half a second into the hold: time for a launcher that did not wait
    // to have run the shell.
    let ready = || {
        let since = first_seen.get().unwrap_or_else(Instant::now);
        first_seen.set(Some(since));
        since.elapsed() > Duration::from_millis(500)
    };
    let run_id = store.run_and_kill(ws, &hold, r#"{"t":"start","seq":1}"#, &ready);
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(read(ws, "count.txt"), "", "the command ran before or after its start was durable");
    let shown = store.run(ws, &["resume", &run_id, "--json"]);
    assert_eq!(
        json(&shown)["pending"][0]["kind"],
        "unknown_outcome",
        "{}",
        String::from_utf8_lossy(&shown.stdout)
    );
}

/// Two recoveries of one interrupted run at once: one runs it, the other
/// is refused as held by another process; the run's calls run once.
#[test]
fn two_recoveries_at_once_run_it_once() {
    let ws = workspace(BETWEEN_CALLS);
    let ws = ws.path();
    let store = Store::local();
    let run_id = store.run_and_kill(ws, &[], r#"{"t":"done","seq":2"#, &|| true);
    let args = ["resume", run_id.as_str(), "--approve", "allow", "--json"];
    let (a, b) = (spawn(&args, ws, &[]), spawn(&args, ws, &[]));
    let (a, b) = (a.wait_with_output().unwrap(), b.wait_with_output().unwrap());
    let mut codes = [a.status.code(), b.status.code()];
    codes.sort();
    assert_eq!(
        codes,
        [Some(0), Some(5)],
        "{}\n{}",
        String::from_utf8_lossy(&a.stderr),
        String::from_utf8_lossy(&b.stderr)
    );
    assert_eq!(read(ws, "count.txt"), "a\nc\n");
}

async fn postgres(test: &str) -> Option<std::sync::Arc<crate::journal_postgres::Db>> {
    crate::journal_postgres::database(test).await.map(std::sync::Arc::new)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_killed_during_bash_then_denied_and_allowed() {
    let Some(db) = postgres("rec_bash").await else { return };
    killed_during_bash(&Store::postgres(&db), false);
    let Some(db2) = postgres("rec_bash2").await else { return };
    killed_during_bash(&Store::postgres(&db2), true);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_killed_during_a_write_and_between_calls() {
    let Some(db) = postgres("rec_write").await else { return };
    killed_during_a_write(&Store::postgres(&db));
    let Some(db2) = postgres("rec_between").await else { return };
    killed_between_calls(&Store::postgres(&db2));
}

/// Five runs in flight on PostgreSQL, their processes killed together (a
/// replica lost): each is recovered from another process, two recoveries
/// racing for each; every run finishes once, no finished call repeated.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn five_runs_killed_together_are_all_recovered_elsewhere() {
    let Some(db) = postgres("rec_five").await else { return };
    let store = Store::postgres(&db);
    let ws = workspace(
        r#"
        await tools.bash({command: 'sh add.sh a'});
        await tools.bash({command: 'sh hold.sh'});
        await tools.bash({command: 'sh add.sh c'});
        return 'done';
        "#,
    );
    let ws = ws.path();
    let mut args = vec!["run", "prog.js", "--approve", "allow"];
    args.extend(store.flag.iter().map(String::as_str));
    let mut children: Vec<_> = (0..5).map(|_| spawn(&args, ws, &[])).collect();
    let start = Instant::now();
    loop {
        assert!(start.elapsed() < Duration::from_secs(60), "five runs got to their second call");
        std::thread::sleep(Duration::from_millis(50));
        let ids = (store.runs)(ws);
        if ids.len() == 5 && ids.iter().all(|id| (store.lines)(ws, id).contains(r#"{"t":"start","seq":2}"#)) {
            break;
        }
    }
    for child in &mut children {
        child.kill().unwrap();
        let _ = child.wait();
    }
    assert_eq!(read(ws, "count.txt"), "a\n".repeat(5));
    std::fs::remove_file(ws.join("hold")).unwrap();
    let ids = (store.runs)(ws);
    let mut recoveries = Vec::new();
    for id in &ids {
        let mut args = vec!["resume", id.as_str(), "--approve", "allow", "--json"];
        args.extend(store.flag.iter().map(String::as_str));
        recoveries.push((spawn(&args, ws, &[]), spawn(&args, ws, &[])));
    }
    for (a, b) in recoveries {
        let (a, b) = (a.wait_with_output().unwrap(), b.wait_with_output().unwrap());
        let mut codes = [a.status.code(), b.status.code()];
        codes.sort();
        // One recovers (paused on the call in flight); the other is refused
        // while it holds the run, or, once it paused, finds it paused on
        // the same call (and pauses again, running nothing).
        assert!(
            codes == [Some(4), Some(5)] || codes == [Some(4), Some(4)],
            "{codes:?}: {}\n{}",
            String::from_utf8_lossy(&a.stderr),
            String::from_utf8_lossy(&b.stderr)
        );
        let winner = if a.status.code() == Some(4) { &a } else { &b };
        let paused = json(winner);
        assert_eq!(paused["pending"][0]["seq"], 2);
        assert_eq!(paused["pending"][0]["kind"], "unknown_outcome");
    }
    for id in &ids {
        let done = store.run(ws, &["resume", id, "--allow", "2", "--approve", "allow", "--json"]);
        assert_eq!(done.status.code(), Some(0), "{}", String::from_utf8_lossy(&done.stdout));
        assert_eq!(seqs(&json(&done)), [1, 2, 3]);
    }
    let count = read(ws, "count.txt");
    assert_eq!(count.matches('a').count(), 5, "no finished call ran again: {count}");
    assert_eq!(count.matches('c').count(), 5, "each run finished once: {count}");
}

/// The structured result of `execute_tools` with `arguments`, from `s`.
fn execute(s: &mut crate::serve_stdio::Served, arguments: Value) -> Value {
    let id = s.request("tools/call", serde_json::json!({"name": "execute_tools", "arguments": arguments}));
    let r = s.response(id, |_, _| {});
    r["result"]["structuredContent"].clone()
}

/// A replica lost: one `mcp serve` process on PostgreSQL has answered five
/// runs `running` (--yield-after) and is SIGKILLed with all five in a bash
/// call. Another replica recovers each (`execute_tools {"resume"}`): the
/// call in flight waits for a person, who allows it with `codemode
/// approve`; each run then ends with one receipt, every call once and one
/// seq numbering, and no finished call ran again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_killed_with_five_runs_in_flight_has_them_recovered_by_another() {
    use crate::serve_stdio::Served;
    use serde_json::json;
    let Some(db) = postgres("rec_replica").await else { return };
    let store = Store::postgres(&db);
    let program = "await tools.bash({command: 'sh add.sh a'}); await tools.bash({command: 'sh hold.sh'}); \
                   await tools.bash({command: 'sh add.sh c'}); return 'done';";
    let ws = workspace(program);
    let ws = ws.path();
    let common = ["--posture", "full-access", "--journal", db.url.as_str()];
    let mut a = Served::start(ws, &[&common[..], &["--yield-after", "1"]].concat());
    a.initialize(json!({}));
    let requests: Vec<u64> = (0..5)
        .map(|_| a.request("tools/call", json!({"name": "execute_tools", "arguments": {"code": program}})))
        .collect();
    let mut ids = Vec::new();
    while ids.len() < requests.len() {
        // The answers come in any order.
        let r = a.next();
        if !r["id"].as_u64().is_some_and(|id| requests.contains(&id)) {
            continue;
        }
        let answer = &r["result"]["structuredContent"];
        assert_eq!(answer["status"], "running", "{r}");
        ids.push(answer["run_id"].as_str().unwrap().to_owned());
    }
    let start = Instant::now();
    while !ids.iter().all(|id| (store.lines)(ws, id).contains(r#"{"t":"start","seq":2}"#)) {
        assert!(start.elapsed() < Duration::from_secs(60), "five runs got to their second call");
        std::thread::sleep(Duration::from_millis(50));
    }
    a.kill();
    assert_eq!(read(ws, "count.txt"), "a\n".repeat(5));
    std::fs::remove_file(ws.join("hold")).unwrap();

    let mut b = Served::start(ws, &common);
    b.initialize(json!({}));
    for id in &ids {
        let paused = execute(&mut b, json!({"resume": id}));
        assert_eq!(paused["status"], "paused", "{paused}");
        assert_eq!(paused["pending"][0]["seq"], 2, "{paused}");
        assert_eq!(paused["pending"][0]["kind"], "unknown_outcome", "{paused}");
        let approved = store.run(ws, &["approve", id, "--allow", "2"]);
        assert_eq!(approved.status.code(), Some(0), "{}", String::from_utf8_lossy(&approved.stderr));
        let done = execute(&mut b, json!({"resume": id}));
        assert_eq!(done["status"], "completed", "{done}");
        assert_eq!(done["value"], "done");
        let shown = json(&store.run(ws, &["runs", "show", id, "--json"]));
        let seqs: Vec<u64> =
            shown["calls"].as_array().unwrap().iter().map(|c| c["seq"].as_u64().unwrap()).collect();
        assert_eq!(seqs, [1, 2, 3], "{shown}");
    }
    b.close();
    let count = read(ws, "count.txt");
    assert_eq!(count.matches('a').count(), 5, "no finished call ran again: {count}");
    assert_eq!(count.matches('c').count(), 5, "each run finished once: {count}");
}

/// A real MCP server's annotations decide what a recovery does with its
/// tool's call in flight at the kill. server-filesystem is stopped
/// (SIGSTOP) while the program holds, so the call that follows never gets
/// its answer, and the run's process is SIGKILLed with it in flight.
/// `write_file` declares `idempotentHint: true`: the recovered run repeats
/// it by itself, no person asked. `edit_file` declares `idempotentHint:
/// false`: the recovered run pauses on it as `unknown_outcome`.
#[test]
fn an_mcp_tools_idempotent_hint_decides_whether_its_interrupted_call_repeats() {
    for (tool, repeats) in [("write_file", true), ("edit_file", false)] {
        let ws = workspace("");
        let ws = ws.path().canonicalize().unwrap();
        std::fs::write(ws.join("note.txt"), "draft\n").unwrap();
        let args = match tool {
            "write_file" => format!("{{path: {:?}, content: 'written'}}", ws.join("out.txt")),
            _ => format!(
                "{{path: {:?}, edits: [{{oldText: 'draft', newText: 'final'}}]}}",
                ws.join("note.txt")
            ),
        };
        std::fs::write(
            ws.join("prog.js"),
            format!(
                "await tools.call('mcp__fs__list_allowed_directories', {{}});
                 await tools.bash({{command: 'sh add.sh a'}});
                 await tools.bash({{command: 'sh hold.sh'}});
                 await tools.call('mcp__fs__{tool}', {args});
                 await tools.bash({{command: 'sh add.sh c'}});
                 return 'done';"
            ),
        )
        .unwrap();
        let outside = tempfile::tempdir().unwrap();
        let mcp = outside.path().join("mcp.json");
        let server = crate::mcp_support::node_server("server-filesystem");
        let config = serde_json::json!({"mcpServers": {"fs": {"command": "node", "args": [server, ws]}}});
        std::fs::write(&mcp, config.to_string()).unwrap();
        let mut store = Store::local();
        store.flag = vec!["--mcp-config".into(), mcp.to_string_lossy().into_owned()];

        // Held in seq 3: stop the server, let the program go on to seq 4.
        let marker = format!("index.js {}", ws.display());
        let stopped = std::cell::Cell::new(None);
        let ready = || {
            if stopped.get().is_none() {
                let pids = crate::long_runs::processes_with(&marker);
                assert_eq!(pids.len(), 1, "one server-filesystem: {pids:?}");
                crate::common::send_signal("STOP", pids[0] as u32);
                stopped.set(Some(pids[0]));
                std::fs::remove_file(ws.join("hold")).unwrap();
            }
            let id = (store.runs)(&ws).remove(0);
            (store.lines)(&ws, &id).contains(r#"{"t":"start","seq":4}"#)
        };
        let id = store.run_and_kill(&ws, &[], r#"{"t":"start","seq":3}"#, &ready);
        crate::common::send_signal("KILL", stopped.get().unwrap() as u32);

        let out = store.run(&ws, &["resume", &id, "--approve", "allow", "--json"]);
        let receipt = json(&out);
        if repeats {
            assert_eq!(out.status.code(), Some(0), "{receipt}");
            assert_eq!(seqs(&receipt), [1, 2, 3, 4, 5]);
            assert_eq!(receipt["calls"][3]["status"], "ok", "{receipt}");
            assert_eq!(read(&ws, "out.txt"), "written");
            assert_eq!(read(&ws, "count.txt"), "a\nc\n", "no finished call ran again");
        } else {
            assert_eq!(out.status.code(), Some(4), "{receipt}");
            assert_eq!(receipt["pending"][0]["seq"], 4, "{receipt}");
            assert_eq!(receipt["pending"][0]["kind"], "unknown_outcome", "{receipt}");
            assert_eq!(read(&ws, "note.txt"), "draft\n", "not edited again without a person");
            assert_eq!(read(&ws, "count.txt"), "a\n");
        }
    }
}

/// The fourth review of issue 36: a command whose `timeout` ran out while
/// its start was being made durable was sent its go anyway and killed at
/// once, after it had started. It now never starts, and the error says
/// why.
#[test]
fn a_bash_call_whose_time_runs_out_before_its_start_is_durable_never_starts() {
    let ws = workspace("await tools.bash({command: 'sh add.sh a', timeout: 0.1}); return 1;");
    let ws = ws.path();
    let hold = [("CODEMODE_TEST_HOLD_STARTED", Path::new("bash:400"))];
    let mut child = spawn(&["run", "prog.js", "--approve", "allow", "--json"], ws, &hold);
    drop(child.stdin.take());
    let out = child.wait_with_output().unwrap();
    let receipt = json(&out);
    let message = receipt["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("before it started"), "{receipt:#}");
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(read(ws, "count.txt"), "", "the command ran after its time was up");
}

/// A recovery stopped in its replay (out of time, before anything new
/// ran) leaves the run interrupted, for a recovery again: it used to
/// write a `paused` record of a pause that never was (its times zero, so
/// the next resume's receipt said the run took 57 years) and call the run
/// paused with nothing to decide.
#[test]
fn a_recovery_stopped_in_its_replay_leaves_the_run_interrupted() {
    let program = "const t = Date.now();\n\
                   while (Date.now() - t < 3000) {}\n\
                   await tools.bash({command: 'sh add.sh a; sh hold.sh'});\n\
                   return 'done';\n";
    let ws = workspace(program);
    let ws = ws.path();
    let store = Store::local();
    let run_id = store.run_and_kill(ws, &[], r#"{"t":"start","seq":1}"#, &|| read(ws, "count.txt") == "a\n");
    std::fs::remove_file(ws.join("hold")).unwrap();
    let stopped = store.run(ws, &["resume", &run_id, "--deadline", "1", "--json"]);
    let receipt = json(&stopped);
    assert_eq!(receipt["status"], "timed_out", "{receipt}");
    assert!(receipt["warnings"].to_string().contains("still interrupted"), "{receipt}");
    let shown = store.run(ws, &["runs", "show", &run_id]);
    let shown = String::from_utf8_lossy(&shown.stdout);
    assert!(shown.starts_with(&format!("{run_id}  interrupted")), "{shown}");
    let journal = crate::common::runs_dir(ws).join(&run_id).join("journal.jsonl");
    assert!(!std::fs::read_to_string(journal).unwrap().contains(r#""t":"paused""#), "a pause that never was");
    // Recovered again with time enough: call 1's outcome is unknown, so it
    // waits for a person; denied, the program goes on.
    let again = store.run(ws, &["resume", &run_id, "--json"]);
    assert_eq!(
        json(&again)["pending"][0]["kind"],
        "unknown_outcome",
        "{}",
        String::from_utf8_lossy(&again.stdout)
    );
    let done = store.run(ws, &["resume", &run_id, "--deny", "1", "--json"]);
    let done = json(&done);
    assert!(done["elapsed_ms"].as_f64().unwrap() < 600_000.0, "{done}");
}
