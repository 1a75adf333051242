//! Reading the store's URL, and connecting: without TLS, or over rustls
//! (the crate's TLS, with the ring provider; no OpenSSL) with the server's
//! certificate verified.
//!
//! libpq's `sslmode` names are accepted: `disable`, `allow` and `prefer`
//! (the default) connect without TLS; `require`, `verify-ca` and
//! `verify-full` connect over TLS and verify the certificate chain and the
//! host name (so `require` and `verify-ca` are as strict as `verify-full`:
//! a server with a self-signed certificate needs `sslrootcert`). SCRAM
//! channel binding is not offered.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use rustls::pki_types::ServerName;
use rustls::pki_types::pem::PemObject;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio_postgres::config::{ChannelBinding, SslMode};
use tokio_postgres::tls::{self as pg_tls, MakeTlsConnect, NoTls, TlsConnect};
use tokio_postgres::{Client, Config};

use super::pg_message;
use codemode::journal::{StoreError, without_credentials};

/// How the store's connections are made.
#[derive(Clone)]
pub(super) enum Tls {
    /// Plain TCP or a Unix socket.
    None,
    /// TLS, with this client configuration.
    Rustls(Arc<rustls::ClientConfig>),
}

/// A URL read: what tokio-postgres takes, and the TLS to use.
pub(super) struct Parsed {
    pub config: Config,
    pub tls: Tls,
}

fn invalid(why: impl std::fmt::Display) -> StoreError {
    StoreError::Failed(format!("invalid PostgreSQL URL: {why}"))
}

/// Reads `url` (URL or `key=value` form). `sslmode` and `sslrootcert` are
/// taken out of a URL's query here (tokio-postgres knows only three
/// `sslmode`s and no `sslrootcert`); a `key=value` string goes to
/// tokio-postgres as it is.
pub(super) fn parse(url: &str) -> Result<Parsed, StoreError> {
    let is_url = url.starts_with("postgres://") || url.starts_with("postgresql://");
    let (rest, sslmode, rootcert) = if is_url { take_ssl_params(url)? } else { (url.to_owned(), None, None) };
    let mut config: Config = rest.parse().map_err(|e: tokio_postgres::Error| {
        let hint = if !is_url && (url.contains("verify-") || url.contains("sslrootcert")) {
            " (sslmode=verify-ca/verify-full and sslrootcert need the postgres:// URL form)"
        } else {
            ""
        };
        invalid(format_args!("{}{hint}", unechoed(&pg_message(&e), url)))
    })?;
    if config.get_channel_binding() == ChannelBinding::Require {
        return Err(invalid(
            "channel_binding=require is not supported (the TLS connection offers no channel binding)",
        ));
    }
    let wants_tls = match sslmode.as_deref() {
        None => config.get_ssl_mode() == SslMode::Require,
        Some("disable" | "allow" | "prefer") => false,
        Some("require" | "verify-ca" | "verify-full") => true,
        Some(other) => {
            return Err(invalid(format_args!(
                "unknown sslmode `{other}` (disable, allow, prefer, require, verify-ca or verify-full)"
            )));
        }
    };
    let tls = if wants_tls {
        config.ssl_mode(SslMode::Require);
        Tls::Rustls(Arc::new(client_config(rootcert.as_deref())?))
    } else {
        config.ssl_mode(SslMode::Disable);
        Tls::None
    };
    Ok(Parsed { config, tls })
}

/// tokio-postgres' parse error `message` for `spec`, without what it
/// echoes of `spec` unless the masked spec shows it too: "unknown option
/// `NAME`" quotes what it took for a name, a piece of a password when the
/// password holds an unescaped `&` (`?password=a&b&user=u` reads a
/// parameter `b&user`).
fn unechoed(message: &str, spec: &str) -> String {
    const UNKNOWN: &str = "unknown option `";
    let Some(start) = message.find(UNKNOWN) else { return message.to_owned() };
    let name = message[start + UNKNOWN.len()..].strip_suffix('`').unwrap_or("");
    if !name.is_empty() && without_credentials(spec).contains(&format!("{name}=")) {
        return message.to_owned();
    }
    format!(
        "{}an unknown parameter whose name is not shown, as it may hold a piece of the password (a password \
         holding `&`, `=` or a blank? percent-encode it in a URL, quote it in the key=value form)",
        &message[..start]
    )
}

/// `url` without its `sslmode` and `sslrootcert` parameters, and their
/// values (percent-decoded).
type SslParams = (String, Option<String>, Option<String>);

fn take_ssl_params(url: &str) -> Result<SslParams, StoreError> {
    let Some((base, query)) = url.split_once('?') else { return Ok((url.to_owned(), None, None)) };
    let (mut sslmode, mut rootcert) = (None, None);
    let mut kept = Vec::new();
    for part in query.split('&') {
        match part.split_once('=') {
            Some(("sslmode", v)) => sslmode = Some(percent_decode(v)?),
            Some(("sslrootcert", v)) => rootcert = Some(percent_decode(v)?),
            _ => kept.push(part),
        }
    }
    let rest = if kept.is_empty() { base.to_owned() } else { format!("{base}?{}", kept.join("&")) };
    Ok((rest, sslmode, rootcert))
}

fn percent_decode(text: &str) -> Result<String, StoreError> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = text.get(i + 1..i + 3).and_then(|h| u8::from_str_radix(h, 16).ok());
            out.push(hex.ok_or_else(|| invalid("a bad percent escape in a parameter"))?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| invalid("a parameter is not UTF-8"))
}

/// The TLS client configuration: the CA certificates in `rootcert` (a PEM
/// file, as libpq's `sslrootcert`), or the system's roots.
fn client_config(rootcert: Option<&str>) -> Result<rustls::ClientConfig, StoreError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| invalid(format_args!("TLS: {e}")))?;
    let builder = match rootcert {
        Some(path) if path != "system" => {
            let pem = std::fs::read(path)
                .map_err(|e| invalid(format_args!("cannot read sslrootcert {path}: {e}")))?;
            let mut roots = rustls::RootCertStore::empty();
            for cert in rustls::pki_types::CertificateDer::pem_slice_iter(&pem) {
                let cert = cert.map_err(|e| invalid(format_args!("sslrootcert {path}: {e}")))?;
                roots.add(cert).map_err(|e| invalid(format_args!("sslrootcert {path}: {e}")))?;
            }
            if roots.is_empty() {
                return Err(invalid(format_args!("sslrootcert {path} holds no certificate")));
            }
            builder.with_root_certificates(roots)
        }
        _ => {
            let verifier = rustls_platform_verifier::Verifier::new(provider)
                .map_err(|e| invalid(format_args!("TLS: cannot load the system's root certificates: {e}")))?;
            builder.dangerous().with_custom_certificate_verifier(Arc::new(verifier))
        }
    };
    Ok(builder.with_no_client_auth())
}

/// Connects with `config` (its `application_name` defaulting to `app`) and
/// drives the connection on the store's I/O thread ([`io_runtime`]);
/// `on_end` runs when the connection ends.
pub(super) async fn connect(
    config: &Config,
    tls: &Tls,
    app: &str,
    on_end: impl FnOnce() + Send + 'static,
) -> Result<Client, tokio_postgres::Error> {
    let mut config = config.clone();
    if config.get_application_name().is_none() {
        config.application_name(app);
    }
    let tls = tls.clone();
    let connected = io_runtime().spawn(async move {
        match tls {
            Tls::None => {
                let (client, connection) = config.connect(NoTls).await?;
                drive(connection, on_end);
                Ok(client)
            }
            Tls::Rustls(tls) => {
                let (client, connection) = config.connect(MakeRustls(tls)).await?;
                drive(connection, on_end);
                Ok(client)
            }
        }
    });
    match connected.await {
        Ok(result) => result,
        Err(e) => std::panic::resume_unwind(e.into_panic()),
    }
}

/// The runtime every connection of every store lives on: one thread of
/// its own, started on first use. A connection is made and driven there,
/// not on the runtime of whoever first needed it, because connections are
/// pooled and shared: one made on a VM thread's runtime would stall while
/// that thread runs JavaScript, and die with that runtime (an engine's VM
/// threads end with the engine), under the runs of every other thread
/// borrowing it (`connection closed` in the middle of a transaction).
fn io_runtime() -> &'static tokio::runtime::Handle {
    static IO: std::sync::OnceLock<tokio::runtime::Handle> = std::sync::OnceLock::new();
    IO.get_or_init(|| {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("the PostgreSQL I/O runtime builds");
        let handle = runtime.handle().clone();
        std::thread::Builder::new()
            .name("codemode-postgres-io".into())
            .spawn(move || runtime.block_on(std::future::pending::<()>()))
            .expect("the PostgreSQL I/O thread starts");
        handle
    })
}

/// Drives `connection` on a task of the current runtime (the I/O
/// runtime's), then runs `on_end`.
fn drive<F>(connection: F, on_end: impl FnOnce() + Send + 'static)
where
    F: Future<Output = Result<(), tokio_postgres::Error>> + Send + 'static,
{
    tokio::spawn(async move {
        if let Err(e) = connection.await {
            tracing::debug!("a PostgreSQL connection ended: {}", pg_message(&e));
        }
        on_end();
    });
}

/// tokio-postgres' TLS hooks over tokio-rustls.
#[derive(Clone)]
struct MakeRustls(Arc<rustls::ClientConfig>);

impl<S> MakeTlsConnect<S> for MakeRustls
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    type Stream = RustlsStream<S>;
    type TlsConnect = RustlsConnect;
    type Error = rustls::pki_types::InvalidDnsNameError;

    fn make_tls_connect(&mut self, domain: &str) -> Result<RustlsConnect, Self::Error> {
        let name = ServerName::try_from(domain.to_owned())?;
        Ok(RustlsConnect { config: self.0.clone(), name })
    }
}

struct RustlsConnect {
    config: Arc<rustls::ClientConfig>,
    name: ServerName<'static>,
}

impl<S> TlsConnect<S> for RustlsConnect
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    type Stream = RustlsStream<S>;
    type Error = io::Error;
    type Future = Pin<Box<dyn Future<Output = io::Result<RustlsStream<S>>> + Send>>;

    fn connect(self, stream: S) -> Self::Future {
        Box::pin(async move {
            let stream = tokio_rustls::TlsConnector::from(self.config).connect(self.name, stream).await?;
            Ok(RustlsStream(stream))
        })
    }
}

struct RustlsStream<S>(tokio_rustls::client::TlsStream<S>);

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncRead for RustlsStream<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_read(cx, buf)
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncWrite for RustlsStream<S> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.0).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_shutdown(cx)
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> pg_tls::TlsStream for RustlsStream<S> {
    fn channel_binding(&self) -> pg_tls::ChannelBinding {
        pg_tls::ChannelBinding::none()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ssl_parameters_are_taken_out_of_a_url() {
        let (rest, mode, root) = take_ssl_params(
            "postgres://u:p@h/db?sslmode=verify-full&application_name=x&sslrootcert=%2Ftmp%2Fca.pem",
        )
        .unwrap();
        assert_eq!(rest, "postgres://u:p@h/db?application_name=x");
        assert_eq!(mode.as_deref(), Some("verify-full"));
        assert_eq!(root.as_deref(), Some("/tmp/ca.pem"));
        let (rest, mode, _) = take_ssl_params("postgres://h/db?sslmode=disable").unwrap();
        assert_eq!((rest.as_str(), mode.as_deref()), ("postgres://h/db", Some("disable")));
    }

    #[test]
    fn sslmodes_choose_tls() {
        let plain = |url: &str| matches!(parse(url).unwrap().tls, Tls::None);
        assert!(plain("postgres://h/db"));
        assert!(plain("postgres://h/db?sslmode=disable"));
        assert!(plain("postgres://h/db?sslmode=prefer"));
        assert!(plain("host=h dbname=db sslmode=disable"));
        let err = parse("postgres://h/db?sslmode=sometimes").err().unwrap().to_string();
        assert!(err.contains("unknown sslmode `sometimes`"), "{err}");
        let err = parse("postgres://h/db?sslmode=require&sslrootcert=/nonexistent/ca.pem")
            .err()
            .unwrap()
            .to_string();
        assert!(err.contains("cannot read sslrootcert /nonexistent/ca.pem"), "{err}");
        let err = parse("host=h sslmode=verify-full").err().unwrap().to_string();
        assert!(err.contains("need the postgres:// URL form"), "{err}");
    }

    #[test]
    fn a_parse_error_echoes_only_what_the_masked_spec_shows() {
        let err = parse("postgres://h/db?password=s3&cr3t&user=u").err().unwrap().to_string();
        assert!(!err.contains("cr3t") && err.contains("percent-encode"), "{err}");
        let err = parse("postgres://u:s3cret@h/db?bogus=1").err().unwrap().to_string();
        assert!(err.contains("unknown option `bogus`") && !err.contains("s3cret"), "{err}");
        let err = parse("host=h password='s3cret").err().unwrap().to_string();
        assert!(err.contains("unterminated") && !err.contains("s3cret"), "{err}");
    }
}
