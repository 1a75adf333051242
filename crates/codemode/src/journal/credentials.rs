//! A journal store's spec with its credentials masked: the one form a
//! store is named in anywhere a person or a model reads it.
//!
//! A PostgreSQL store takes a password in three places, and each is
//! masked: the URL's user info (`postgres://me:PW@db/runs`), a URL
//! parameter (`?password=PW`, `&sslpassword=PW`), and libpq's `key=value`
//! form (`host=db password=PW`, `password='P W'`). The texts are read as
//! tokio-postgres reads them (its `Config::from_str`), so what it would take
//! for a password is what is masked; where that reading fails, the rest of
//! the text from the failing parameter on is masked too. `PGPASSWORD` and
//! `~/.pgpass` are never read, so never printed.

use std::borrow::Cow;

/// What a masked credential shows as.
pub const MASKED: &str = "***";

/// The parameters whose values are secrets, in either form (compared
/// without regard to case).
const SECRET_KEYS: [&str; 2] = ["password", "sslpassword"];

/// `spec` (`--journal`, `[journal] url`) with every credential it holds
/// replaced by [`MASKED`], for anything shown: messages, errors, logs,
/// commands printed for a person, results a model reads.
///
/// `postgres://me:s3cret@db/runs?sslpassword=k` shows as
/// `postgres://me:***@db/runs?sslpassword=***`; `host=db password='a b'
/// user=me` as `host=db password=*** user=me`. A folder or `off` is
/// returned as it is (borrowed): borrowed means nothing was masked.
pub fn without_credentials(spec: &str) -> Cow<'_, str> {
    if let Some(rest) = url_rest(spec) {
        let scheme = &spec[..spec.len() - rest.len()];
        return match masked_url(rest) {
            Some(masked) => Cow::Owned(format!("{scheme}{masked}")),
            None => Cow::Borrowed(spec),
        };
    }
    if is_key_value(spec) {
        return masked_key_value(spec);
    }
    Cow::Borrowed(spec)
}

/// What follows `postgres://` or `postgresql://` (any case), if `spec` is
/// a URL of either.
pub(super) fn url_rest(spec: &str) -> Option<&str> {
    ["postgres://", "postgresql://"].iter().find_map(|scheme| {
        let head = spec.get(..scheme.len())?;
        head.eq_ignore_ascii_case(scheme).then(|| &spec[scheme.len()..])
    })
}

/// Whether `spec` is libpq's `key=value` form: it starts with a keyword
/// (lower-case letters and `_`, as every libpq keyword is), then `=`,
/// blanks allowed around. A folder whose name looks so is written with
/// `./` in front (`./host=x`).
pub(super) fn is_key_value(spec: &str) -> bool {
    let spec = spec.trim_start();
    let key_end = spec.find(|c: char| !(c.is_ascii_lowercase() || c == '_')).unwrap_or(spec.len());
    key_end > 0 && spec[key_end..].trim_start().starts_with('=')
}

/// The part of a URL after its scheme with its secrets masked, `None` when
/// it holds none. As tokio-postgres reads it: the user info ends at the
/// first `@` and its password starts after the first `:` (further `@`s
/// before the host ends are taken into the password, so a password with
/// an `@` left unescaped is masked whole); parameters follow the first
/// `?` after it, split at `&`, their names percent-decoded.
fn masked_url(rest: &str) -> Option<String> {
    let mut out = String::with_capacity(rest.len());
    let mut after = rest;
    if let Some(at) = rest.find('@') {
        let host_end = rest[at + 1..].find(['/', '?']).map_or(rest.len(), |i| at + 1 + i);
        let last_at = rest[..host_end].rfind('@').unwrap_or(at);
        if let Some(colon) = rest[..at].find(':') {
            out.push_str(&rest[..=colon]);
            out.push_str(MASKED);
            after = &rest[last_at..];
        }
    }
    let (base, query) = match after.split_once('?') {
        Some((base, query)) => (base, Some(query)),
        None => (after, None),
    };
    out.push_str(base);
    if let Some(query) = query {
        out.push('?');
        let parts: Vec<String> = query
            .split('&')
            .map(|part| match part.split_once('=') {
                Some((key, _)) if is_secret_key(&percent_decoded(key)) => format!("{key}={MASKED}"),
                Some(_) => part.to_owned(),
                // Not a parameter: a piece of a value holding an `&`.
                None if part.is_empty() => String::new(),
                None => MASKED.to_owned(),
            })
            .collect();
        out.push_str(&parts.join("&"));
    }
    (out != rest).then_some(out)
}

/// `spec` in the `key=value` form with the values of its secret keys
/// masked; from a parameter that does not read (an unterminated quote, a
/// word without `=`), the rest masked.
fn masked_key_value(spec: &str) -> Cow<'_, str> {
    let mut out = String::with_capacity(spec.len());
    let mut at = 0;
    let mut masked = false;
    while at < spec.len() {
        match parameter(spec, at) {
            Some(p) => {
                if is_secret_key(&spec[p.key.clone()]) {
                    out.push_str(&spec[at..p.value.start]);
                    out.push_str(MASKED);
                    masked = true;
                } else {
                    out.push_str(&spec[at..p.value.end]);
                }
                at = p.value.end;
            }
            None => {
                let blanks = spec[at..].len() - spec[at..].trim_start().len();
                if at + blanks < spec.len() {
                    out.push_str(&spec[at..at + blanks]);
                    out.push_str(MASKED);
                    masked = true;
                } else {
                    out.push_str(&spec[at..]);
                }
                break;
            }
        }
    }
    if masked { Cow::Owned(out) } else { Cow::Borrowed(spec) }
}

/// Where one `key = value` parameter's keyword and value (quotes
/// included) lie in the text.
struct Parameter {
    key: std::ops::Range<usize>,
    value: std::ops::Range<usize>,
}

/// The parameter starting at byte `at` of `spec` (blanks first), read as
/// tokio-postgres does: a keyword up to a blank or `=`, `=`, then a value,
/// `'quoted'` or up to the next blank, a `\` taking the next character
/// as it is. `None` when none reads there.
fn parameter(spec: &str, at: usize) -> Option<Parameter> {
    let skip_blanks = |i: usize| spec[i..].find(|c: char| !c.is_whitespace()).map_or(spec.len(), |n| i + n);
    let key_start = skip_blanks(at);
    let key_end =
        spec[key_start..].find(|c: char| c.is_whitespace() || c == '=').map_or(spec.len(), |n| key_start + n);
    if key_end == key_start {
        return None;
    }
    let eq = skip_blanks(key_end);
    if !spec[eq..].starts_with('=') {
        return None;
    }
    let value_start = skip_blanks(eq + 1);
    let quoted = spec[value_start..].starts_with('\'');
    let mut chars = spec[value_start..].char_indices().skip(usize::from(quoted));
    let mut value_end = None;
    while let Some((i, c)) = chars.next() {
        match c {
            '\\' => {
                chars.next();
            }
            '\'' if quoted => {
                value_end = Some(value_start + i + 1);
                break;
            }
            c if c.is_whitespace() && !quoted => {
                value_end = Some(value_start + i);
                break;
            }
            _ => {}
        }
    }
    let value_end = match value_end {
        Some(end) => end,
        None if quoted => return None,
        None => spec.len(),
    };
    (value_end > value_start).then_some(Parameter { key: key_start..key_end, value: value_start..value_end })
}

fn is_secret_key(key: &str) -> bool {
    SECRET_KEYS.iter().any(|k| key.eq_ignore_ascii_case(k))
}

/// `text` with its `%XX` escapes decoded (bytes that are not UTF-8 shown
/// as U+FFFD), for comparing a parameter's name.
fn percent_decoded(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = (bytes[i] == b'%').then(|| text.get(i + 1..i + 3)).flatten();
        match hex.and_then(|h| u8::from_str_radix(h, 16).ok()) {
            Some(b) => {
                out.push(b);
                i += 3;
            }
            None => {
                out.push(bytes[i]);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_url_s_user_info_and_secret_parameters_are_masked() {
        let m = |s: &str| without_credentials(s).into_owned();
        assert_eq!(m("postgres://me:s3cret@db:5432/runs"), "postgres://me:***@db:5432/runs");
        assert_eq!(m("POSTGRESQL://me:s3cret@db/runs"), "POSTGRESQL://me:***@db/runs");
        assert_eq!(m("postgres://me:p@ss@db/runs"), "postgres://me:***@db/runs");
        assert_eq!(m("postgres://me:a/b?c@db/runs"), "postgres://me:***@db/runs");
        assert_eq!(
            m("postgres://me@db/runs?sslmode=require&password=s3cret&application_name=x"),
            "postgres://me@db/runs?sslmode=require&password=***&application_name=x"
        );
        assert_eq!(
            m("postgres://db/runs?sslpassword=k&PassWord=p"),
            "postgres://db/runs?sslpassword=***&PassWord=***"
        );
        assert_eq!(m("postgres://db/runs?pass%77ord=s3cret"), "postgres://db/runs?pass%77ord=***");
        // A password holding an unescaped `&`: its pieces are masked too.
        assert_eq!(m("postgres://db/r?password=a&b&user=u"), "postgres://db/r?password=***&***&user=u");
        for plain in ["postgres://me@db/runs", "postgres://db/runs?x=@", "postgresql://h/db?sslmode=disable"]
        {
            assert!(matches!(without_credentials(plain), Cow::Borrowed(_)), "{plain}");
        }
    }

    #[test]
    fn key_value_passwords_are_masked_quoted_or_not() {
        let m = |s: &str| without_credentials(s).into_owned();
        assert_eq!(m("host=db password=s3cret user=me"), "host=db password=*** user=me");
        assert_eq!(m("host=db password = 'a b\\' c' dbname=x"), "host=db password = *** dbname=x");
        assert_eq!(m("password=a\\ b host=h"), "password=*** host=h");
        assert_eq!(m("host=h sslpassword=k PASSWORD=p"), "host=h sslpassword=*** PASSWORD=***");
        // What does not read is masked from there on.
        assert_eq!(m("host=h password='never closed"), "host=h ***");
        assert_eq!(m("host=h s3cret"), "host=h ***");
        assert!(matches!(without_credentials("host=h user=me "), Cow::Borrowed(_)));
    }

    #[test]
    fn folders_and_off_are_left_alone() {
        for spec in ["off", "/var/lib/cm", "runs", "./host=x", "a b=c"] {
            assert!(matches!(without_credentials(spec), Cow::Borrowed(_)), "{spec}");
        }
        assert!(is_key_value("host=h") && is_key_value("  dbname = x") && !is_key_value("./host=x"));
        assert!(!is_key_value("Host=h") && !is_key_value("=x") && !is_key_value("runs"));
    }
}
