//! Entry points for the configuration file's parts the gate does not read
//! on every call (fuzz target `config_sections`).

use serde_json::Value;

use crate::config::ConfigFile;

/// The canonical JSON a paused run's journal records for `config` (what a
/// resume compares), with the file's own posture.
pub fn config_digest(config: &ConfigFile) -> Value {
    crate::config::policy_json(config, config.policy.posture)
}
