//! Break 3 of issue 30: the journal store's password reached the model.
//! A PostgreSQL URL with `?password=` was not masked (the paused result of
//! `codemode mcp serve` and its resume answer quoted it in the `codemode
//! approve` command they print), and libpq's `key=value` form was taken for
//! a folder name whose error printed the password.
//!
//! The defence: one function, `codemode::journal::without_credentials`,
//! names a store everywhere (results, printed commands, errors, `Debug`),
//! masking the password in every form the store takes; the `key=value` form
//! is read as PostgreSQL. The tests with a real server skip loudly outside
//! CI (`bash .ci/run postgres` starts one), as tests/all/journal_postgres.rs.

use serde_json::{Value, json};

use crate::cli::codemode;
use crate::journal_postgres::database;
use crate::serve_stdio::Served;

/// A password as it is written, with no piece that reads as anything
/// else: `%XX` escapes of every byte in a URL, a `\` before every
/// character in the `key=value` form (both forms read it as `password`).
fn written(password: &str, url: bool) -> String {
    if url {
        password.bytes().map(|b| format!("%{b:02X}")).collect()
    } else {
        password.chars().flat_map(|c| ['\\', c]).collect()
    }
}

/// Fails when `text` holds `secret` or a `password=` that is not masked.
fn assert_masked(text: &str, secret: &str, what: &str) {
    assert!(!text.contains(secret), "{what} holds the password as written ({secret}): {text}");
    for (at, _) in text.match_indices("password=") {
        let after = &text[at + "password=".len()..];
        assert!(
            after.starts_with("***"),
            "{what} shows a password: ...{}",
            &text[at..(at + 40).min(text.len())]
        );
    }
}

/// The parts of the test database's URL: user, password, `host:port`,
/// database and the `options` that put connections in the test's schema.
struct Parts {
    user: String,
    password: String,
    host: String,
    port: u16,
    dbname: String,
    options: String,
}

fn parts(url: &str) -> Parts {
    let config: tokio_postgres::Config = url.parse().expect("the test URL parses");
    let host = match &config.get_hosts()[0] {
        tokio_postgres::config::Host::Tcp(h) => h.clone(),
        other => panic!("the test database is reached over TCP, not {other:?}"),
    };
    Parts {
        user: config.get_user().unwrap().to_owned(),
        password: String::from_utf8(config.get_password().expect("the test URL has a password").to_vec())
            .unwrap(),
        host,
        port: config.get_ports()[0],
        dbname: config.get_dbname().unwrap().to_owned(),
        options: config.get_options().unwrap_or_default().to_owned(),
    }
}

/// The served program: one bash call, which needs a person's approval.
const ASKS: &str =
    "return await tools.bash({command: 'echo ran >> count.txt'}).then(() => 'ran', e => e.message);";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_password_parameter_stays_out_of_served_results_and_printed_commands() {
    let Some(db) = database("secrets_serve").await else { return };
    let p = parts(&db.url);
    let secret = written(&p.password, true);
    let options: String = p.options.bytes().map(|b| format!("%{b:02X}")).collect();
    let url = format!(
        "postgres://{}@{}:{}/{}?password={secret}&options={options}",
        p.user, p.host, p.port, p.dbname
    );
    let ws = crate::common::workspace();
    let mut s = Served::start(ws.path(), &["--journal", &url]);
    s.initialize(json!({}));
    let id = s.request("tools/call", json!({"name": "execute_tools", "arguments": {"code": ASKS}}));
    let paused = s.response(id, |_, m| panic!("no question reaches a client without elicitation: {m}"));
    assert_eq!(paused["result"]["structuredContent"]["status"], "paused", "{paused}");
    let text = paused.to_string();
    assert!(text.contains("codemode approve") && text.contains("password=***"), "{text}");
    assert_masked(&text, &secret, "the paused result");
    let run_id = paused["result"]["structuredContent"]["run_id"].as_str().unwrap().to_owned();
    // The model's resume with nothing decided: the command again.
    let id = s.request("tools/call", json!({"name": "execute_tools", "arguments": {"resume": run_id}}));
    let resumed: Value = s.response(id, |_, _| {});
    let text = resumed.to_string();
    assert!(text.contains("codemode approve"), "{text}");
    assert_masked(&text, &secret, "the resume answer");
    s.close();

    // The CLI's hint for a person, and `codemode approve`'s, likewise.
    std::fs::write(ws.path().join("p.js"), ASKS).unwrap();
    let run = codemode(&["run", "p.js", "--approve", "pause", "--journal", &url], "", ws.path());
    assert_eq!(run.status.code(), Some(4), "{}", String::from_utf8_lossy(&run.stderr));
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(stderr.contains("--journal"), "{stderr}");
    assert_masked(&stderr, &secret, "codemode run's resume hint");
    let approve = codemode(&["approve", &run_id, "--allow", "1", "--journal", &url], "", ws.path());
    assert_eq!(approve.status.code(), Some(0), "{}", String::from_utf8_lossy(&approve.stderr));
    let out =
        format!("{}{}", String::from_utf8_lossy(&approve.stdout), String::from_utf8_lossy(&approve.stderr));
    assert_masked(&out, &secret, "codemode approve");
    db.drop_schema().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_key_value_form_is_a_postgresql_store_and_its_password_is_masked() {
    let Some(db) = database("secrets_kv").await else { return };
    let p = parts(&db.url);
    let secret = written(&p.password, false);
    let spec = format!(
        "host={} port={} user={} password={secret} dbname={} options='{}'",
        p.host, p.port, p.user, p.dbname, p.options
    );
    let ws = crate::common::workspace();
    std::fs::write(ws.path().join("p.js"), "await tools.write({path: 'kv.txt', content: 'kv'}); return 7;")
        .unwrap();
    let run = codemode(&["run", "p.js", "--approve", "pause", "--journal", &spec], "", ws.path());
    assert_eq!(run.status.code(), Some(4), "{}", String::from_utf8_lossy(&run.stderr));
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(stderr.contains("password=***"), "{stderr}");
    assert_masked(&stderr, &secret, "codemode run's resume hint");
    let hint = stderr.split("codemode resume ").nth(1).expect("a resume hint");
    let run_id = hint.split_whitespace().next().unwrap();
    // The journal is in the database, not in a folder named after the text.
    assert!(!ws.path().join(".codemode/runs").join(run_id).join("journal.jsonl").exists());
    let resumed = codemode(&["resume", run_id, "--allow", "1", "--journal", &spec, "--json"], "", ws.path());
    assert_eq!(resumed.status.code(), Some(0), "{}", String::from_utf8_lossy(&resumed.stderr));
    assert_eq!(std::fs::read_to_string(ws.path().join("kv.txt")).unwrap(), "kv");
    db.drop_schema().await;
}

#[test]
fn errors_about_a_store_never_show_its_password() {
    let ws = crate::common::workspace();
    let secret = "S3cr3t-never-shown";
    for spec in [
        // Once taken for a folder in the workspace, and named whole.
        format!("host=127.0.0.1 port=1 user=me password={secret} dbname=runs"),
        format!("host=127.0.0.1 password='{secret} x' bogus_option=1"),
        format!("host=127.0.0.1 password='{secret}"),
        format!("postgres://me@127.0.0.1:1/runs?password={secret}"),
        format!("postgres://me@127.0.0.1:1/runs?sslpassword={secret}&bogus=1"),
        format!("postgres://me@127.0.0.1:1/runs?password={secret}&more&user=me"),
        format!("postgres://me:{secret}@/runs"),
    ] {
        // `runs list` opens the store and reaches it (nothing listens on
        // port 1); `run` also prints the resume hint on its way.
        let listed = crate::cli::spawn(
            &["runs", "list", "--journal", &spec],
            ws.path(),
            &[("PGPASSWORD", std::path::Path::new("pg-env-S3cr3t"))],
        )
        .wait_with_output()
        .unwrap();
        assert_ne!(listed.status.code(), Some(0), "{spec}");
        let out =
            format!("{}{}", String::from_utf8_lossy(&listed.stdout), String::from_utf8_lossy(&listed.stderr));
        assert!(out.contains("PostgreSQL"), "{spec}: read as a PostgreSQL store: {out}");
        assert!(!out.contains("not beneath") && !out.contains("folder"), "{spec}: {out}");
        assert!(!out.contains("S3cr3t"), "{spec}: {out}");
    }
    assert!(
        !ws.path().join("host=127.0.0.1 port=1 user=me password=S3cr3t-never-shown dbname=runs").exists(),
        "no folder made of the text"
    );
}
