//! The node's daemonEndpoints port, the kubelet's port of a process node: reads each request's
//! head and hands it to the container logs ([`super::logs`]) or to `exec` ([`super::exec`]).

use std::path::{Path, PathBuf};

use tokio::io::AsyncReadExt;
use tokio::net::{TcpListener, TcpStream};

/// Serves log and exec requests on `listener` until the task is aborted; `root` holds the log
/// files.
pub async fn serve(listener: TcpListener, root: PathBuf) {
    while let Ok((stream, _)) = listener.accept().await {
        let root = root.clone();
        tokio::spawn(async move {
            let _ = answer(stream, &root).await;
        });
    }
}

async fn answer(mut stream: TcpStream, root: &Path) -> std::io::Result<()> {
    let mut head = Vec::new();
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n")
        && !head.windows(2).any(|w| w == b"\n\n")
        && head.len() < 16 * 1024
    {
        let n = stream.read(&mut buf).await?;
        if n == 0 {
            break;
        }
        head.extend_from_slice(&buf[..n]);
    }
    let text = String::from_utf8_lossy(&head).into_owned();
    let mut first = text.lines().next().unwrap_or_default().split_whitespace();
    let (method, target) = (
        first.next().unwrap_or_default().to_owned(),
        first.next().unwrap_or_default().to_owned(),
    );
    if method == "GET" && target.starts_with("/exec/") {
        let end = head
            .windows(4)
            .position(|w| w == b"\r\n\r\n")
            .map_or(head.len(), |p| p + 4);
        let rest = head.split_off(end);
        let text = String::from_utf8_lossy(&head).into_owned();
        return super::exec::answer(stream, &text, rest, &target, root).await;
    }
    super::logs::answer(stream, &method, &target, root).await
}
