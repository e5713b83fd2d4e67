//! Connections behave like the Kubernetes API server's under a slow or loaded client: a request
//! whose head arrives over several seconds is served (the server's request timeout is 60 s, not
//! seconds), and an idle keep-alive connection is still open seconds later (idle timeout 90 s),
//! so a pooled connection a client reuses is not closed under it.

use crate::common::server_only;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Longer than the web framework's own 5 s defaults for both timeouts.
const PAUSE: Duration = Duration::from_secs(7);

/// Reads one HTTP/1.1 response with a Content-Length body; returns its status line.
async fn read_response(stream: &mut TcpStream) -> String {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        let text = String::from_utf8_lossy(&buf).into_owned();
        if let Some((head, body)) = text.split_once("\r\n\r\n") {
            let length = head
                .lines()
                .find_map(|l| {
                    let (name, value) = l.split_once(':')?;
                    name.eq_ignore_ascii_case("content-length")
                        .then(|| value.trim().parse::<usize>().ok())?
                })
                .unwrap_or(0);
            if body.len() >= length {
                return head.lines().next().unwrap_or_default().to_string();
            }
        }
        let n = stream.read(&mut chunk).await.unwrap_or(0);
        if n == 0 {
            // Closed before a whole response: whatever arrived (maybe nothing).
            return String::from_utf8_lossy(&buf)
                .lines()
                .next()
                .unwrap_or_default()
                .to_string();
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_whose_head_arrives_slowly_is_served() {
    let c = server_only().await;
    let addr = c.url().trim_start_matches("http://").to_string();
    let mut stream = TcpStream::connect(&addr).await.unwrap();
    stream
        .write_all(format!("GET /version HTTP/1.1\r\nHost: {addr}\r\n").as_bytes())
        .await
        .unwrap();
    tokio::time::sleep(PAUSE).await;
    stream
        .write_all(b"Accept: application/json\r\n\r\n")
        .await
        .unwrap();
    let status = read_response(&mut stream).await;
    assert!(status.contains(" 200 "), "answered {status:?}");
    c.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_keep_alive_connection_stays_open() {
    let c = server_only().await;
    let addr = c.url().trim_start_matches("http://").to_string();
    let mut stream = TcpStream::connect(&addr).await.unwrap();
    let request = format!("GET /version HTTP/1.1\r\nHost: {addr}\r\n\r\n");
    stream.write_all(request.as_bytes()).await.unwrap();
    let first = read_response(&mut stream).await;
    assert!(first.contains(" 200 "), "answered {first:?}");
    tokio::time::sleep(PAUSE).await;
    // The same connection, reused after a pause the way a client pool reuses it.
    let again = match stream.write_all(request.as_bytes()).await {
        Ok(()) => read_response(&mut stream).await,
        Err(e) => format!("write failed: {e}"),
    };
    assert!(
        again.contains(" 200 "),
        "the reused connection answered {again:?}"
    );
    c.shutdown().await;
}
