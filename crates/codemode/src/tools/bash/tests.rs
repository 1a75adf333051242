//! Tests of the `bash` tool (its processes, its sandbox header, its
//! group's end).

use super::*;

#[test]
fn timeout_defaults_and_bounds() {
    assert_eq!(timeout_of(None, None).unwrap(), Duration::from_secs(120));
    assert_eq!(timeout_of(Some(1.0), None).unwrap(), Duration::from_secs(1));
    assert_eq!(timeout_of(Some(0.25), None).unwrap(), Duration::from_millis(250));
    assert_eq!(timeout_of(Some(600.0), None).unwrap(), Duration::from_secs(600));
    assert_eq!(timeout_of(None, Some(1)).unwrap(), Duration::from_millis(1));
    assert_eq!(timeout_of(None, Some(MAX_TIMEOUT_MS)).unwrap(), Duration::from_secs(600));
    // A program still giving milliseconds in `timeout` is told the unit.
    let e = timeout_of(Some(30000.0), None).unwrap_err().message;
    assert!(e.contains("seconds") && e.contains("timeout_ms"), "{e}");
    assert!(timeout_of(Some(0.0), None).is_err());
    assert!(timeout_of(Some(f64::NAN), None).is_err());
    assert!(timeout_of(None, Some(0)).unwrap_err().message.contains("600000"));
    assert!(timeout_of(None, Some(MAX_TIMEOUT_MS + 1)).is_err());
    assert!(timeout_of(Some(1.0), Some(1000)).unwrap_err().message.contains("not both"));
}

#[test]
fn the_schema_bounds_the_timeout_and_refuses_unknown_fields() {
    let spec = Bash.spec();
    assert!(!spec.is_read_only());
    let schema = &spec.input_schema;
    assert_eq!(schema["properties"]["timeout"]["exclusiveMinimum"], json!(0));
    assert_eq!(schema["properties"]["timeout"]["maximum"], json!(600));
    assert_eq!(schema["properties"]["timeout_ms"]["maximum"], json!(600_000));
    assert_eq!(schema["additionalProperties"], json!(false));
    assert_eq!(schema["required"], json!(["command"]));
    assert!(spec.timeout_ms.unwrap() > MAX_TIMEOUT_MS);
}

#[test]
fn the_env_filter_keeps_only_the_allowlist() {
    let vars = [
        ("PATH", "/bin"),
        ("HOME", "/home/u"),
        ("LC_ALL", "C.UTF-8"),
        ("LANG", "C"),
        ("LC_SECRET", "x"),
        ("AWS_SECRET_ACCESS_KEY", "s"),
        ("GITHUB_TOKEN", "t"),
        ("BASH_ENV", "/tmp/evil"),
        ("LD_PRELOAD", "x.so"),
        ("PWD", "/elsewhere"),
        ("CODEMODE", "0"),
    ]
    .map(|(k, v)| (OsString::from(k), OsString::from(v)));
    let env = filter_env(vars.into_iter(), Path::new("/ws"));
    let got: Vec<(&str, &str)> =
        env.iter().map(|(k, v)| (k.to_str().unwrap(), v.to_str().unwrap())).collect();
    assert_eq!(
        got,
        [
            ("PATH", "/bin"),
            ("HOME", "/home/u"),
            ("LC_ALL", "C.UTF-8"),
            ("LANG", "C"),
            ("PWD", "/ws"),
            ("CODEMODE", "1")
        ]
    );
    let bare = filter_env(std::iter::empty(), Path::new("/ws"));
    assert_eq!(bare[0], (OsString::from("PATH"), OsString::from(DEFAULT_PATH)));
}

#[test]
fn the_tail_keeps_the_last_bytes_and_counts_them_all() {
    let mut t = Tail::new(10);
    t.push(b"hello ");
    assert_eq!(t.text(10), ("hello ".to_owned(), false));
    for _ in 0..1000 {
        t.push(b"0123456789abc");
        assert!(t.buf.len() <= 2 * 10 + 13);
    }
    assert_eq!(t.total, 6 + 13_000);
    assert_eq!(t.text(10), ("3456789abc".to_owned(), true));
    t.push(&[b'z'; 100]);
    assert_eq!(t.text(10), ("z".repeat(10), true));
    assert_eq!(t.text(4), ("zzzz".to_owned(), true));
}

#[test]
fn a_cut_tail_starts_at_a_line_start() {
    let mut t = Tail::new(10);
    for line in ["one\n", "two\n", "three\n", "four\n"] {
        t.push(line.as_bytes());
    }
    // The last 10 bytes are "hree\nfour\n": the line cut in two goes.
    assert_eq!(t.lines(10), ("four\n".to_owned(), true, true));
    // Cut right after a newline: nothing more is left out.
    assert_eq!(t.lines(11), ("three\nfour\n".to_owned(), true, true));
    // One line longer than the tail: its end, mid-line.
    let mut long = Tail::new(4);
    long.push(b"abcdefgh\n");
    assert_eq!(long.lines(4), ("fgh\n".to_owned(), true, false));
    let cut = output_cut([("stdout", 21, 5, true, true), ("stderr", 0, 0, false, true)]).unwrap();
    assert_eq!((cut.original_bytes, cut.kept_bytes), (Some(21), 5));
    assert!(cut.tool_cut.unwrap().starts_with("stdout: its last 5 of 21 bytes, whole lines;"));
    assert!(output_cut([("stdout", 3, 3, false, true), ("stderr", 0, 0, false, true)]).is_none());
}

#[cfg(unix)]
#[tokio::test]
async fn the_launchers_header_line_is_split_off_the_output() {
    use super::pipes::pump;
    use tokio::io::AsyncReadExt as _;
    // The header arrives in two reads, the output after it in the second.
    let reader = (&b"{\"sandbox\": {\"profile\""[..]).chain(&b": \"read-only\"}}\nout\nput"[..]);
    let (mut header, mut tail) = (Vec::new(), Tail::new(100));
    pump(Some(reader), Some(&mut header), &mut tail).await;
    assert_eq!(header, br#"{"sandbox": {"profile": "read-only"}}"#);
    assert_eq!(tail.text(100), ("out\nput".to_owned(), false));
    let Some(Header::Sandbox(applied)) = parse_header(&header) else { panic!("a sandbox header") };
    assert_eq!(applied.profile, "read-only");
    assert_eq!(parse_header(br#"{"error": "no"}"#), Some(Header::Error("no".into())));
    assert_eq!(parse_header(b"garbage"), None);
}

#[test]
fn the_tail_is_cut_at_a_character_boundary() {
    let mut t = Tail::new(4);
    t.push("aé€".as_bytes()); // 1 + 2 + 3 bytes: the last 4 start inside `é`
    assert_eq!(t.text(4), ("€".to_owned(), true));
    let mut t = Tail::new(4);
    t.push(&[b'a', 0xff, 0xfe, 0xfd, 0xfc]);
    let (text, cut) = t.text(4);
    assert!(text.len() <= 4 && cut, "{text:?}");
}

/// The default confinement of `ws` with the sandbox `off`: these tests
/// are about the process group, the sandbox has integration tests.
#[cfg(target_os = "linux")]
fn unconfined(ws: &Path) -> Confinement {
    let mut confinement = Confinement::for_workspace(ws);
    confinement.sandbox.profile = SandboxProfile::Off;
    confinement
}

#[cfg(target_os = "linux")]
fn gone(pid: i32) -> bool {
    // Gone from the process table: reaped, not merely a zombie.
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while std::time::Instant::now() < deadline {
        if !Path::new(&format!("/proc/{pid}")).exists() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

#[cfg(target_os = "linux")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn orphans_are_killed_and_reaped_not_left_as_zombies() {
    // What a host (or PID 1) gets: orphans of the command become this
    // process's children, and the call reaps them before it returns.
    nix::sys::prctl::set_child_subreaper(true).unwrap();
    let ws = tempfile::tempdir().unwrap();
    let out = run("sleep 1000 & echo $!", &unconfined(ws.path()), "r", Duration::from_secs(10), None)
        .await
        .unwrap();
    assert_eq!(out.content["exit_code"], json!(0));
    let pid: i32 = out.content["stdout"].as_str().unwrap().trim().parse().unwrap();
    assert!(!Path::new(&format!("/proc/{pid}")).exists(), "background child {pid} was not reaped");
}

#[cfg(target_os = "linux")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_the_call_kills_and_reaps_the_group() {
    nix::sys::prctl::set_child_subreaper(true).unwrap();
    let ws = tempfile::tempdir().unwrap();
    let confinement = unconfined(ws.path());
    let call = run(
        "echo $$ > shell.pid; sleep 1000 & echo $! > bg.pid; wait",
        &confinement,
        "r",
        Duration::from_secs(60),
        None,
    );
    let read_pid =
        |name: &str| std::fs::read_to_string(ws.path().join(name)).ok()?.trim().parse::<i32>().ok();
    tokio::select! {
        _ = call => panic!("the command should still be running"),
        () = async {
            while read_pid("bg.pid").is_none() {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        } => {}
    }
    // `call` is dropped here: cancelled.
    for name in ["shell.pid", "bg.pid"] {
        let pid = read_pid(name).unwrap();
        let waited = tokio::task::spawn_blocking(move || gone(pid)).await.unwrap();
        assert!(waited, "{name}: {pid} still in the process table");
    }
}
