//! A reviewer's break of the sweep of call folders left behind (a killed
//! engine's private `TMPDIR`s, beneath the hidden run state): the sweep
//! took a folder last modified over a day ago for a dead call's, and a
//! running command dated its own folder back (`touch -d`) so that another
//! engine's sweep emptied it while the command moved a folder of it up the
//! tree; the walk's `..` then climbed out of the call's folder and emptied
//! folders the command named beside it (beside the state folder's runs, and
//! up to its home on a default layout). Now each call's folder is locked
//! (`flock`) from the moment it is made until it is removed and a sweep
//! leaves a locked folder alone; the age is the `ctime`, which no process
//! sets back; and the walk stops when a `..` does not land where it came
//! from (`tools/bash/private_tmp.rs` tests, for each of the three).

use std::time::{Duration, Instant};

/// Engine 1's command dates its folder two days back and waits; engine 2,
/// in the same workspace and state folder, makes its first sandboxed calls
/// (which start its sweep) and ends; engine 1's command then finds its
/// folder and file whole.
#[test]
fn a_running_call_s_folder_dated_back_is_not_swept_by_another_engine() {
    let ws = crate::common::workspace();
    let config = tempfile::tempdir().unwrap();
    let first = "return (await tools.bash({command: \
                 'echo kept > \"$TMPDIR/f\"; touch -d \"2 days ago\" \"$TMPDIR\"; touch ready; \
                  while [ ! -e go ]; do sleep 0.05; done; cat \"$TMPDIR/f\"', timeout: 60})).content.stdout;";
    let mut one = crate::cli::spawn(
        &["run", "-", "--json", "--posture", "full-access"],
        ws.path(),
        &[("XDG_CONFIG_HOME", config.path())],
    );
    std::io::Write::write_all(&mut one.stdin.take().unwrap(), first.as_bytes()).unwrap();
    let until = Instant::now() + Duration::from_secs(60);
    while !ws.path().join("ready").exists() {
        assert!(Instant::now() < until, "the first engine's call never ran");
        std::thread::sleep(Duration::from_millis(20));
    }
    // The second engine's sweep runs on a thread of its own: its second
    // call gives it the time.
    let second = "await tools.bash({command: 'true'}); await tools.bash({command: 'sleep 1'}); return 'two';";
    let (value, stderr) =
        super::run(&["run", "-", "--json", "--posture", "full-access"], second, ws.path(), config.path());
    assert_eq!(value, "two", "{stderr}");
    std::fs::write(ws.path().join("go"), "").unwrap();
    let out = one.wait_with_output().unwrap();
    let receipt: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|_| panic!("{}", String::from_utf8_lossy(&out.stderr)));
    assert_eq!(receipt["value"], "kept\n", "{receipt}");
}
