//! A reviewer's break: the call's own IPC namespace hid the host's POSIX
//! message queues from `mq_open`, but an mqueue filesystem mounted from
//! the host's IPC namespace (systemd's `/dev/mqueue`) came along with the
//! mount tree: a queue opened through it could be read and drained by the
//! command. Each mqueue mount now shows the call's own queues instead, and
//! one queue bound onto a file (a third reviewer's case) shows `/dev/null`.

#[test]
fn the_host_s_message_queues_are_not_in_the_sandbox() {
    let queues = tempfile::tempdir().unwrap();
    let point = queues.path().canonicalize().unwrap();
    // The queue also bound onto a file elsewhere (a mount of one queue).
    let elsewhere = tempfile::tempdir().unwrap();
    let bound = elsewhere.path().canonicalize().unwrap();
    std::fs::write(bound.join("qfile"), "").unwrap();
    let qfile = bound.join("qfile").display().to_string();
    // The host IPC namespace's mqueue filesystem and a queue in it,
    // removed after.
    let setup = format!(
        r#"mount -t mqueue none "$1" && touch "$1/host_queue" && mount --bind "$1/host_queue" "{qfile}""#
    );
    let after = format!(r#"umount "{qfile}"; rm -f "$1/host_queue""#);
    let said = super::launch_after_mounts(
        &setup,
        &after,
        &point,
        &format!("ls -A {}; cat {qfile}", point.display()),
    );
    assert_eq!(said.trim(), "", "the host's queue is neither listed nor read through the file: {said}");
}
