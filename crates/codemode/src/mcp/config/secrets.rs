//! Secret values of server configurations: the values that came from the
//! environment, an input, an `envFile` or a literal `headers` value, each
//! with the form it is shown as (`${VAR}` or [`REDACTED`](super::REDACTED)), and taking
//! them out of text.

use super::{MIN_REDACTED_LEN, ServerConfig};

/// Every secret of every server configuration read in this process, with
/// its shown form, longest first.
static KNOWN_SECRETS: std::sync::RwLock<Vec<(String, String)>> = std::sync::RwLock::new(Vec::new());

fn remember_secrets(secrets: &[(String, String)]) {
    if secrets.is_empty() {
        return;
    }
    let mut known = KNOWN_SECRETS.write().unwrap_or_else(std::sync::PoisonError::into_inner);
    for secret in secrets {
        if !known.contains(secret) {
            known.push(secret.clone());
        }
    }
    known.sort_by(|a, b| b.0.len().cmp(&a.0.len()).then_with(|| a.cmp(b)));
}

/// `text` with every secret of every MCP server configuration read in this
/// process so far replaced by its `${VAR}` form (or [`REDACTED`](super::REDACTED)), as
/// [`ServerConfig::redact`] does for one server.
///
/// For text codemode does not make itself: the log lines of the libraries
/// under it. rmcp's own error lines quote a failed request's URL, `${VAR}`
/// values included; the `codemode` binary passes its whole stderr log
/// through this, and a host that installs its own `tracing` subscriber
/// should do the same.
pub fn redact_known_secrets(text: &str) -> std::borrow::Cow<'_, str> {
    let known = KNOWN_SECRETS.read().unwrap_or_else(std::sync::PoisonError::into_inner);
    if !known.iter().any(|(value, _)| text.contains(value.as_str())) {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = text.to_owned();
    for (value, shown) in known.iter() {
        if out.contains(value.as_str()) {
            out = out.replace(value.as_str(), shown);
        }
    }
    std::borrow::Cow::Owned(out)
}

/// `secrets` (each expanded value with its shown form) as a
/// [`ServerConfig`] keeps them: values shorter than [`MIN_REDACTED_LEN`]
/// bytes dropped, longest first (so a value inside another is not replaced
/// first), no duplicates; also remembered for [`redact_known_secrets`].
pub(super) fn settle_secrets(mut secrets: Vec<(String, String)>) -> Vec<(String, String)> {
    secrets.retain(|(value, _)| value.len() >= MIN_REDACTED_LEN);
    // Longest first, so a value inside another is not replaced first.
    secrets.sort_by(|a, b| b.0.len().cmp(&a.0.len()).then_with(|| a.cmp(b)));
    secrets.dedup();
    remember_secrets(&secrets);
    secrets
}

impl ServerConfig {
    /// `text` with every expanded `${VAR}` value of this server (and every
    /// literal `headers` value) replaced by its `${VAR}` form (or
    /// [`REDACTED`](super::REDACTED)), longest value first; values shorter than
    /// [`MIN_REDACTED_LEN`] bytes are left. Apply it to anything shown that
    /// may quote the launch: error messages, the server's stderr, logs.
    pub fn redact(&self, text: &str) -> String {
        let mut out = text.to_owned();
        for (value, shown) in &self.secrets {
            if out.contains(value.as_str()) {
                out = out.replace(value.as_str(), shown);
            }
        }
        out
    }
}
