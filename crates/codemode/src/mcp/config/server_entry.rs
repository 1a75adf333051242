//! One server's entry of the config file: its raw shape, the steps that
//! make a [`ServerConfig`] of it (name, transport, secrets, timeouts,
//! OAuth, roots), and the stand-in for a disabled server whose entry has
//! an error. The transports' own fields are read in `stdio_entry.rs` and
//! `http_entry.rs`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

use codemode_base::pacing::{Rate, RetryPolicy, parse_rate, parse_retry, parse_scope};
use serde::Deserialize;
use serde_json::Value;

use super::secrets::settle_secrets;
use super::variables::{Vars, expand_vars};
use super::{
    ConfigError, DEFAULT_MAX_TOTAL_TIMEOUT, DEFAULT_STARTUP_TIMEOUT, MAX_SERVER_NAME_LEN, ServerConfig,
    Transport, field_error, http_entry, stdio_entry,
};

/// The raw shape of one server entry, after `dialect::normalise` (other
/// keys are collected there and warned about).
#[derive(Deserialize)]
pub(super) struct RawServer {
    #[serde(rename = "type")]
    pub(super) kind: Option<String>,
    pub(super) command: Option<String>,
    #[serde(default)]
    pub(super) args: Vec<String>,
    #[serde(default)]
    pub(super) env: BTreeMap<String, String>,
    pub(super) cwd: Option<String>,
    pub(super) url: Option<String>,
    #[serde(default)]
    pub(super) headers: BTreeMap<String, String>,
    pub(super) timeout_ms: Option<u64>,
    pub(super) max_total_timeout_ms: Option<u64>,
    pub(super) startup_timeout_ms: Option<u64>,
    #[serde(default)]
    pub(super) read_only: bool,
    #[serde(default)]
    pub(super) disabled: bool,
    pub(super) max_in_flight: Option<usize>,
    /// Calls per second (`codemode_base::pacing::parse_rate`).
    pub(super) rate: Option<Value>,
    /// The retry table (`codemode_base::pacing::parse_retry`).
    pub(super) retry: Option<Value>,
    /// `"process"` or `"global"` (`codemode_base::pacing::parse_scope`).
    pub(super) scope: Option<Value>,
    #[serde(rename = "envFile")]
    pub(super) env_file: Option<String>,
    #[serde(rename = "disabledTools", default)]
    pub(super) disabled_tools: Vec<String>,
    #[serde(rename = "autoApprove", default)]
    pub(super) auto_approve: Vec<String>,
    /// Cline's per-call timeout, in seconds.
    pub(super) timeout: Option<u64>,
    pub(super) oauth: Option<crate::mcp::oauth::OAuthSettings>,
    pub(super) roots: Option<bool>,
}

/// What reading one server's entry carries from step to step: the
/// server's name (for errors), the config file's folder (for relative
/// paths), the variables, and the secrets its expanded values made so far
/// (each value with the form it is shown as).
pub(super) struct EntryReader<'a> {
    pub(super) name: &'a str,
    pub(super) base: &'a Path,
    vars: &'a Vars<'a>,
    pub(super) secrets: Vec<(String, String)>,
}

impl EntryReader<'_> {
    /// A [`ConfigError::Field`] naming this server and `field`.
    pub(super) fn error(&self, field: impl Into<String>, message: impl Into<String>) -> ConfigError {
        field_error(self.name, field, message)
    }

    /// `value` (of `field`) with its variables expanded; the secrets it
    /// holds are kept.
    ///
    /// # Errors
    /// [`ConfigError::Field`] for `field` with [`expand_vars`]' message.
    pub(super) fn expand(&mut self, field: &str, value: &str) -> Result<String, ConfigError> {
        let (expanded, found) = expand_vars(value, self.vars).map_err(|m| self.error(field, m))?;
        self.secrets.extend(found);
        Ok(expanded)
    }

    /// The canonical workspace (`${workspaceFolder}`), when one is given.
    pub(super) fn workspace(&self) -> Option<&Path> {
        self.vars.workspace
    }
}

/// A server's transport as read from its entry.
pub(super) struct ReadTransport {
    /// Expanded: what starts the server.
    pub(super) transport: Transport,
    /// As written, for people ([`ServerConfig::shown`]).
    pub(super) shown: Transport,
    /// The `envFile` read for a stdio server's environment.
    pub(super) env_file: Option<PathBuf>,
}

/// `oauth` with its `clientSecret` expanded; the secret is kept with the
/// entry's secrets either way (a literal one shown as `[redacted]`, as a
/// literal header value is).
///
/// # Errors
/// [`ConfigError::Field`] for `oauth.clientSecret` without a `clientId`,
/// or with a variable that cannot be expanded.
fn oauth_settings(
    reader: &mut EntryReader<'_>,
    mut oauth: crate::mcp::oauth::OAuthSettings,
) -> Result<crate::mcp::oauth::OAuthSettings, ConfigError> {
    if oauth.client_secret.is_some() && oauth.client_id.is_none() {
        return Err(reader.error(
            "oauth.clientSecret",
            "a client secret belongs to a pre-registered client: give its `clientId` too",
        ));
    }
    if let Some(written) = oauth.client_secret.take() {
        let expanded = reader.expand("oauth.clientSecret", &written)?;
        if expanded == written {
            reader.secrets.push((expanded.clone(), "[redacted]".to_owned()));
        }
        oauth.client_secret = Some(expanded);
    }
    Ok(oauth)
}

/// Reads the entry `raw` of server `name`: checks the name, the transport
/// and its fields (expanding variables, `base` resolving relative paths),
/// then the timeouts, `oauth` and `roots`.
///
/// # Errors
/// [`ConfigError::Field`] naming the server and the field of the first
/// problem.
pub(super) fn parse_server(
    name: &str,
    raw: &Value,
    base: &Path,
    vars: &Vars<'_>,
) -> Result<ServerConfig, ConfigError> {
    check_name(name)?;
    let raw: RawServer = serde_path_to_error::deserialize(raw).map_err(|e| {
        let path = e.path().to_string();
        let field = if path == "." { "entry".to_owned() } else { path };
        field_error(name, field, e.into_inner().to_string())
    })?;
    let http = is_http(name, &raw)?;
    let mut reader = EntryReader { name, base, vars, secrets: Vec::new() };
    let ReadTransport { transport, shown, env_file } = if http {
        http_entry::http_transport(&mut reader, &raw)?
    } else {
        stdio_entry::stdio_transport(&mut reader, &raw)?
    };
    if raw.oauth.is_some() && !http {
        return Err(field_error(name, "oauth", "OAuth applies to HTTP servers only (give a `url`)"));
    }
    let oauth = raw.oauth.clone().map(|o| oauth_settings(&mut reader, o)).transpose()?;
    let secrets = settle_secrets(reader.secrets);
    let timeout = call_timeout(name, &raw)?;
    let (rate, retry, global_limits) = pacing(name, &raw)?;
    let roots = raw.roots.unwrap_or_else(|| match &transport {
        Transport::Stdio { .. } => true,
        Transport::Http { url, .. } => is_loopback_url(url),
    });
    Ok(ServerConfig {
        name: name.to_owned(),
        transport,
        timeout,
        max_total_timeout: raw.max_total_timeout_ms.map_or(DEFAULT_MAX_TOTAL_TIMEOUT, Duration::from_millis),
        startup_timeout: raw.startup_timeout_ms.map_or(DEFAULT_STARTUP_TIMEOUT, Duration::from_millis),
        read_only: raw.read_only,
        disabled: raw.disabled,
        max_in_flight: raw.max_in_flight,
        rate,
        retry,
        global_limits,
        disabled_tools: raw.disabled_tools.into_iter().collect(),
        auto_approve: raw.auto_approve.into_iter().collect(),
        oauth,
        env_file,
        roots,
        shown,
        secrets,
    })
}

/// Checks that `name` can make tool names ([`valid_server_name`]).
///
/// # Errors
/// [`ConfigError::Field`] `name`, saying what a name needs.
fn check_name(name: &str) -> Result<(), ConfigError> {
    if valid_server_name(name) {
        return Ok(());
    }
    Err(field_error(
        name,
        "name",
        format!(
            "a server name becomes part of tool names (`mcp__<server>__<tool>`): it needs 1 to \
             {MAX_SERVER_NAME_LEN} characters, at least one ASCII letter or digit and no control \
             characters (other characters are replaced and the tool names get a hash suffix; \
             `my-server` stays as it is)"
        ),
    ))
}

/// Whether `name` can make tool names (`mcp__<server>__<tool>`): 1 to
/// [`MAX_SERVER_NAME_LEN`] characters, no control characters, at least one
/// ASCII letter or digit. Other characters are replaced and the name gets a
/// hash suffix (src/mcp/naming.rs), as other clients' names (`time.server`,
/// `my memory`) need.
fn valid_server_name(name: &str) -> bool {
    !name.is_empty()
        && name.chars().count() <= MAX_SERVER_NAME_LEN
        && !name.chars().any(char::is_control)
        && name.bytes().any(|b| b.is_ascii_alphanumeric())
}

/// Whether the entry is a streamable HTTP server: as its `type` says,
/// else when it has a `url` and no `command`.
///
/// (An entry whose `type` codemode does not know, `sse` included, was
/// skipped before: `dialect::unusable`.)
///
/// # Errors
/// [`ConfigError::Field`] `type` for an unknown transport.
fn is_http(name: &str, raw: &RawServer) -> Result<bool, ConfigError> {
    let kind = raw.kind.as_deref().map(str::to_ascii_lowercase);
    match kind.as_deref() {
        None => Ok(raw.url.is_some() && raw.command.is_none()),
        Some("stdio") => Ok(false),
        Some("http" | "streamable-http" | "streamablehttp" | "streamable_http") => Ok(true),
        Some(other) => {
            Err(field_error(name, "type", format!("unknown transport `{other}`; use \"stdio\" or \"http\"")))
        }
    }
}

/// The per-call timeout: `timeout_ms`, or Cline's `timeout` in seconds
/// (1 to 3600); `None` leaves it to the pool. Checks first that
/// `timeout_ms`, `startup_timeout_ms` and `max_in_flight` are not 0.
///
/// # Errors
/// [`ConfigError::Field`] for a 0, both timeouts given, or a `timeout` out
/// of range.
fn call_timeout(name: &str, raw: &RawServer) -> Result<Option<Duration>, ConfigError> {
    let timeouts = [
        ("timeout_ms", raw.timeout_ms),
        ("startup_timeout_ms", raw.startup_timeout_ms),
        ("max_total_timeout_ms", raw.max_total_timeout_ms),
    ];
    for (field, value) in timeouts {
        if value == Some(0) {
            return Err(field_error(name, field, "must be at least 1 (milliseconds)"));
        }
    }
    if raw.max_in_flight == Some(0) {
        return Err(field_error(name, "max_in_flight", "must be at least 1 (calls at once)"));
    }
    if let Some(n) = raw.max_in_flight.filter(|n| *n > 1024) {
        // The same bound as `[tools.NAME] max_in_flight` (codemode_base::pacing).
        return Err(field_error(name, "max_in_flight", format!("{n} is above 1024 (calls at once)")));
    }
    match (raw.timeout, raw.timeout_ms) {
        (Some(_), Some(_)) => {
            Err(field_error(name, "timeout", "give either `timeout` (seconds) or `timeout_ms`, not both"))
        }
        (Some(secs), None) if !(1..=3600).contains(&secs) => Err(field_error(
            name,
            "timeout",
            format!(
                "{secs} is not between 1 and 3600: `timeout` is in seconds (as Cline reads it); \
                 write `timeout_ms` for milliseconds"
            ),
        )),
        (Some(secs), None) => Ok(Some(Duration::from_secs(secs))),
        (None, ms) => Ok(ms.map(Duration::from_millis)),
    }
}

/// The entry's `rate` (calls per second), `retry` table and whether its
/// `scope` is `"global"` (docs/LIMITS.md, "Limits per server and per
/// tool").
///
/// # Errors
/// [`ConfigError::Field`] `rate`, `retry` or `scope`, saying what to give.
fn pacing(name: &str, raw: &RawServer) -> Result<(Option<Rate>, Option<RetryPolicy>, bool), ConfigError> {
    let rate = raw.rate.as_ref().map(parse_rate).transpose().map_err(|m| field_error(name, "rate", m))?;
    let retry = match &raw.retry {
        Some(v) => parse_retry(v).map_err(|m| field_error(name, "retry", m))?,
        None => None,
    };
    let global = match &raw.scope {
        Some(v) => parse_scope(v).map_err(|m| field_error(name, "scope", m))?,
        None => false,
    };
    Ok((rate, retry, global))
}

/// Whether `url`'s host is this machine (`localhost`, `127.0.0.0/8`,
/// `::1`): only such an HTTP server is offered roots by default, so a
/// remote server does not learn the local workspace path.
fn is_loopback_url(url: &str) -> bool {
    match url::Url::parse(url).ok().and_then(|u| u.host().map(|h| h.to_owned())) {
        Some(url::Host::Domain(d)) => d.eq_ignore_ascii_case("localhost"),
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        None => false,
    }
}

/// A `disabled: true` server whose entry has an error: listed as disabled,
/// never started, nothing of its entry kept.
pub(super) fn disabled_server(name: &str) -> ServerConfig {
    let transport =
        Transport::Stdio { command: String::new(), args: Vec::new(), env: BTreeMap::new(), cwd: None };
    ServerConfig {
        name: name.to_owned(),
        shown: transport.clone(),
        transport,
        timeout: None,
        max_total_timeout: DEFAULT_MAX_TOTAL_TIMEOUT,
        startup_timeout: DEFAULT_STARTUP_TIMEOUT,
        read_only: false,
        disabled: true,
        max_in_flight: None,
        rate: None,
        retry: None,
        global_limits: false,
        disabled_tools: BTreeSet::new(),
        auto_approve: BTreeSet::new(),
        oauth: None,
        env_file: None,
        roots: true,
        secrets: Vec::new(),
    }
}
