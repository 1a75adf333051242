//! The `WWW-Authenticate: Bearer` challenge of a 403 that asks for more
//! scope (RFC 6750 §3.1, `error="insufficient_scope"`), and the scopes a
//! step-up asks for: the union of those the login had and those the
//! challenge names (MCP authorization 2025-11-25 and 2026-07-28, "Scope
//! Challenge Handling" / step-up authorization).

/// The scopes a 403's `WWW-Authenticate` value `header` asks for when it is
/// a Bearer challenge with `error="insufficient_scope"`: its `scope`
/// parameter split on spaces (possibly empty: the server did not say
/// which). `None` for any other challenge (no Bearer scheme, another
/// error, none). The parameters are read by rmcp's parser
/// (`WWWAuthenticateParams`, quoted or token values, any order); `url` is
/// the server's, against which a relative `resource_metadata` resolves.
#[cfg(feature = "oauth")]
pub(crate) fn insufficient_scope(header: &str, url: &str) -> Option<Vec<String>> {
    if !header.trim_start().get(..6).is_some_and(|scheme| scheme.eq_ignore_ascii_case("bearer")) {
        return None;
    }
    let base = url::Url::parse(url).ok()?;
    let params = rmcp::transport::auth::WWWAuthenticateParams::parse(header, &base);
    params
        .is_insufficient_scope()
        .then(|| params.scope.unwrap_or_default().split_whitespace().map(str::to_owned).collect())
}

/// `had` then each scope of `more` not in it, in order, each once: what a
/// step-up asks for (it never asks for less than the login had, so the
/// calls that worked keep working).
pub(crate) fn scope_union(had: &[String], more: &[String]) -> Vec<String> {
    let mut union: Vec<String> = Vec::with_capacity(had.len() + more.len());
    for scope in had.iter().chain(more) {
        if !scope.is_empty() && !union.contains(scope) {
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
    fn other_challenges_are_not_a_scope_request() {
        let url = "http://127.0.0.1:1/mcp";
        assert_eq!(insufficient_scope(r#"Bearer error="invalid_token", scope="a""#, url), None);
        assert_eq!(insufficient_scope(r#"Bearer scope="a", resource_metadata="/x""#, url), None);
        assert_eq!(insufficient_scope(r#"Basic realm="x", error="insufficient_scope""#, url), None);
        assert_eq!(insufficient_scope("", url), None);
    }
}
