//! A run's consent to re-authorize in a browser (see `step_up`).

use std::collections::HashMap;

/// Re-authorizations (step-ups and new logins) one process makes for one
/// server, at most: 2. With the login itself that is three authorization
/// requests, the most the MCP conformance suite's `auth/scope-retry-limit`
/// accepts from a client facing a server that never accepts the scopes.
pub const MAX_REAUTHORIZATIONS: u32 = 2;

/// Announces a re-authorization: the server's name, the authorization
/// URL, and what opened it (`None`: nothing did; the user opens it).
pub type Announce = dyn Fn(&str, &str, Option<&str>) + Send + Sync;

/// A run's consent to authorize in a browser when an HTTP MCP server asks
/// for more scope or refuses the login (docs/MCP.md, "Authorization"; the
/// module doc of `mcp::oauth::step_up`): the pool's
/// [`PoolOptions::interactive_login`](crate::mcp::PoolOptions::interactive_login).
/// Counts the re-authorizations of each server (at most
/// [`MAX_REAUTHORIZATIONS`]) and makes them one at a time.
pub struct InteractiveLogin {
    #[cfg_attr(not(feature = "oauth"), allow(dead_code))]
    pub(crate) announce: Box<Announce>,
    made: std::sync::Mutex<HashMap<String, u32>>,
    #[cfg_attr(not(feature = "oauth"), allow(dead_code))]
    pub(crate) turn: tokio::sync::Mutex<()>,
}

impl std::fmt::Debug for InteractiveLogin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InteractiveLogin").field("made", &self.made).finish_non_exhaustive()
    }
}

impl InteractiveLogin {
    /// Consent to re-authorize, with `announce` told of each authorization
    /// URL (the CLI prints it on stderr).
    pub fn new(announce: impl Fn(&str, &str, Option<&str>) + Send + Sync + 'static) -> InteractiveLogin {
        InteractiveLogin { announce: Box::new(announce), made: Default::default(), turn: Default::default() }
    }

    /// Takes one re-authorization of `server` from its budget; `false`
    /// when [`MAX_REAUTHORIZATIONS`] were made.
    #[cfg_attr(not(feature = "oauth"), allow(dead_code))]
    pub(crate) fn take(&self, server: &str) -> bool {
        let mut made = self.made.lock().expect("budget lock");
        let count = made.entry(server.to_owned()).or_default();
        (*count < MAX_REAUTHORIZATIONS).then(|| *count += 1).is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_server_has_its_own_bounded_budget() {
        let login = InteractiveLogin::new(|_, _, _| {});
        for _ in 0..MAX_REAUTHORIZATIONS {
            assert!(login.take("a"));
        }
        assert!(!login.take("a"));
        assert!(!login.take("a"));
        assert!(login.take("b"));
    }
}
