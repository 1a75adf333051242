//! A reviewer's break: the call's own IPC namespace hid the host's POSIX
//! message queues from `mq_open`, but an mqueue filesystem mounted from
//! the host's IPC namespace (systemd's `/dev/mqueue`) came along with the
//! mount tree: a queue opened through it could be read and drained by the
//! command. Each mqueue mount now shows the call's own queues instead, and
//! one queue bound onto a file (a third reviewer's case) shows `/dev/null`.

use std::process::Command;

#[test]
fn the_host_s_message_queues_are_not_in_the_sandbox() {
    let ws = tempfile::tempdir().unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let queues = tempfile::tempdir().unwrap();
    let point = queues.path().canonicalize().unwrap();
    // The queue also bound onto a file elsewhere (a mount of one queue).
    let elsewhere = tempfile::tempdir().unwrap();
    let bound = elsewhere.path().canonicalize().unwrap();
    std::fs::write(bound.join("qfile"), "").unwrap();
    let spec = super::launcher_spec(
        &format!("ls -A {}; cat {}/qfile", point.display(), bound.display()),
        ws.path(),
        tmp.path(),
        999_999_999,
    );
    // In a mount namespace of its own (the host's mounts are not changed):
    // the host IPC namespace's mqueue filesystem, a queue in it, and the
    // launcher started by this shell (its parent), which removes the queue
    // after.
    let script = r#"mount -t mqueue none "$1" && touch "$1/host_queue" && mount --bind "$1/host_queue" "$4/qfile" || exit 99
"$2" __sandbox-exec 2 "$(printf '%s' "$3" | sed "s/999999999/$$/")"
status=$?; umount "$4/qfile"; rm -f "$1/host_queue"; exit $status"#;
    let out = Command::new("unshare")
        .args(["--mount", "--propagation", "private", "sh", "-c", script, "sh"])
        .arg(&point)
        .arg(env!("CARGO_BIN_EXE_codemode"))
        .arg(spec.to_string())
        .arg(&bound)
        .output()
        .expect("unshare (util-linux) runs");
    let text = String::from_utf8_lossy(&out.stdout);
    assert_ne!(
        out.status.code(),
        Some(99),
        "the test could not mount an mqueue: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (header, listed) = text.split_once('\n').unwrap_or((&text, ""));
    assert!(header.contains("\"sandbox\""), "{header}");
    assert_eq!(listed.trim(), "", "the host's queue is neither listed nor read through the file: {text}");
}
