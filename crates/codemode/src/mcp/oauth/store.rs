//! Where logins are kept: one file per MCP server URL in the user's config
//! folder, `<config>/codemode/oauth/<key>.json` (`<key>`: the first 32 hex
//! digits of the URL's SHA-256), mode 0600 in folders of mode 0700, each
//! write atomic (a temporary file in the same folder, renamed over).
//!
//! The file holds `{"url": URL, "credentials": ..., "step_up_scopes": [...]}`:
//! rmcp's [`StoredCredentials`] (client id, token response with the access
//! and refresh tokens, granted scopes, when the token was received, issuer)
//! and the scopes the server asked for in `insufficient_scope` challenges
//! (absent when none), which the next login asks for.
//! Keyed by URL, not by the config's server name: two configs naming the
//! same URL share one login, and a changed URL never reuses a token.

#[cfg(feature = "oauth")]
use std::io::Write as _;
use std::path::{Path, PathBuf};

#[cfg(feature = "oauth")]
use rmcp::transport::auth::{AuthError, CredentialRefreshGuard, CredentialStore, StoredCredentials};
#[cfg(feature = "oauth")]
use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};

/// The folder of logins: `oauth/` under `$XDG_CONFIG_HOME/codemode` when
/// that is set and absolute, else under `$HOME/.config/codemode` (the same
/// config folder as the trust record, [`crate::trust::TrustStore::user`]).
///
/// # Errors
/// A message when neither variable is set to an absolute path.
pub fn user_token_dir() -> Result<PathBuf, String> {
    let absolute = |var: &str| std::env::var_os(var).map(PathBuf::from).filter(|p| p.is_absolute());
    absolute("XDG_CONFIG_HOME")
        .or_else(|| absolute("HOME").map(|home| home.join(".config")))
        .map(|base| base.join("codemode").join("oauth"))
        .ok_or_else(|| {
            "no config folder for MCP logins: set XDG_CONFIG_HOME or HOME to an absolute path".to_owned()
        })
}

/// The largest login file read back: 1 MiB. rmcp reads at most 1 MiB of
/// each answer of an authorization server, so a login it saved is smaller;
/// a larger file was not written by codemode.
pub const MAX_TOKEN_FILE_BYTES: usize = 1 << 20;

/// The login file of `url` in `dir`, named by the digest of
/// [`login_key`]`(url)`.
pub fn token_path(dir: &Path, url: &str) -> PathBuf {
    let digest = Sha256::digest(login_key(url).as_bytes());
    let key: String = digest.iter().take(16).map(|b| format!("{b:02x}")).collect();
    dir.join(format!("{key}.json"))
}

/// What a login belongs to: `url` normalised as RFC 3986 §6.2.2 allows
/// without knowing the server (scheme and host in lower case, the
/// scheme's default port dropped, an empty path as `/`, no fragment), so
/// `HTTPS://Example.com:443/mcp` and `https://example.com/mcp` share one
/// login. A trailing slash (`/mcp/`) and another host name for the same
/// machine (`localhost`, `127.0.0.1`) stay other servers: the token's
/// audience is the resource URL the server names (RFC 8707, RFC 9728
/// §3.3 compares it exactly), and a login for one is refused by a server
/// that knows itself by the other. A URL that does not parse is its own
/// key.
pub fn login_key(url: &str) -> String {
    match url::Url::parse(url) {
        Ok(mut parsed) => {
            parsed.set_fragment(None);
            parsed.to_string()
        }
        Err(_) => url.to_owned(),
    }
}

#[cfg(feature = "oauth")]
/// The file's shape.
#[derive(Serialize, Deserialize)]
struct TokenFile {
    url: String,
    credentials: StoredCredentials,
    /// Scopes learnt from the server's `insufficient_scope` challenges
    /// (RFC 6750 §3.1), asked for by every later login of the URL.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    step_up_scopes: Vec<String>,
}

/// The login of one MCP server URL as rmcp's [`CredentialStore`]: what
/// the authorization manager loads, saves after a login or a refresh, and
/// clears.
#[derive(Debug, Clone)]
pub(crate) struct TokenFileStore {
    path: PathBuf,
    #[cfg_attr(not(feature = "oauth"), allow(dead_code))]
    url: String,
}

impl TokenFileStore {
    /// The store of `url` in `dir` (nothing is read or made yet).
    pub(crate) fn new(dir: &Path, url: &str) -> TokenFileStore {
        TokenFileStore { path: token_path(dir, url), url: login_key(url) }
    }

    /// The file's path.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Whether a login is kept for the URL.
    #[cfg(feature = "oauth")]
    pub(crate) fn exists(&self) -> bool {
        self.path.is_file()
    }

    #[cfg(feature = "oauth")]
    fn read(&self) -> Result<Option<StoredCredentials>, String> {
        Ok(self.read_file()?.map(|file| file.credentials))
    }

    /// The scopes the server's `insufficient_scope` challenges asked for
    /// since the login was made ([`Self::remember_scopes`]); empty without
    /// a login or when the file cannot be read.
    #[cfg(feature = "oauth")]
    pub(crate) fn step_up_scopes(&self) -> Vec<String> {
        self.read_file().ok().flatten().map(|file| file.step_up_scopes).unwrap_or_default()
    }

    /// Adds `scopes` to the login's step-up scopes (kept in order, once
    /// each), so the next `codemode mcp login` asks for them. Nothing is
    /// written without a login.
    ///
    /// # Errors
    /// The login file cannot be read or written.
    #[cfg(feature = "oauth")]
    pub(crate) async fn remember_scopes(&self, scopes: &[String]) -> Result<(), String> {
        // The refresh's lock: a refresh saving new tokens meanwhile is not
        // overwritten with the tokens read here.
        let _held = rmcp::transport::auth::CredentialStore::acquire_refresh_guard(self)
            .await
            .map_err(|e| e.to_string())?;
        let Some(mut file) = self.read_file()? else { return Ok(()) };
        let union = super::challenge::scope_union(&file.step_up_scopes, scopes);
        if union == file.step_up_scopes {
            return Ok(());
        }
        if union.len() > super::challenge::MAX_KEPT_SCOPES {
            return Err(format!(
                "the server asked for more than {} scopes in all; none of the new ones is kept",
                super::challenge::MAX_KEPT_SCOPES
            ));
        }
        file.step_up_scopes = union;
        self.write_file(&file)
    }

    #[cfg(feature = "oauth")]
    fn read_file(&self) -> Result<Option<TokenFile>, String> {
        use std::io::Read as _;
        let file = match std::fs::File::open(&self.path) {
            Ok(file) => file,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(format!("cannot read {}: {e}", self.path.display())),
        };
        // One byte past the bound tells a file over it.
        let mut bytes = Vec::new();
        file.take(MAX_TOKEN_FILE_BYTES as u64 + 1)
            .read_to_end(&mut bytes)
            .map_err(|e| format!("cannot read {}: {e}", self.path.display()))?;
        self.parse_file(&bytes)
    }

    /// The credentials in the login file's content `bytes`: `None` when
    /// the file is another URL's login.
    ///
    /// # Errors
    /// The content is over [`MAX_TOKEN_FILE_BYTES`] or is not a login file;
    /// the message names the file and where it broke, never its content.
    #[cfg(feature = "oauth")]
    pub(crate) fn parse(&self, bytes: &[u8]) -> Result<Option<StoredCredentials>, String> {
        Ok(self.parse_file(bytes)?.map(|file| file.credentials))
    }

    /// [`Self::parse`], the whole file.
    #[cfg(feature = "oauth")]
    fn parse_file(&self, bytes: &[u8]) -> Result<Option<TokenFile>, String> {
        if bytes.len() > MAX_TOKEN_FILE_BYTES {
            return Err(format!(
                "{} is larger than {} KiB, more than a codemode login holds; remove it with `codemode mcp logout`",
                self.path.display(),
                MAX_TOKEN_FILE_BYTES >> 10
            ));
        }
        // serde's message could quote the file: say only where it broke.
        let file: TokenFile = serde_json::from_slice(bytes).map_err(|e| {
            format!(
                "{} is not a codemode login (line {}, column {}); remove it with `codemode mcp logout`",
                self.path.display(),
                e.line(),
                e.column()
            )
        })?;
        // Another URL's login (a hash collision, or a copied file) is none.
        Ok((file.url == self.url).then_some(file))
    }

    /// The login file's text for `credentials`, as [`Self::save`] writes it.
    #[cfg(feature = "oauth")]
    pub(crate) fn text(&self, credentials: StoredCredentials) -> String {
        let file = TokenFile { url: self.url.clone(), credentials, step_up_scopes: Vec::new() };
        serde_json::to_string_pretty(&file).expect("credentials serialise")
    }

    /// Saves `credentials`, keeping the login's step-up scopes (a refresh
    /// or a new login of the same URL does not forget them).
    #[cfg(feature = "oauth")]
    fn write(&self, credentials: StoredCredentials) -> Result<(), String> {
        let step_up_scopes = self.step_up_scopes();
        self.write_file(&TokenFile { url: self.url.clone(), credentials, step_up_scopes })
    }

    #[cfg(feature = "oauth")]
    fn write_file(&self, file: &TokenFile) -> Result<(), String> {
        let dir = self.path.parent().expect("a login file has a folder");
        let io = |path: &Path, e: std::io::Error| format!("cannot write {}: {e}", path.display());
        make_private_dir(dir).map_err(|e| io(dir, e))?;
        let mut tmp = tempfile::NamedTempFile::new_in(dir).map_err(|e| io(dir, e))?;
        // NamedTempFile is created 0600 on Unix.
        let text = serde_json::to_string_pretty(file).expect("credentials serialise");
        tmp.write_all(text.as_bytes()).map_err(|e| io(tmp.path(), e))?;
        tmp.as_file().sync_all().map_err(|e| io(tmp.path(), e))?;
        tmp.persist(&self.path).map_err(|e| io(&self.path, e.error))?;
        Ok(())
    }

    /// Removes the login; `Ok(false)` when there was none.
    ///
    /// # Errors
    /// The file exists but cannot be removed.
    pub(crate) fn remove(&self) -> Result<bool, String> {
        match std::fs::remove_file(&self.path) {
            Ok(()) => Ok(true),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(format!("cannot remove {}: {e}", self.path.display())),
        }
    }
}

#[cfg(feature = "oauth")]
/// Creates `dir` (and `codemode/` above it) with mode 0700 where they are
/// missing, and narrows an existing `dir` to 0700.
fn make_private_dir(dir: &Path) -> std::io::Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::{DirBuilderExt as _, PermissionsExt as _};
        std::fs::DirBuilder::new().recursive(true).mode(0o700).create(dir)?;
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
    }
    #[cfg(not(unix))]
    {
        std::fs::create_dir_all(dir)
    }
}

#[cfg(feature = "oauth")]
#[async_trait::async_trait]
impl CredentialStore for TokenFileStore {
    async fn load(&self) -> Result<Option<StoredCredentials>, AuthError> {
        self.read().map_err(AuthError::CredentialStoreError)
    }

    async fn save(&self, credentials: StoredCredentials) -> Result<(), AuthError> {
        self.write(credentials).map_err(AuthError::CredentialStoreError)
    }

    async fn clear(&self) -> Result<(), AuthError> {
        self.remove().map(|_| ()).map_err(AuthError::CredentialStoreError)
    }

    /// An exclusive `flock` on `<login file>.lock`, held by rmcp from its
    /// reload of the login through the token request to the save: two
    /// processes refreshing one login take turns, and the second refreshes
    /// with the refresh token the first saved (a server that rotates
    /// refresh tokens would refuse the old one, and the login would be
    /// lost). Waits on a blocking thread.
    async fn acquire_refresh_guard(&self) -> Result<Option<CredentialRefreshGuard>, AuthError> {
        let lock = self.path.with_extension("json.lock");
        use std::os::unix::fs::OpenOptionsExt as _;
        let held =
            tokio::task::spawn_blocking(move || -> Result<nix::fcntl::Flock<std::fs::File>, String> {
                let dir = lock.parent().expect("a login file has a folder");
                make_private_dir(dir).map_err(|e| format!("cannot make {}: {e}", dir.display()))?;
                let file = std::fs::OpenOptions::new()
                    .create(true)
                    .truncate(false)
                    .write(true)
                    .mode(0o600)
                    .open(&lock)
                    .map_err(|e| format!("cannot open {}: {e}", lock.display()))?;
                nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockExclusive)
                    .map_err(|(_, e)| format!("cannot lock {}: {e}", lock.display()))
            })
            .await
            .map_err(|e| AuthError::CredentialStoreError(e.to_string()))?
            .map_err(AuthError::CredentialStoreError)?;
        Ok(Some(CredentialRefreshGuard::new(held)))
    }
}

#[cfg(all(test, feature = "oauth"))]
mod tests {
    use super::*;

    #[test]
    fn one_file_per_url() {
        let dir = Path::new("/x");
        assert_eq!(token_path(dir, "http://a/mcp"), token_path(dir, "http://a/mcp"));
        assert_ne!(token_path(dir, "http://a/mcp"), token_path(dir, "http://a/mcp2"));
    }

    #[tokio::test]
    async fn saved_private_and_read_back_only_for_its_url() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("codemode/oauth");
        let store = TokenFileStore::new(&dir, "http://127.0.0.1:1/mcp");
        assert!(store.load().await.unwrap().is_none());
        store.save(StoredCredentials::new("client-1".into(), None, vec![], Some(5))).await.unwrap();
        assert_eq!(store.load().await.unwrap().unwrap().client_id, "client-1");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode(store.path()), 0o600);
            assert_eq!(mode(&dir), 0o700);
        }
        // A file moved under another URL's name is not that URL's login.
        let other = TokenFileStore::new(&dir, "http://127.0.0.1:2/mcp");
        std::fs::copy(store.path(), other.path()).unwrap();
        assert!(other.load().await.unwrap().is_none());
        assert!(store.remove().unwrap());
        assert!(!store.remove().unwrap());
    }

    #[tokio::test]
    async fn step_up_scopes_are_kept_across_saves() {
        let tmp = tempfile::tempdir().unwrap();
        let store = TokenFileStore::new(tmp.path(), "http://127.0.0.1:1/mcp");
        let scopes = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        // Without a login nothing is written.
        store.remember_scopes(&scopes(&["a"])).await.unwrap();
        assert!(!store.exists());
        store.save(StoredCredentials::new("c".into(), None, vec![], None)).await.unwrap();
        assert!(store.step_up_scopes().is_empty());
        store.remember_scopes(&scopes(&["a", "b"])).await.unwrap();
        store.remember_scopes(&scopes(&["b", "c"])).await.unwrap();
        assert_eq!(store.step_up_scopes(), scopes(&["a", "b", "c"]));
        // Past the bound, nothing new is kept.
        let many: Vec<String> =
            (0..crate::mcp::oauth::challenge::MAX_KEPT_SCOPES).map(|i| format!("s{i}")).collect();
        assert!(store.remember_scopes(&many).await.is_err());
        assert_eq!(store.step_up_scopes(), scopes(&["a", "b", "c"]));
        // A refresh's or a new login's save keeps them.
        store.save(StoredCredentials::new("d".into(), None, vec![], None)).await.unwrap();
        assert_eq!(store.step_up_scopes(), scopes(&["a", "b", "c"]));
        assert_eq!(store.load().await.unwrap().unwrap().client_id, "d");
    }

    #[tokio::test]
    async fn a_file_that_is_not_a_login_is_refused_without_quoting_it() {
        let tmp = tempfile::tempdir().unwrap();
        let store = TokenFileStore::new(tmp.path(), "http://127.0.0.1:1/mcp");
        std::fs::write(store.path(), r#"{"url": "x", "credentials": "secret-token-text"}"#).unwrap();
        let error = store.load().await.unwrap_err().to_string();
        assert!(error.contains("is not a codemode login (line 1, column"), "{error}");
        assert!(!error.contains("secret-token-text"), "{error}");
        // Over the bound: refused before it is parsed.
        let mut big = br#"{"url": "http://127.0.0.1:1/mcp", "credentials": {"client_id": ""#.to_vec();
        big.resize(MAX_TOKEN_FILE_BYTES + 10, b'a');
        std::fs::write(store.path(), &big).unwrap();
        let error = store.load().await.unwrap_err().to_string();
        assert!(
            error.contains("is larger than 1024 KiB") && error.contains("codemode mcp logout"),
            "{error}"
        );
    }
}
