//! A fifth reviewer's break: the command's `/dev` is its own, but device
//! nodes reached through another mount opened as their owners allow: a
//! copy of the host's `/dev` mounted elsewhere (a chroot's, schroot's,
//! mock's `.../dev`, a second devtmpfs), or a node on an ordinary
//! filesystem (a debootstrap chroot's). As root, the reviewer read loop
//! devices and the consoles' text this way. Every mount of the sandbox's
//! tree is now `nodev`, and only the call's own devices, bound into its
//! `/dev`, have it cleared.
//!
//! These tests make mounts and device nodes: they need root, as the rest
//! of the attack suite's mount tests do.

use crate::sandbox::{default_engine, stdout};

/// The host's `/dev` bound elsewhere (in a mount namespace of the test's
/// own): no device opens through it, not even `zero`, while the call's own
/// `/dev/zero` still does.
#[test]
fn no_device_opens_through_a_dev_mounted_elsewhere() {
    let other = tempfile::tempdir().unwrap();
    let point = other.path().canonicalize().unwrap();
    let at = point.display();
    let command = format!(
        "head -c 4 {at}/zero 2>/dev/null | wc -c; head -c 4 {at}/urandom 2>/dev/null | wc -c; \
         head -c 4 /dev/zero | wc -c"
    );
    let said =
        super::launch_after_mounts(r#"mount --rbind /dev "$1""#, r#"umount -l "$1""#, &point, &command);
    assert_eq!(said, "0\n0\n4\n", "devices opened through the other /dev: {said}");
}

/// A device node on an ordinary filesystem (here `zero`, made in the
/// workspace by the test): it does not open, in the workspace or
/// anywhere else writable.
#[test]
fn a_device_node_on_an_ordinary_filesystem_does_not_open() {
    let ws = crate::common::workspace();
    let made = std::process::Command::new("mknod").arg(ws.path().join("zero")).args(["c", "1", "5"]).status();
    assert!(made.is_ok_and(|s| s.success()), "mknod (as root) makes a device node");
    let said =
        stdout(&default_engine(&ws), "head -c 4 zero 2>/dev/null | wc -c; head -c 4 zero 2>&1 >/dev/null");
    assert!(said.starts_with("0\n") && said.contains("Permission denied"), "the node opened: {said}");
}
