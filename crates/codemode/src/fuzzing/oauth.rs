//! Entry points for what an OAuth login reads from outside: the answers of
//! an MCP server's authorization server during `codemode mcp login`
//! (protected resource metadata, authorization server metadata, dynamic
//! client registration, the token response), the `WWW-Authenticate`
//! challenge that starts it, and the login file read back from disk.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use rmcp::transport::auth::{
    AuthorizationManager, AuthorizationRequest, AuthorizationSession, OAuthHttpClient, OAuthHttpClientFuture,
    OAuthHttpRequest, WWWAuthenticateParams,
};
use serde_json::{Value, json};

use crate::mcp::oauth::store::TokenFileStore;

/// The MCP server's URL the login entry points pretend to log in to.
pub const OAUTH_SERVER_URL: &str = "https://mcp.example.com/mcp";

/// The redirect URI the login entry point registers.
const REDIRECT_URI: &str = "http://127.0.0.1:8765/callback";

/// How far a login got on canned answers, and how many requests it made.
#[derive(Debug, Clone)]
pub struct LoginRun {
    /// Requests rmcp made (each got the next answer, or a 404 after the last).
    pub requests: usize,
    /// The authorization server metadata as discovered, when discovery
    /// succeeded.
    pub metadata: Option<Value>,
    /// The authorization URL, when the client was registered.
    pub authorization_url: Option<String>,
    /// The token response, when the code was exchanged.
    pub token: Option<Value>,
    /// The message of the step that failed, if one did.
    pub error: Option<String>,
}

/// Runs the steps of `codemode mcp login` that read an authorization
/// server's answers ([`crate::mcp::oauth::login`], steps 2, 3 and 6) against
/// canned answers: `challenge` is the 401's `WWW-Authenticate` value, and
/// each request rmcp makes gets the next of `answers`. An answer is a
/// JSON body served with status 200, or, when it starts with three digits
/// and a newline (`404\n...`), with that status. After the last answer,
/// each request gets a 404.
pub fn oauth_login(challenge: Option<&str>, answers: Vec<Vec<u8>>) -> LoginRun {
    let canned = Arc::new(Canned { answers, next: AtomicUsize::new(0) });
    let mut run = LoginRun { requests: 0, metadata: None, authorization_url: None, token: None, error: None };
    let steps = login_steps(challenge, canned.clone(), &mut run);
    if let Err(message) = super::mcp_client::runtime().block_on(steps) {
        run.error = Some(message);
    }
    run.requests = canned.next.load(Ordering::Acquire);
    run
}

/// Discovery, registration, the code exchange: what [`oauth_login`] runs.
async fn login_steps(challenge: Option<&str>, canned: Arc<Canned>, run: &mut LoginRun) -> Result<(), String> {
    let fail = |what: &str, e: &dyn std::fmt::Display| format!("could not {what}: {e}");
    let mut manager = AuthorizationManager::new_with_oauth_http_client(OAUTH_SERVER_URL, canned)
        .await
        .map_err(|e| fail("set up OAuth", &e))?;
    let resolution = manager
        .resolve_metadata_from_challenge(challenge)
        .await
        .map_err(|e| fail("discover the authorization server", &e))?;
    run.metadata = Some(serde_json::to_value(&resolution.metadata).map_err(|e| e.to_string())?);
    manager.set_metadata(resolution.metadata);
    let request = AuthorizationRequest::new(REDIRECT_URI).with_client_name("codemode");
    let session = AuthorizationSession::new(manager, request)
        .await
        .map_err(|(_, e)| fail("register codemode with the authorization server", &e))?;
    let url = session.get_authorization_url().to_owned();
    run.authorization_url = Some(url.clone());
    let state = url::Url::parse(&url)
        .ok()
        .and_then(|u| u.query_pairs().find(|(k, _)| k == "state").map(|(_, v)| v.into_owned()))
        .ok_or("the authorization URL has no state")?;
    let callback = format!("{REDIRECT_URI}?code=fuzz-code&state={state}");
    let token = session.handle_callback_url(&callback).await.map_err(|e| fail("exchange the code", &e))?;
    run.token = Some(serde_json::to_value(&token).map_err(|e| e.to_string())?);
    Ok(())
}

/// Parses a `WWW-Authenticate` value as the login's discovery does (its
/// `resource_metadata` resolved against [`OAUTH_SERVER_URL`]): `{resource_metadata, scope, error}`.
pub fn oauth_challenge(header: &str) -> Value {
    let base = url::Url::parse(OAUTH_SERVER_URL).expect("the URL parses");
    let params = WWWAuthenticateParams::parse(header, &base);
    json!({
        "resource_metadata": params.resource_metadata_url.map(|u| u.to_string()),
        "scope": params.scope,
        "error": params.error,
    })
}

/// Reads the content of a login file kept for [`OAUTH_SERVER_URL`] as the
/// login's store does: `Ok(Some(text))` with the text codemode writes back
/// for the credentials read, `Ok(None)` when it is another URL's login.
///
/// # Errors
/// The store's message (the file over its bound, or not a login file).
pub fn oauth_token_file(content: &[u8]) -> Result<Option<String>, String> {
    let store = TokenFileStore::new(std::path::Path::new("/fuzz/oauth"), OAUTH_SERVER_URL);
    Ok(store.parse(content)?.map(|credentials| store.text(credentials)))
}

/// The path [`oauth_token_file`]'s messages name.
pub fn oauth_token_file_path() -> String {
    crate::mcp::oauth::token_path(std::path::Path::new("/fuzz/oauth"), OAUTH_SERVER_URL).display().to_string()
}

/// An authorization server that answers from a list.
struct Canned {
    answers: Vec<Vec<u8>>,
    next: AtomicUsize,
}

impl OAuthHttpClient for Canned {
    fn execute(&self, _request: OAuthHttpRequest) -> OAuthHttpClientFuture<'_> {
        let at = self.next.fetch_add(1, Ordering::AcqRel);
        let answer = self.answers.get(at).map_or(&b"404\n"[..], Vec::as_slice);
        let (status, body) = match answer {
            [a, b, c, b'\n', body @ ..] if [a, b, c].iter().all(|d| d.is_ascii_digit()) => {
                let code = u16::from(a - b'0') * 100 + u16::from(b - b'0') * 10 + u16::from(c - b'0');
                (http::StatusCode::from_u16(code).unwrap_or(http::StatusCode::OK), body)
            }
            body => (http::StatusCode::OK, body),
        };
        let response = http::Response::builder()
            .status(status)
            .header(http::header::CONTENT_TYPE, "application/json")
            .body(body.to_vec())
            .map_err(|e| Box::new(e) as rmcp::transport::auth::OAuthHttpClientError);
        Box::pin(async move { response })
    }
}

#[cfg(test)]
mod tests {
    /// A seed of `fuzz/corpus/oauth_metadata`: its parts (challenge, answers).
    fn seed(name: &str) -> (Option<String>, Vec<Vec<u8>>) {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../fuzz/corpus/oauth_metadata")
            .join(name);
        let bytes = std::fs::read(path).unwrap();
        let mut parts = bytes.split(|&b| b == 0xff);
        let challenge =
            parts.next().map(|c| String::from_utf8(c.to_vec()).unwrap()).filter(|c| !c.is_empty());
        (challenge, parts.map(<[u8]>::to_vec).collect())
    }

    #[test]
    fn the_answers_of_the_python_sdk_server_log_in() {
        let (challenge, answers) = seed("python_sdk_login");
        let run = super::oauth_login(challenge.as_deref(), answers);
        assert_eq!(run.error, None);
        assert_eq!(run.requests, 4);
        assert_eq!(run.metadata.unwrap()["token_endpoint"], "https://mcp.example.com/token");
        assert!(run.authorization_url.unwrap().starts_with("https://mcp.example.com/authorize?"));
        assert_eq!(run.token.unwrap()["access_token"], "mcp_9b1f");
    }

    #[test]
    fn a_refused_registration_stops_the_login_and_says_so() {
        let (challenge, answers) = seed("registration_refused");
        let run = super::oauth_login(challenge.as_deref(), answers);
        assert!(run.metadata.is_some() && run.authorization_url.is_none());
        assert!(run.error.unwrap().starts_with("could not register codemode"));
    }

    #[test]
    fn a_login_file_reads_back_as_written() {
        let path =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus/oauth_token_file");
        let text =
            super::oauth_token_file(&std::fs::read(path.join("after_login")).unwrap()).unwrap().unwrap();
        assert_eq!(super::oauth_token_file(text.as_bytes()), Ok(Some(text)));
        assert_eq!(super::oauth_token_file(&std::fs::read(path.join("other_url")).unwrap()), Ok(None));
    }
}
