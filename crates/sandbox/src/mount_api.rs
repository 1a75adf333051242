//! Linux's file-descriptor mount API (`open_tree`, `mount_setattr`,
//! `move_mount`; Linux 5.2 and 5.12), which neither nix nor rustix wraps:
//! a mount made and given its flags through descriptors, never looked up
//! by name, so a path a concurrent command swaps for a link cannot
//! redirect it. Linux only.

use std::ffi::CStr;
use std::os::fd::{AsRawFd as _, FromRawFd as _, OwnedFd};

use nix::errno::Errno;

/// `struct mount_attr` of linux/mount.h.
#[repr(C)]
struct MountAttr {
    attr_set: u64,
    attr_clr: u64,
    propagation: u64,
    userns_fd: u64,
}

/// `MOUNT_ATTR_RDONLY` of linux/mount.h.
pub(crate) const MOUNT_ATTR_RDONLY: u64 = 0x1;
/// `MOUNT_ATTR_NOSUID` of linux/mount.h.
const MOUNT_ATTR_NOSUID: u64 = 0x2;
/// `MOUNT_ATTR_NODEV` of linux/mount.h: device nodes cannot be opened
/// through the mount.
pub(crate) const MOUNT_ATTR_NODEV: u64 = 0x4;
/// `AT_RECURSIVE` of linux/fcntl.h.
const AT_RECURSIVE: libc::c_uint = 0x8000;
/// `OPEN_TREE_CLONE` of linux/mount.h.
const OPEN_TREE_CLONE: libc::c_uint = 0x1;
/// `MOVE_MOUNT_F_EMPTY_PATH` of linux/mount.h.
const MOVE_MOUNT_F_EMPTY_PATH: libc::c_uint = 0x4;
/// `MOVE_MOUNT_F_EMPTY_PATH` and `MOVE_MOUNT_T_EMPTY_PATH` of
/// linux/mount.h.
const MOVE_MOUNT_EMPTY_PATHS: libc::c_uint = MOVE_MOUNT_F_EMPTY_PATH | 0x40;

/// `mount_setattr(dirfd, path, flags, ...)`: the mount at `path` (relative
/// to `dirfd`; `""` with `AT_EMPTY_PATH` in `flags` for `dirfd` itself)
/// read-only (`read_only`) or writable, with every mount beneath it when
/// `recursive`. Only the read-only flag changes.
pub(crate) fn set_read_only(
    dirfd: libc::c_int,
    path: &CStr,
    flags: libc::c_uint,
    read_only: bool,
    recursive: bool,
) -> nix::Result<()> {
    let (set, clear) = if read_only { (MOUNT_ATTR_RDONLY, 0) } else { (0, MOUNT_ATTR_RDONLY) };
    set_attributes(dirfd, path, flags, set, clear, recursive)
}

/// `mount_setattr(dirfd, path, flags, ...)`: sets the `MOUNT_ATTR_*` bits
/// of `set` and clears those of `clear` on the mount at `path` (as
/// [`set_read_only`] reads it), with every mount beneath it when
/// `recursive`; the other attributes and the propagation stay.
pub(crate) fn set_attributes(
    dirfd: libc::c_int,
    path: &CStr,
    flags: libc::c_uint,
    set: u64,
    clear: u64,
    recursive: bool,
) -> nix::Result<()> {
    let attr = MountAttr { attr_set: set, attr_clr: clear, propagation: 0, userns_fd: 0 };
    let flags = flags | if recursive { AT_RECURSIVE } else { 0 };
    #[allow(unsafe_code)]
    // SAFETY: mount_setattr reads a NUL-terminated path and `size` bytes of
    // `attr`, both valid for the call (and `dirfd`, a descriptor the caller
    // holds open, or AT_FDCWD).
    let done = unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            dirfd,
            path.as_ptr(),
            flags,
            &raw const attr,
            std::mem::size_of::<MountAttr>(),
        )
    };
    if done == 0 { Ok(()) } else { Err(Errno::last()) }
}

/// Binds the object `object` (an `O_PATH` descriptor) onto the folder
/// `target` (looked up by name: a path only the launcher can change, in a
/// tmpfs it just mounted), read-only or writable and `nosuid`, this mount only: a
/// detached copy (`open_tree`), its flag set while detached
/// (`mount_setattr`), attached at `target` (`move_mount`).
pub(crate) fn bind_object_onto(
    object: &OwnedFd,
    target: &std::path::Path,
    read_only: bool,
) -> nix::Result<()> {
    let tree = detached_copy(object, false)?;
    let (set, clear) = if read_only { (MOUNT_ATTR_RDONLY, 0) } else { (0, MOUNT_ATTR_RDONLY) };
    let empty_path = libc::AT_EMPTY_PATH as libc::c_uint;
    set_attributes(tree.as_raw_fd(), c"", empty_path, set | MOUNT_ATTR_NOSUID, clear, false)?;
    let target = std::ffi::CString::new(target.as_os_str().as_encoded_bytes()).map_err(|_| Errno::EINVAL)?;
    attach(&tree, libc::AT_FDCWD, &target, MOVE_MOUNT_F_EMPTY_PATH)
}

/// `move_mount` of the detached `tree` to `to_path` relative to `to_dirfd`
/// (`""` with `MOVE_MOUNT_T_EMPTY_PATH` in `flags` for `to_dirfd` itself).
fn attach(tree: &OwnedFd, to_dirfd: libc::c_int, to_path: &CStr, flags: libc::c_uint) -> nix::Result<()> {
    #[allow(unsafe_code)]
    // SAFETY: move_mount reads two NUL-terminated paths (one empty) and
    // takes descriptors the caller holds open (or AT_FDCWD).
    let done = unsafe {
        libc::syscall(libc::SYS_move_mount, tree.as_raw_fd(), c"".as_ptr(), to_dirfd, to_path.as_ptr(), flags)
    };
    if done == 0 { Ok(()) } else { Err(Errno::last()) }
}

/// A detached copy of the mount tree at `object` (`open_tree`,
/// `OPEN_TREE_CLONE`, with every mount beneath when `recursive`).
fn detached_copy(object: &OwnedFd, recursive: bool) -> nix::Result<OwnedFd> {
    let empty_path = libc::AT_EMPTY_PATH as libc::c_uint;
    let open_flags = OPEN_TREE_CLONE
        | libc::O_CLOEXEC as libc::c_uint
        | empty_path
        | if recursive { AT_RECURSIVE } else { 0 };
    #[allow(unsafe_code)]
    // SAFETY: open_tree reads a NUL-terminated path (empty) and takes the
    // caller's open descriptor; it returns a new descriptor or -1.
    let tree = unsafe { libc::syscall(libc::SYS_open_tree, object.as_raw_fd(), c"".as_ptr(), open_flags) };
    if tree < 0 {
        return Err(Errno::last());
    }
    #[allow(unsafe_code)]
    // SAFETY: `tree` is a descriptor open_tree just returned, owned here
    // only.
    Ok(unsafe { OwnedFd::from_raw_fd(tree as libc::c_int) })
}

/// Binds the object `object` (an `O_PATH` descriptor) onto itself,
/// read-only or writable (every mount of the copy with `all_the_way`, else
/// its top one): a detached copy of the mount tree there (`open_tree`,
/// `OPEN_TREE_CLONE | AT_RECURSIVE`), its flags set while it is detached
/// (`mount_setattr`), then attached onto the object (`move_mount`). The
/// object is never looked up again by name.
pub(crate) fn bind_object(object: &OwnedFd, read_only: bool, all_the_way: bool) -> nix::Result<()> {
    let empty_path = libc::AT_EMPTY_PATH as libc::c_uint;
    let tree = detached_copy(object, true)?;
    set_read_only(tree.as_raw_fd(), c"", empty_path, read_only, all_the_way)?;
    attach(&tree, object.as_raw_fd(), c"", MOVE_MOUNT_EMPTY_PATHS)
}
