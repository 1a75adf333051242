//! Error text for people: an error and its sources as one line, without
//! the Rust type names rmcp puts in its messages.

/// `error` and its sources as one line, without the Rust type names rmcp
/// puts in its messages (`Transport [rmcp::transport::...<...>] error`).
pub(crate) fn error_text(error: &dyn std::error::Error) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut next = Some(error);
    while let Some(e) = next {
        let text = without_type_names(&e.to_string());
        if !parts.iter().any(|p| p.contains(&text)) {
            parts.push(text);
        }
        next = e.source();
    }
    parts.join(": ")
}

/// `text` without bracketed Rust paths (`[a::b<c>]`).
fn without_type_names(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(open) = rest.find('[') {
        let tail = &rest[open..];
        // The matching `]` (type names nest `<...>` and `[...]`).
        let mut depth = 0usize;
        let close = tail.char_indices().find_map(|(i, c)| {
            match c {
                '[' => depth += 1,
                ']' => {
                    depth -= 1;
                    if depth == 0 {
                        return Some(i);
                    }
                }
                _ => {}
            }
            None
        });
        match close {
            Some(close) if tail[..close].contains("::") => {
                out.push_str(rest[..open].trim_end());
                rest = &tail[close + 1..];
            }
            _ => {
                out.push_str(&rest[..open + 1]);
                rest = &tail[1..];
            }
        }
    }
    out.push_str(rest);
    out.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rust_type_names_are_taken_out_of_messages() {
        let raw = "Send message error Transport [rmcp::transport::async_rw::AsyncRwTransport<RoleClient, BoundedLines<tokio::process::ChildStdout>, [u8; 4]>] error: Broken pipe";
        assert_eq!(without_type_names(raw), "Send message error Transport error: Broken pipe");
        assert_eq!(without_type_names("keep [this] and [a, b]"), "keep [this] and [a, b]");
        assert_eq!(without_type_names("open [ never closed"), "open [ never closed");
    }

    #[test]
    fn sources_are_joined_once() {
        #[derive(Debug)]
        struct Outer(std::io::Error);
        impl std::fmt::Display for Outer {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                write!(f, "client error")
            }
        }
        impl std::error::Error for Outer {
            fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
                Some(&self.0)
            }
        }
        let e = Outer(std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "connection refused"));
        assert_eq!(error_text(&e), "client error: connection refused");
    }
}
