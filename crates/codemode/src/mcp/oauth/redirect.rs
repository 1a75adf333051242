//! The local end of an authorization-code login (RFC 8252 §7.3, loopback
//! redirect): a listener on 127.0.0.1 that takes the browser's redirect,
//! and opening the authorization URL in a browser.
//!
//! The listener answers every request; the first one to the callback path
//! ends the wait: with the callback URL when its `state` is the one sent,
//! else with an error (a `state` mismatch is answered and refused, RFC 6749
//! §10.12). Other paths (a browser's `/favicon.ico`) get a 404 and the wait
//! goes on, until the timeout.

use std::time::Duration;

use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpListener;

/// The path the authorization server redirects to.
pub(crate) const CALLBACK_PATH: &str = "/callback";

/// Most bytes read of one request (its request line is all that is used).
const MAX_REQUEST: usize = 16 * 1024;

/// Waits on `listener` for the redirect to [`CALLBACK_PATH`] carrying
/// `state`, for at most `timeout`, and returns the full callback URL
/// (`http://127.0.0.1:PORT/callback?code=...&state=...`).
///
/// # Errors
/// A message when the wait times out, the authorization server sent an
/// `error` (RFC 6749 §4.1.2.1), or the `state` is not the one sent.
pub(crate) async fn wait_for_callback(
    listener: TcpListener,
    state: &str,
    timeout: Duration,
) -> Result<String, String> {
    let port = listener.local_addr().map_err(|e| e.to_string())?.port();
    let wait = async {
        loop {
            let Ok((mut stream, _)) = listener.accept().await else { continue };
            let target = match read_request_target(&mut stream).await {
                Some(target) => target,
                None => continue,
            };
            let url = format!("http://127.0.0.1:{port}{target}");
            let Ok(parsed) = url::Url::parse(&url) else { continue };
            if parsed.path() != CALLBACK_PATH {
                let _ = respond(&mut stream, "404 Not Found", "Not found.").await;
                continue;
            }
            let param =
                |name: &str| parsed.query_pairs().find(|(k, _)| k == name).map(|(_, v)| v.into_owned());
            if let Some(error) = param("error") {
                let _ = respond(
                    &mut stream,
                    "400 Bad Request",
                    "Authorization was not granted. You can close this tab.",
                )
                .await;
                let detail = param("error_description").map(|d| format!(" ({d})")).unwrap_or_default();
                return Err(format!("the authorization server answered `{error}`{detail}"));
            }
            if param("state").as_deref() != Some(state) {
                let _ = respond(&mut stream, "400 Bad Request", "This answer does not belong to this login.")
                    .await;
                return Err(
                    "the redirect carried a state that is not this login's; refused (start the login again)"
                        .to_owned(),
                );
            }
            let _ = respond(&mut stream, "200 OK", "codemode is authorized. You can close this tab.").await;
            return Ok(url);
        }
    };
    tokio::time::timeout(timeout, wait).await.unwrap_or_else(|_| {
        Err(format!("no answer from the browser within {} s; run the login again", timeout.as_secs()))
    })
}

/// The request target of an HTTP/1 request line (`GET /callback?.. HTTP/1.1`).
async fn read_request_target(stream: &mut tokio::net::TcpStream) -> Option<String> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 2048];
    while !buf.windows(2).any(|w| w == b"\r\n") && buf.len() < MAX_REQUEST {
        let n = tokio::time::timeout(Duration::from_secs(10), stream.read(&mut chunk)).await.ok()?.ok()?;
        if n == 0 {
            break;
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    let line = String::from_utf8_lossy(&buf);
    let line = line.lines().next()?;
    let mut parts = line.split_whitespace();
    let (_method, target) = (parts.next()?, parts.next()?);
    target.starts_with('/').then(|| target.to_owned())
}

async fn respond(stream: &mut tokio::net::TcpStream, status: &str, message: &str) -> std::io::Result<()> {
    let body = format!(
        "<!doctype html><html><head><meta charset=\"utf-8\"><title>codemode</title></head>\
         <body><p>{message}</p></body></html>"
    );
    let head = format!(
        "HTTP/1.1 {status}\r\nContent-Type: text/html; charset=utf-8\r\nContent-Length: {}\r\n\
         Cache-Control: no-store\r\nConnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).await?;
    stream.write_all(body.as_bytes()).await?;
    stream.shutdown().await
}

/// Opens `url` in a browser: the program in `$BROWSER` when set (run with
/// the URL as its one argument; a `%s` in it is not expanded), else
/// `xdg-open` when there is a display (`DISPLAY` or `WAYLAND_DISPLAY`),
/// else nothing (the URL is printed by the caller in every case). The
/// program runs detached; its outcome is not waited for.
///
/// Returns what was run, for the message.
pub(crate) fn open_browser(url: &str) -> Option<String> {
    let program = match std::env::var("BROWSER") {
        Ok(browser) if !browser.trim().is_empty() => browser,
        _ if std::env::var_os("DISPLAY").is_some() || std::env::var_os("WAYLAND_DISPLAY").is_some() => {
            "xdg-open".to_owned()
        }
        _ => return None,
    };
    // `$BROWSER` may list alternatives separated by `:`; the first is used.
    let program = program.split(':').next().unwrap_or_default().trim().to_owned();
    let mut command = tokio::process::Command::new(&program);
    command
        .arg(url)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    match command.spawn() {
        Ok(mut child) => {
            tokio::spawn(async move {
                let _ = child.wait().await;
            });
            Some(program)
        }
        Err(_) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn get(port: u16, target: &str) -> String {
        let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port)).await.unwrap();
        stream.write_all(format!("GET {target} HTTP/1.1\r\nHost: x\r\n\r\n").as_bytes()).await.unwrap();
        let mut answer = String::new();
        stream.read_to_string(&mut answer).await.unwrap();
        answer
    }

    async fn bound() -> (TcpListener, u16) {
        let listener = TcpListener::bind(("127.0.0.1", 0)).await.unwrap();
        let port = listener.local_addr().unwrap().port();
        (listener, port)
    }

    #[tokio::test]
    async fn other_paths_wait_and_the_callback_with_its_state_ends_the_wait() {
        let (listener, port) = bound().await;
        let wait =
            tokio::spawn(async move { wait_for_callback(listener, "s1", Duration::from_secs(30)).await });
        assert!(get(port, "/favicon.ico").await.starts_with("HTTP/1.1 404"));
        let page = get(port, "/callback?code=c1&state=s1").await;
        assert!(page.starts_with("HTTP/1.1 200") && page.contains("You can close this tab"), "{page}");
        assert_eq!(
            wait.await.unwrap().unwrap(),
            format!("http://127.0.0.1:{port}/callback?code=c1&state=s1")
        );
    }

    #[tokio::test]
    async fn a_foreign_state_or_an_error_is_refused() {
        let (listener, port) = bound().await;
        let wait =
            tokio::spawn(async move { wait_for_callback(listener, "s1", Duration::from_secs(30)).await });
        assert!(get(port, "/callback?code=c1&state=other").await.starts_with("HTTP/1.1 400"));
        assert!(wait.await.unwrap().unwrap_err().contains("state"));

        let (listener, port) = bound().await;
        let wait =
            tokio::spawn(async move { wait_for_callback(listener, "s1", Duration::from_secs(30)).await });
        get(port, "/callback?error=access_denied&state=s1").await;
        assert!(wait.await.unwrap().unwrap_err().contains("access_denied"));
    }
}
