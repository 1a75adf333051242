//! The `WWW-Authenticate: Bearer` challenge of a 403 that asks for more
//! scope (RFC 6750 §3.1, `error="insufficient_scope"`), and the scopes a
//! step-up asks for: the union of those the login had and those the
//! challenge names (MCP authorization 2025-11-25 and 2026-07-28, "Scope
//! Challenge Handling" / step-up authorization).

/// The most scopes one challenge may name; a challenge naming more is
/// taken as naming none (the server's text is not kept or shown).
pub(crate) const MAX_CHALLENGE_SCOPES: usize = 64;

/// The longest scope taken from a challenge, in bytes.
pub(crate) const MAX_SCOPE_BYTES: usize = 128;

/// The most scopes kept with a login for the next login to ask for
/// (`step_up_scopes`); a step-up past it keeps nothing new.
pub(crate) const MAX_KEPT_SCOPES: usize = 256;

/// The scopes a 403's `WWW-Authenticate` value `header` asks for when it is
/// a Bearer challenge with `error="insufficient_scope"`: its `scope`
/// parameter split on spaces (possibly empty: the server did not say
/// which). `None` for any other challenge (no Bearer scheme, another
/// error, none). The parameters are read by rmcp's parser
/// (`WWWAuthenticateParams`, quoted or token values, any order); `url` is
/// the server's, against which a relative `resource_metadata` resolves.
///
/// A server chooses this text: a scope that is not an RFC 6749 §3.3
/// `scope-token` (`%x21 / %x23-5B / %x5D-7E`) or is longer than
/// [`MAX_SCOPE_BYTES`], or more than [`MAX_CHALLENGE_SCOPES`] of them, make
/// the challenge name no scope (nothing of it is kept, asked for or shown).
#[cfg(feature = "oauth")]
pub(crate) fn insufficient_scope(header: &str, url: &str) -> Option<Vec<String>> {
    if !header.trim_start().get(..6).is_some_and(|scheme| scheme.eq_ignore_ascii_case("bearer")) {
        return None;
    }
    let base = url::Url::parse(url).ok()?;
    let params = rmcp::transport::auth::WWWAuthenticateParams::parse(header, &base);
    if !params.is_insufficient_scope() {
        return None;
    }
    let scope = params.scope.unwrap_or_default();
    let scopes: Vec<&str> = scope.split_whitespace().take(MAX_CHALLENGE_SCOPES + 1).collect();
    if scopes.len() > MAX_CHALLENGE_SCOPES || !scopes.iter().all(|s| is_scope_token(s)) {
        tracing::warn!("an insufficient_scope challenge names scopes past the bounds; taken as naming none");
        return Some(Vec::new());
    }
    Some(scopes.into_iter().map(str::to_owned).collect())
}

/// Whether `scope` is one RFC 6749 §3.3 `scope-token` of at most
/// [`MAX_SCOPE_BYTES`].
fn is_scope_token(scope: &str) -> bool {
    !scope.is_empty()
        && scope.len() <= MAX_SCOPE_BYTES
        && scope.bytes().all(|b| matches!(b, 0x21 | 0x23..=0x5B | 0x5D..=0x7E))
}

/// `had` then each scope of `more` not in it, in order, each once: what a
/// step-up asks for (it never asks for less than the login had, so the
/// calls that worked keep working). What is not a scope-token (an
/// authorization server's odd `scope` text) is left out.
pub(crate) fn scope_union(had: &[String], more: &[String]) -> Vec<String> {
    let mut seen = std::collections::HashSet::with_capacity(had.len() + more.len());
    let mut union: Vec<String> = Vec::with_capacity(had.len() + more.len());
    for scope in had.iter().chain(more) {
        if is_scope_token(scope) && seen.insert(scope.as_str()) {
            union.push(scope.clone());
        }
    }
    union
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(scopes: &[&str]) -> Vec<String> {
        scopes.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn the_union_keeps_what_the_login_had_first_and_each_scope_once() {
        assert_eq!(scope_union(&v(&["a", "b"]), &v(&["b", "c", "a", "d"])), v(&["a", "b", "c", "d"]));
        assert_eq!(scope_union(&[], &v(&["x", "x"])), v(&["x"]));
        assert_eq!(scope_union(&v(&["a"]), &[]), v(&["a"]));
        assert!(scope_union(&[], &v(&[""])).is_empty());
    }

    #[cfg(feature = "oauth")]
    #[test]
    fn an_insufficient_scope_challenge_gives_its_scopes() {
        let url = "http://127.0.0.1:1/mcp";
        // As the conformance suite's servers send it (RFC 6750 §3.1).
        let header = r#"Bearer scope="mcp:basic mcp:write", resource_metadata="http://127.0.0.1:1/.well-known/oauth-protected-resource/mcp", error="insufficient_scope""#;
        assert_eq!(insufficient_scope(header, url), Some(v(&["mcp:basic", "mcp:write"])));
        let first = r#"bearer error="insufficient_scope", scope="admin", error_description="Scope upgrade will never succeed""#;
        assert_eq!(insufficient_scope(first, url), Some(v(&["admin"])));
        // No scope named: a step-up has nothing to add.
        assert_eq!(insufficient_scope(r#"Bearer error="insufficient_scope""#, url), Some(vec![]));
    }

    #[cfg(feature = "oauth")]
    #[test]
    fn a_challenge_past_the_bounds_names_no_scope() {
        let url = "http://127.0.0.1:1/mcp";
        let challenge = |scope: &str| format!(r#"Bearer error="insufficient_scope", scope="{scope}""#);
        let many: Vec<String> = (0..=MAX_CHALLENGE_SCOPES).map(|i| format!("s{i}")).collect();
        assert_eq!(insufficient_scope(&challenge(&many.join(" ")), url), Some(vec![]));
        let just = &many[..MAX_CHALLENGE_SCOPES];
        assert_eq!(insufficient_scope(&challenge(&just.join(" ")), url), Some(just.to_vec()));
        let long = "a".repeat(MAX_SCOPE_BYTES + 1);
        assert_eq!(insufficient_scope(&challenge(&format!("ok {long}")), url), Some(vec![]));
        // A quote (escaped in the quoted string) is no scope-token (RFC 6749 §3.3).
        assert_eq!(insufficient_scope(&challenge(r#"ok a\"b"#), url), Some(vec![]));
    }

    #[cfg(feature = "oauth")]
    #[test]
    fn other_challenges_are_not_a_scope_request() {
        let url = "http://127.0.0.1:1/mcp";
        assert_eq!(insufficient_scope(r#"Bearer error="invalid_token", scope="a""#, url), None);
        assert_eq!(insufficient_scope(r#"Bearer scope="a", resource_metadata="/x""#, url), None);
        assert_eq!(insufficient_scope(r#"Basic realm="x", error="insufficient_scope""#, url), None);
        assert_eq!(insufficient_scope("", url), None);
    }
}
