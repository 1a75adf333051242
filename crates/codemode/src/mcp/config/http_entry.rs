//! A streamable HTTP server's fields: `url` and `headers` (a literal
//! header value is a secret as a whole).

use std::collections::BTreeMap;

use super::server_entry::{EntryReader, RawServer, ReadTransport};
use super::{ConfigError, REDACTED, Transport};

/// Headers the MCP transport sets itself; a config may not give them.
const TRANSPORT_HEADERS: [&str; 3] = ["accept", "mcp-session-id", "last-event-id"];

/// The HTTP transport of `raw`: expanded, and as shown (the URL as
/// written, header values as written or [`REDACTED`]).
///
/// # Errors
/// [`ConfigError::Field`] for a missing `url`, a `command` or `envFile`
/// beside it, a URL that is not http(s), a variable without a value, or a
/// bad header.
pub(super) fn http_transport(
    reader: &mut EntryReader<'_>,
    raw: &RawServer,
) -> Result<ReadTransport, ConfigError> {
    let Some(written) = &raw.url else {
        return Err(reader.error("url", "an HTTP server needs a `url`"));
    };
    if raw.command.is_some() {
        return Err(reader.error("command", "give either `command` (stdio) or `url` (HTTP), not both"));
    }
    if raw.env_file.is_some() {
        return Err(reader.error(
            "envFile",
            "`envFile` sets a stdio server's environment; an HTTP server has none (use `headers`)",
        ));
    }
    let url = reader.expand("url", written)?;
    if !(url.starts_with("http://") || url.starts_with("https://")) {
        // As written: the expanded URL may hold a secret.
        return Err(reader.error("url", format!("`{written}` is not an http:// or https:// URL")));
    }
    let (headers, shown_headers) = headers(reader, &raw.headers)?;
    Ok(ReadTransport {
        transport: Transport::Http { url, headers },
        shown: Transport::Http { url: written.clone(), headers: shown_headers },
        env_file: None,
    })
}

/// Header values by name.
type Headers = BTreeMap<String, String>;

/// The `headers` as written, expanded and as shown; each checked as an
/// HTTP header name and value.
///
/// # Errors
/// [`ConfigError::Field`] `headers.NAME` for a variable without a value,
/// an invalid name or value, or a header the transport sets.
fn headers(reader: &mut EntryReader<'_>, written: &Headers) -> Result<(Headers, Headers), ConfigError> {
    let mut headers = BTreeMap::new();
    let mut shown_headers = BTreeMap::new();
    for (key, written) in written {
        let field = format!("headers.{key}");
        let value = reader.expand(&field, written)?;
        // A literal value (an API key pasted in) is a secret as a whole.
        let shown = if value == *written { REDACTED.to_owned() } else { written.clone() };
        if shown == REDACTED {
            reader.secrets.push((value.clone(), REDACTED.to_owned()));
        }
        shown_headers.insert(key.clone(), shown);
        http::HeaderName::from_bytes(key.as_bytes())
            .map_err(|_| reader.error(&field, "not a valid HTTP header name"))?;
        if TRANSPORT_HEADERS.contains(&key.to_ascii_lowercase().as_str()) {
            return Err(reader.error(&field, "this header is set by the MCP transport; remove it"));
        }
        http::HeaderValue::from_str(&value)
            .map_err(|_| reader.error(&field, "not a valid HTTP header value"))?;
        headers.insert(key.clone(), value);
    }
    Ok((headers, shown_headers))
}
