//! The Landlock ruleset init applies before it writes the header (step 2
//! of the launcher's module docs).

use std::path::{Path, PathBuf};

use super::LaunchSpec;
use crate::SandboxProfile;

/// Applies Landlock: read and execute everywhere, write only beneath the
/// private temporary folder, the workspace (`workspace-write`), the
/// harmless devices and the call's own `/dev/shm`; signals and abstract Unix sockets scoped to the
/// sandbox; no TCP unless the network is allowed. Returns the `landlock`
/// field of [`Applied`].
pub(super) fn landlock(
    spec: &LaunchSpec,
    profile: SandboxProfile,
    private_ptys: bool,
    missing: &mut Vec<String>,
) -> String {
    use landlock::{
        ABI, Access, AccessFs, AccessNet, LandlockStatus, PathBeneath, Ruleset, RulesetAttr,
        RulesetCreatedAttr, RulesetStatus, Scope, path_beneath_rules,
    };
    let abi = ABI::V6;
    // `/dev/tty`: the command's own terminal, when it makes one (`script`);
    // it has none from the host (its own session). `/dev/shm`: its own
    // shared memory, in the call's own /dev (`mounts::own_dev`).
    let mut devices = vec![
        Path::new("/dev/null"),
        Path::new("/dev/zero"),
        Path::new("/dev/full"),
        Path::new("/dev/tty"),
        Path::new("/dev/shm"),
    ];
    if private_ptys {
        // The command's own pseudo-terminals (the private devpts instance).
        devices.extend([Path::new("/dev/ptmx"), Path::new("/dev/pts")]);
    }
    let mut folders: Vec<&Path> = vec![&spec.tmpdir];
    if profile == SandboxProfile::WorkspaceWrite {
        folders.push(&spec.workspace);
    }
    folders.extend(spec.writable.iter().map(PathBuf::as_path));
    // The writable folders as the mounts bound them: each opened with no
    // link on its way, so a folder a concurrent command swapped for a link
    // gives no rule (its writes fail) rather than one on the link's target.
    let folders: Vec<_> = folders
        .into_iter()
        .filter_map(|folder| match crate::mounts::open_folder_without_links(folder) {
            Ok(fd) => Some(fd),
            Err(e) => {
                missing
                    .push(format!("Landlock's write rule for {} ({e}): writes there fail", folder.display()));
                None
            }
        })
        .map(|fd| Ok::<_, landlock::RulesetError>(PathBeneath::new(fd, AccessFs::from_all(abi))))
        .collect();
    let status = (|| {
        let mut ruleset =
            Ruleset::default().handle_access(AccessFs::from_all(abi))?.scope(Scope::from_all(abi))?;
        if !spec.network {
            ruleset = ruleset.handle_access(AccessNet::from_all(abi))?;
        }
        ruleset
            .create()?
            .add_rules(path_beneath_rules(["/"], AccessFs::from_read(abi)))?
            .add_rules(path_beneath_rules(devices, AccessFs::from_all(abi)))?
            .add_rules(folders)?
            .restrict_self()
    })();
    match status {
        Err(e) => {
            missing.push(format!("Landlock ({e}): writes are not limited to the workspace"));
            "none".into()
        }
        Ok(status) => {
            let kernel_abi = match status.landlock {
                LandlockStatus::Available { effective_abi, kernel_abi } => {
                    kernel_abi.unwrap_or(effective_abi as i32)
                }
                _ => 0,
            };
            match status.ruleset {
                RulesetStatus::FullyEnforced => format!("abi {kernel_abi}"),
                RulesetStatus::PartiallyEnforced => {
                    missing.push(format!(
                        "Landlock rights newer than ABI {kernel_abi} (e.g. truncate, device ioctls, \
                         TCP rules, scopes)"
                    ));
                    format!("abi {kernel_abi}, partially enforced")
                }
                RulesetStatus::NotEnforced => {
                    missing.push(
                        "Landlock (not supported or not enabled by the kernel): writes are not limited \
                         to the workspace"
                            .into(),
                    );
                    "none".into()
                }
            }
        }
    }
}
