//! The Landlock ruleset init applies before it writes the header (step 2
//! of the launcher's module docs).

use std::path::{Path, PathBuf};

use super::LaunchSpec;
use crate::SandboxProfile;

/// Applies Landlock: read and execute everywhere, write only beneath the
/// private temporary folder, the workspace (`workspace-write`) and the
/// harmless devices; signals and abstract Unix sockets scoped to the
/// sandbox; no TCP unless the network is allowed. Returns the `landlock`
/// field of [`Applied`].
pub(super) fn landlock(
    spec: &LaunchSpec,
    profile: SandboxProfile,
    private_ptys: bool,
    missing: &mut Vec<String>,
) -> String {
    use landlock::{
        ABI, Access, AccessFs, AccessNet, LandlockStatus, Ruleset, RulesetAttr, RulesetCreatedAttr,
        RulesetStatus, Scope, path_beneath_rules,
    };
    let abi = ABI::V6;
    let mut writable: Vec<&Path> = vec![&spec.tmpdir, Path::new("/dev/null"), Path::new("/dev/zero")];
    writable.push(Path::new("/dev/full"));
    if private_ptys {
        // The command's own pseudo-terminals (the private devpts instance).
        writable.extend([Path::new("/dev/ptmx"), Path::new("/dev/pts")]);
    }
    if profile == SandboxProfile::WorkspaceWrite {
        writable.push(&spec.workspace);
    }
    writable.extend(spec.writable.iter().map(PathBuf::as_path));
    let status = (|| {
        let mut ruleset =
            Ruleset::default().handle_access(AccessFs::from_all(abi))?.scope(Scope::from_all(abi))?;
        if !spec.network {
            ruleset = ruleset.handle_access(AccessNet::from_all(abi))?;
        }
        ruleset
            .create()?
            .add_rules(path_beneath_rules(["/"], AccessFs::from_read(abi)))?
            .add_rules(path_beneath_rules(writable, AccessFs::from_all(abi)))?
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
