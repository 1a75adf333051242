//! The sandbox's mounts (init, process 2 of `launcher.rs`): the mount
//! tree made private and read-only, the workspace, the private `TMPDIR`
//! and the writable folders bound writable again, the folders above
//! protected paths pinned, the call's own mqueue and procfs instances
//! wherever the host has one, every mount `nodev` but the call's own
//! devices, a fresh `/proc`, a `/dev` of the call's own
//! with a private devpts, the protected paths bound read-only, the hidden
//! folders covered. Linux only.

use std::os::fd::AsRawFd as _;
use std::path::{Path, PathBuf};

use nix::errno::Errno;
use nix::mount::{MsFlags, mount};

use crate::SandboxProfile;
use crate::launcher::LaunchSpec;

/// Makes the mount tree private, mounts `/proc`, the read-only binds and the
/// hidden tmpfs; records what failed. Returns whether the command has a
/// private devpts instance (pseudo-terminals of its own).
pub(crate) fn mounts(spec: &LaunchSpec, profile: SandboxProfile, missing: &mut Vec<String>) -> bool {
    let none: Option<&str> = None;
    if let Err(e) = mount(none, "/", none, MsFlags::MS_REC | MsFlags::MS_PRIVATE, none) {
        // Without a private tree a mount could reach the host: mount nothing.
        missing
            .push(format!("private mounts ({e}): protected paths and hidden folders are not mounted over"));
        return false;
    }
    // Everything read-only and without devices, then the workspace
    // (unless read-only) and the private TMPDIR writable again: Landlock
    // does not cover permissions, timestamps or extended attributes, so
    // without this a command could chmod any file its uid owns outside
    // the workspace; and a device node opened through another mount than
    // the call's own /dev (a chroot's /dev) reached the host's devices.
    match read_only_and_nodev_everywhere() {
        Ok(()) => {
            let writable = (profile == SandboxProfile::WorkspaceWrite).then_some(spec.workspace.as_path());
            let named = spec.writable.iter().map(PathBuf::as_path);
            for path in writable.into_iter().chain(named) {
                if let Err(e) = bind_writable(path) {
                    missing.push(format!("writable mount of {} ({e}): writes there fail", path.display()));
                }
            }
            // Made by the engine for this call: a folder, never a link.
            // Beneath a hidden folder (the run state, where the engine
            // makes it), it is bound back into the cover instead (`hide`).
            if !spec.hidden.iter().any(|h| spec.tmpdir.starts_with(h))
                && let Err(e) = bind_writable_folder(&spec.tmpdir)
            {
                missing.push(format!("writable mount of {} ({e}): writes there fail", spec.tmpdir.display()));
            }
        }
        Err(e) => missing.push(format!(
            "read-only, device-free host mounts ({e}): permissions and timestamps of files outside the \
             workspace can be changed, and device nodes outside /dev opened as their owners allow"
        )),
    }
    // Folders between the workspace and a protected path become mount
    // points, which cannot be renamed: `mv tools tools.old` would otherwise
    // carry a protected `tools/hooks` away and leave a fresh copy in place.
    for folder in pinned_folders(spec) {
        // A pin keeps what it is: read-only in a read-only workspace
        // (unless a writable folder holds it), else writable.
        let read_only =
            profile != SandboxProfile::WorkspaceWrite && !spec.writable.iter().any(|w| folder.starts_with(w));
        if let Err(e) = bind_onto_itself(&folder, Bind::Folder { read_only }) {
            missing.push(format!("pinning {} ({e}): it can be renamed", folder.display()));
        }
    }
    let proc_flags = MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC;
    // The host's mounts that show more than their place: read once.
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    // Another procfs than /proc (a chroot's, a container's) shows every
    // host process's command line: the call's own instead (its PID
    // namespace), or an empty read-only tmpfs. /proc itself is below.
    for point in mounts_of(&mountinfo, "proc").into_iter().filter(|p| p != Path::new("/proc")) {
        let own = mount(Some("proc"), &point, Some("proc"), proc_flags, none).or_else(|_| {
            let flags = proc_flags | MsFlags::MS_RDONLY;
            mount(Some("tmpfs"), &point, Some("tmpfs"), flags, Some("size=4k,mode=0755"))
        });
        if let Err(e) = own {
            missing.push(format!("hiding the host's processes at {} ({e})", point.display()));
        }
    }
    // The host's POSIX message queues: an mqueue filesystem mounted from
    // the host's IPC namespace (systemd's /dev/mqueue) came along with the
    // mount tree, and a queue opened through it can be read and drained
    // whatever the call's own IPC namespace. Each gets the call's own
    // instead (its own queues only), or an empty read-only tmpfs.
    for point in mounts_of(&mountinfo, "mqueue") {
        let covered = if point.is_dir() {
            mount(Some("mqueue"), &point, Some("mqueue"), proc_flags, none).or_else(|_| {
                let flags = proc_flags | MsFlags::MS_RDONLY;
                mount(Some("tmpfs"), &point, Some("tmpfs"), flags, Some("size=4k,mode=0755"))
            })
        } else {
            // One queue bound onto a file: /dev/null in its place.
            mount(Some("/dev/null"), &point, none, MsFlags::MS_BIND, none)
        };
        if let Err(e) = covered {
            missing.push(format!("hiding the host's message queues at {} ({e})", point.display()));
        }
    }
    if let Err(e) = mount(Some("proc"), "/proc", Some("proc"), proc_flags, none) {
        missing.push(format!("a fresh /proc ({e}): the host's processes stay visible in /proc"));
    }
    // The host's devices: as root (codemode run as root), a command could
    // read raw disks (past the covers of the hidden folders), the virtual
    // consoles' text and input events by owner permission. A /dev of the
    // call's own holds the harmless devices only (then the private devpts
    // below); where it cannot be made, /dev/shm alone is covered.
    if let Err(e) = own_dev() {
        missing
            .push(format!("a /dev of its own ({e}): the host's devices stay readable as their owners allow"));
        // The host's /dev as it was (`nodev` was set on every mount):
        // `/dev/null` and the rest must open.
        let dev_again = crate::mount_api::set_attributes(
            libc::AT_FDCWD,
            c"/dev",
            0,
            0,
            crate::mount_api::MOUNT_ATTR_NODEV,
            false,
        );
        if let Err(e) = dev_again {
            missing
                .push(format!("the host's /dev without `nodev` ({e}): /dev/null and the rest do not open"));
        }
        // The host's POSIX shared memory (`shm_open`: browsers' and other
        // programs' objects of the same user) at least: an empty
        // read-only tmpfs.
        let flags = proc_flags | MsFlags::MS_RDONLY;
        if Path::new("/dev/shm").is_dir()
            && let Err(e) = mount(Some("tmpfs"), "/dev/shm", Some("tmpfs"), flags, Some("size=4k,mode=0755"))
        {
            missing.push(format!("hiding /dev/shm ({e}): the user's shared memory objects stay readable"));
        }
    }
    // The host's terminals: the same uid could read a person's keystrokes
    // from /dev/pts/N. A private devpts instance hides them and still gives
    // the command pseudo-terminals of its own (`script`, `pty.fork`); where
    // one cannot be mounted, an empty read-only tmpfs hides them.
    let mut private_ptys = false;
    if Path::new("/dev/pts").is_dir() {
        let pty_flags = MsFlags::MS_NOSUID | MsFlags::MS_NOEXEC;
        let private = mount(
            Some("devpts"),
            "/dev/pts",
            Some("devpts"),
            pty_flags,
            Some("newinstance,ptmxmode=0666,mode=0620"),
        )
        .and_then(|()| mount(Some("/dev/pts/ptmx"), "/dev/ptmx", none, MsFlags::MS_BIND, none));
        private_ptys = private.is_ok();
        if private.is_err() {
            let flags = proc_flags | MsFlags::MS_RDONLY;
            if let Err(e) = mount(Some("tmpfs"), "/dev/pts", Some("tmpfs"), flags, Some("size=4k,mode=0755"))
            {
                missing.push(format!(
                    "hiding /dev/pts ({e}): the host's terminals stay readable by the same user"
                ));
            }
        }
    }
    let covered = |p: &Path| spec.hidden.iter().any(|h| p.starts_with(h));
    // A protected folder is read-only all the way down, pins beneath it
    // included, unless a folder bound writable lies beneath it.
    let writable_beneath = |p: &Path| {
        let workspace = (profile == SandboxProfile::WorkspaceWrite).then_some(&spec.workspace);
        workspace.into_iter().chain(&spec.writable).chain([&spec.tmpdir]).any(|w| w.starts_with(p) && w != p)
    };
    for path in spec.protected.iter().filter(|p| !covered(p) && p.exists()) {
        if let Err(e) = bind_read_only(path, !writable_beneath(path)) {
            missing.push(format!("read-only mount of {} ({e})", path.display()));
        }
    }
    // Hidden by the folders' real paths (a mount follows links anyway):
    // one folder named twice (through a link and by its target) is covered
    // once, and the run's spill folder, by its real path too, is found
    // beneath it and bound back (else the second cover hid the binding).
    // Only the very same folder, once covered, is skipped: a cover that
    // failed, or one of a folder that holds another (a `.codemode` that
    // links to `/`), never stands in for the others.
    let spill = spec.spill.as_deref().map(|s| std::fs::canonicalize(s).unwrap_or_else(|_| s.to_path_buf()));
    let mut covered_already: Vec<PathBuf> = Vec::new();
    for hidden in spec.hidden.iter().filter(|h| h.is_dir()) {
        let real = std::fs::canonicalize(hidden).unwrap_or_else(|_| hidden.clone());
        if covered_already.contains(&real) {
            continue;
        }
        match hide(&real, spill.as_deref(), &spec.tmpdir, missing) {
            Ok(()) => covered_already.push(real),
            Err(e) => missing.push(format!("hiding {} ({e})", hidden.display())),
        }
    }
    private_ptys
}

/// Makes every mount of this (private) mount namespace read-only and
/// `nodev`, with `mount_setattr(2)` (`AT_RECURSIVE`, `MOUNT_ATTR_RDONLY |
/// MOUNT_ATTR_NODEV`; Linux 5.12). Every bind made from them afterwards
/// (the workspace, the writable and protected paths, the pins) copies
/// `nodev`: no device node opens through any of them, wherever it lies (a
/// chroot's `/dev`, a second devtmpfs, a node on an ordinary filesystem).
/// The call's own devices are bound into its `/dev` with `nodev` cleared
/// ([`own_dev`]).
fn read_only_and_nodev_everywhere() -> nix::Result<()> {
    use crate::mount_api::{MOUNT_ATTR_NODEV, MOUNT_ATTR_RDONLY};
    crate::mount_api::set_attributes(libc::AT_FDCWD, c"/", 0, MOUNT_ATTR_RDONLY | MOUNT_ATTR_NODEV, 0, true)
}

/// Bind-mounts `path` onto itself writable (after
/// [`read_only_and_nodev_everywhere`]).
fn bind_writable(path: &Path) -> nix::Result<()> {
    bind_onto_itself(path, Bind::Writable)
}

/// A pinned folder or the private `TMPDIR`, bound writable onto itself
/// only when it is a folder, not a link: a pin that is a link would bind
/// its target (`ln -s .git/hooks m/n`, or `/`) writable, and a swapped
/// `TMPDIR` any folder the user may write.
fn bind_writable_folder(path: &Path) -> nix::Result<()> {
    bind_onto_itself(path, Bind::Folder { read_only: false })
}

/// How [`bind_onto_itself`] binds.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Bind {
    /// Writable, following links (the workspace, `writable` folders).
    Writable,
    /// Only a folder with no link on its way; writable unless `read_only`
    /// (a pin in a read-only workspace).
    Folder {
        /// Whether the bind is read-only.
        read_only: bool,
    },
    /// Read-only, this mount only (a writable folder lies beneath).
    ReadOnly,
    /// Read-only with every mount beneath it (pins beneath a protected
    /// folder, copied into its bind, are read-only too).
    ReadOnlyAllTheWay,
}

/// Binds what `path` leads to onto itself, read-only or writable, and
/// checks that `path` then shows that same object mounted so.
///
/// The object is looked up once (an `O_PATH` descriptor) and mounted from
/// and onto that descriptor (`/proc/self/fd/N`): looked up twice by name,
/// a command swapping the folder with a link (`renameat2` with
/// `RENAME_EXCHANGE`, in a concurrent call) could have one lookup find the
/// folder and the other the link's target, mounting, say, the state folder
/// at `<workspace>/.git`. The remount that sets the flags needs the new
/// mount, reached by name: `path` is looked up again afterwards and must be
/// the same object (device and inode) with the flags asked for, else the
/// mount is reported as failed.
fn bind_onto_itself(path: &Path, how: Bind) -> nix::Result<()> {
    use nix::fcntl::{OFlag, open};
    use nix::sys::stat::{Mode, fstat};
    let read_only =
        matches!(how, Bind::ReadOnly | Bind::ReadOnlyAllTheWay | Bind::Folder { read_only: true });
    let object = match how {
        // The workspace and `writable` folders, canonical by the engine's
        // settling; pins beneath them; the private TMPDIR, made canonical
        // by the engine: a link anywhere on the way now was swapped in
        // since (or planted, as `ln -s /elsewhere m` above a pin `m/n`),
        // and would lead elsewhere.
        Bind::Writable | Bind::Folder { .. } => open_folder_without_links(path)?,
        Bind::ReadOnly | Bind::ReadOnlyAllTheWay => {
            open(path, OFlag::O_PATH | OFlag::O_CLOEXEC, Mode::empty())?
        }
    };
    crate::mount_api::bind_object(&object, read_only, how == Bind::ReadOnlyAllTheWay)?;
    // The mount is on the object whatever `path` shows now; a path that
    // shows another object was swapped during the mounts: reported, as
    // the object it named is not the one now there.
    let shown = open(path, OFlag::O_PATH | OFlag::O_CLOEXEC, Mode::empty())?;
    let (was, is) = (fstat(&object)?, fstat(&shown)?);
    if (was.st_dev, was.st_ino) != (is.st_dev, is.st_ino) {
        return Err(Errno::ESTALE);
    }
    let shown_read_only =
        nix::sys::statvfs::fstatvfs(&shown)?.flags().contains(nix::sys::statvfs::FsFlags::ST_RDONLY);
    if read_only && !shown_read_only {
        return Err(Errno::ESTALE);
    }
    Ok(())
}

/// The folder at `path` (an `O_PATH` descriptor), with no symbolic link on
/// its way (`openat2`, `RESOLVE_NO_SYMLINKS`): `ELOOP` where there is one,
/// `ENOTDIR` where it is not a folder. Also the engine's, for the root of
/// the commands' private `TMPDIR` folders.
///
/// # Errors
/// The `openat2` error (`ELOOP`, `ENOTDIR`, `ENOENT`, `EACCES`, `ENOSYS` on
/// kernels before 5.6).
pub fn open_folder_without_links(path: &Path) -> nix::Result<std::os::fd::OwnedFd> {
    use nix::fcntl::{OFlag, OpenHow, ResolveFlag, openat2};
    let flags = OFlag::O_PATH | OFlag::O_CLOEXEC | OFlag::O_DIRECTORY;
    let how = OpenHow::new().flags(flags).resolve(ResolveFlag::RESOLVE_NO_SYMLINKS);
    openat2(nix::fcntl::AT_FDCWD, path, how)
}

/// The folders strictly between a folder the command may write (the
/// workspace, a `writable` folder) and each path the launcher mounts
/// beneath it (a protected path, a hidden folder, the workspace, another
/// writable folder, the private `TMPDIR`) that exist, outermost first.
/// Pinned as mount points, they cannot be renamed: otherwise a command
/// could move one aside and put a link in its place, and the next call's
/// mounts, which follow links, would bind the link's target (a writable
/// `/tmp` holding `/tmp/a/ws`: `mv a a.old; mkdir a; ln -s ~ a/ws`).
fn pinned_folders(spec: &LaunchSpec) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = Vec::new();
    let bases: Vec<&Path> =
        std::iter::once(spec.workspace.as_path()).chain(spec.writable.iter().map(PathBuf::as_path)).collect();
    let mounted = spec
        .protected
        .iter()
        .chain(&spec.hidden)
        .chain(&spec.writable)
        .chain([&spec.workspace, &spec.tmpdir]);
    for path in mounted {
        for base in bases.iter().filter(|b| path.starts_with(b) && path != *b) {
            let Ok(rel) = path.strip_prefix(base) else { continue };
            // Pinned folders lie beneath their base: a path that climbs
            // out with `..` (`<ws>/../state`) would pin, writable, a folder
            // above the workspace, where Landlock still denies writes but
            // the mount's permissions and timestamps are the command's.
            if rel.components().any(|c| !matches!(c, std::path::Component::Normal(_))) {
                continue;
            }
            let mut folder = base.to_path_buf();
            let parts: Vec<_> = rel.components().collect();
            for part in parts.iter().take(parts.len().saturating_sub(1)) {
                folder.push(part);
                if folder.is_dir() && !out.contains(&folder) {
                    out.push(folder.clone());
                }
            }
        }
    }
    out.sort_by_key(|f| f.components().count());
    out
}

/// Bind-mounts `path` onto itself read-only, keeping the flags the kernel
/// locks on mounts inherited from another user namespace.
fn bind_read_only(path: &Path, all_the_way: bool) -> nix::Result<()> {
    bind_onto_itself(path, if all_the_way { Bind::ReadOnlyAllTheWay } else { Bind::ReadOnly })
}

/// The flags of the mount holding `path` that a remount must keep.
fn locked_flags(path: &Path) -> MsFlags {
    use nix::sys::statvfs::FsFlags;
    let Ok(stat) = nix::sys::statvfs::statvfs(path) else { return MsFlags::empty() };
    let have = stat.flags();
    [
        (FsFlags::ST_NOSUID, MsFlags::MS_NOSUID),
        (FsFlags::ST_NODEV, MsFlags::MS_NODEV),
        (FsFlags::ST_NOEXEC, MsFlags::MS_NOEXEC),
        (FsFlags::ST_NOATIME, MsFlags::MS_NOATIME),
        (FsFlags::ST_NODIRATIME, MsFlags::MS_NODIRATIME),
        (FsFlags::ST_RELATIME, MsFlags::MS_RELATIME),
    ]
    .into_iter()
    .filter(|(st, _)| have.contains(*st))
    .fold(MsFlags::empty(), |acc, (_, ms)| acc | ms)
}

/// The devices a command keeps, bound from the host's into a /dev of its
/// own.
const KEPT_DEVICES: [&str; 6] = ["null", "zero", "full", "random", "urandom", "tty"];

/// The most the call's `/dev` tmpfs holds, as tmpfs's `size=` option: its
/// `shm` is where the command's shared memory goes (64 MiB, charged to
/// the memory of whoever writes it, gone with the call).
const OWN_DEV_BYTES: &str = "64m";

/// Covers /dev with a tmpfs holding [`KEPT_DEVICES`] (each bound from the
/// host's node, opened before the cover, with the `nodev` every other
/// mount has cleared on its bind alone), `fd`, `stdin`, `stdout` and
/// `stderr` as links into `/proc/self/fd`, an empty `ptmx` and `pts` for
/// the private devpts instance, and an empty `shm` (mode 1777), the
/// command's POSIX shared memory and semaphores (Python's
/// `multiprocessing` needs them). The tmpfs holds at most
/// [`OWN_DEV_BYTES`]; Landlock lets the command write beneath `shm` and
/// the devices only; without Landlock it is the call's own tmpfs anyway.
fn own_dev() -> nix::Result<()> {
    use nix::fcntl::{OFlag, open};
    use nix::sys::stat::Mode;
    let none: Option<&str> = None;
    let io = |e: std::io::Error| Errno::from_raw(e.raw_os_error().unwrap_or(libc::EIO));
    let kept: Vec<(&str, std::os::fd::OwnedFd)> = KEPT_DEVICES
        .iter()
        .filter_map(|name| {
            Some((
                *name,
                open(format!("/dev/{name}").as_str(), OFlag::O_PATH | OFlag::O_CLOEXEC, Mode::empty())
                    .ok()?,
            ))
        })
        .collect();
    let flags = MsFlags::MS_NOSUID | MsFlags::MS_NOEXEC;
    let options = format!("size={OWN_DEV_BYTES},mode=0755");
    mount(Some("tmpfs"), "/dev", Some("tmpfs"), flags, Some(options.as_str()))?;
    for (name, node) in &kept {
        let target = Path::new("/dev").join(name);
        std::fs::File::create(&target).map_err(io)?;
        let source = format!("/proc/self/fd/{}", node.as_raw_fd());
        mount(Some(source.as_str()), &target, none, MsFlags::MS_BIND, none)?;
        // The bind copied the host /dev's `nodev` (set on every mount
        // first): this device, and only it, opens again.
        let at = std::ffi::CString::new(target.as_os_str().as_encoded_bytes()).map_err(|_| Errno::EINVAL)?;
        crate::mount_api::set_attributes(
            libc::AT_FDCWD,
            &at,
            0,
            0,
            crate::mount_api::MOUNT_ATTR_NODEV,
            false,
        )?;
    }
    for (link, to) in [
        ("fd", "/proc/self/fd"),
        ("stdin", "/proc/self/fd/0"),
        ("stdout", "/proc/self/fd/1"),
        ("stderr", "/proc/self/fd/2"),
    ] {
        std::os::unix::fs::symlink(to, Path::new("/dev").join(link)).map_err(io)?;
    }
    std::fs::File::create("/dev/ptmx").map_err(io)?;
    std::fs::create_dir("/dev/pts").map_err(io)?;
    // As a host's /dev/shm is: anyone's, sticky.
    std::fs::create_dir("/dev/shm").map_err(io)?;
    let shared = std::os::unix::fs::PermissionsExt::from_mode(0o1777);
    std::fs::set_permissions("/dev/shm", shared).map_err(io)?;
    Ok(())
}

/// The mount points of the filesystems of type `kind` in `mountinfo` (the
/// text of `/proc/self/mountinfo`: the point is field 5, with space, tab,
/// newline and backslash written as octal escapes; the type follows the
/// ` - ` separator).
fn mounts_of(mountinfo: &str, kind: &str) -> Vec<PathBuf> {
    mountinfo
        .lines()
        .filter_map(|line| {
            let (fields, after) = line.split_once(" - ")?;
            (after.split(' ').next()? == kind).then_some(())?;
            Some(PathBuf::from(unescape(fields.split(' ').nth(4)?)))
        })
        .collect()
}

/// `\040`, `\011`, `\012` and `\134` of a mountinfo field as the
/// characters they stand for.
fn unescape(field: &str) -> String {
    field.replace("\\040", " ").replace("\\011", "\t").replace("\\012", "\n").replace("\\134", "\\")
}

/// Covers `hidden` with an empty read-only tmpfs; binds `spill` (the run's
/// own spill folder) back read-only when it is beneath `hidden` and
/// exists, and `tmpdir` (the call's private temporary folder, which the
/// engine makes beneath the run state) back writable when it is beneath
/// `hidden`, opened with no link on its way before the cover (a link
/// there was not the engine's: it is not bound, and writes there fail;
/// said in `missing`, the cover made all the same).
fn hide(hidden: &Path, spill: Option<&Path>, tmpdir: &Path, missing: &mut Vec<String>) -> nix::Result<()> {
    let none: Option<&str> = None;
    // Opened before the tmpfs covers them.
    let keep = spill
        .filter(|s| s.starts_with(hidden) && s.is_dir())
        .and_then(|s| Some((s.strip_prefix(hidden).ok()?.to_path_buf(), std::fs::File::open(s).ok()?)));
    let tmp_failed = |e: Errno| format!("writable mount of {} ({e}): writes there fail", tmpdir.display());
    let own_tmp = tmpdir.strip_prefix(hidden).ok().and_then(|rel| match open_folder_without_links(tmpdir) {
        Ok(dir) => Some((rel.to_path_buf(), dir)),
        Err(e) => {
            missing.push(tmp_failed(e));
            None
        }
    });
    let flags = MsFlags::MS_NOSUID | MsFlags::MS_NODEV;
    mount(Some("tmpfs"), hidden, Some("tmpfs"), flags, Some("mode=0755,size=64k"))?;
    let io = |e: std::io::Error| Errno::from_raw(e.raw_os_error().unwrap_or(libc::EIO));
    if let Some((rel, dir)) = keep {
        let target = hidden.join(rel);
        std::fs::create_dir_all(&target).map_err(io)?;
        let source = format!("/proc/self/fd/{}", dir.as_raw_fd());
        mount(Some(source.as_str()), &target, none, MsFlags::MS_BIND, none)?;
        let ro = MsFlags::MS_BIND | MsFlags::MS_REMOUNT | MsFlags::MS_RDONLY | locked_flags(&target);
        mount(none, &target, none, ro, none)?;
    }
    if let Some((rel, dir)) = own_tmp {
        let target = hidden.join(rel);
        let bound = std::fs::create_dir_all(&target)
            .map_err(io)
            .and_then(|()| crate::mount_api::bind_object_onto(&dir, &target, false));
        if let Err(e) = bound {
            missing.push(tmp_failed(e));
        }
    }
    mount(none, hidden, none, MsFlags::MS_REMOUNT | MsFlags::MS_RDONLY | flags, none)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mounts_of_a_type_are_read_from_mountinfo_with_their_escapes() {
        let info = "22 1 0:21 / /proc rw,nosuid - proc proc rw\n\
                    40 22 0:35 / /dev/mqueue rw,nosuid,nodev,noexec,relatime shared:14 - mqueue mqueue rw\n\
                    41 22 0:36 / /tmp/a\\040b\\134c rw master:3 - mqueue none rw\n\
                    42 22 0:37 / /srv/mqueue rw - tmpfs mqueue rw\n";
        assert_eq!(mounts_of(info, "mqueue"), [PathBuf::from("/dev/mqueue"), PathBuf::from("/tmp/a b\\c")]);
        assert_eq!(mounts_of(info, "proc"), [PathBuf::from("/proc")]);
    }
}
