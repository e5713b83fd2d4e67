//! Helpers shared by the in-process tests: a cluster with its controllers off, raw HTTP
//! requests and polling.

use cinder_sim::controllers::ControllersConfig;
use cinder_sim::{ClusterConfig, EmbeddedCluster};
use serde_json::Value;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// The answer to a raw request.
pub struct Raw {
    pub code: u16,
    pub content_type: String,
    pub body: String,
}

impl Raw {
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or(Value::Null)
    }
}

/// One HTTP/1.1 request over a fresh connection.
pub async fn raw(
    base: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: impl AsRef<[u8]>,
) -> Raw {
    let body = body.as_ref();
    let addr = base.trim_start_matches("http://");
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let mut req = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Length: {}\r\nConnection: close\r\n",
        body.len()
    );
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    let mut bytes = req.into_bytes();
    bytes.extend_from_slice(body);
    stream.write_all(&bytes).await.unwrap();
    let mut buf = Vec::new();
    stream.read_to_end(&mut buf).await.unwrap();
    let text = String::from_utf8_lossy(&buf).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let code = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let content_type = head
        .lines()
        .find_map(|l| {
            let (name, value) = l.split_once(':')?;
            name.eq_ignore_ascii_case("content-type")
                .then(|| value.trim().to_string())
        })
        .unwrap_or_default();
    Raw {
        code,
        content_type,
        body: body.to_string(),
    }
}

/// Polls `cond` every 50 ms for up to 60 s.
pub async fn eventually<F, Fut>(what: &str, mut cond: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    for _ in 0..1200 {
        if cond().await {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("not reached within 60 s: {what}");
}

/// A cluster with every simulated controller off (tests of the API server's own semantics).
pub async fn server_only() -> EmbeddedCluster {
    EmbeddedCluster::start(ClusterConfig {
        controllers: ControllersConfig::all_off(),
        ..ClusterConfig::default()
    })
    .await
    .unwrap()
}

/// Whether this process runs as root.
pub fn is_root() -> bool {
    std::process::Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

/// Whether `test` can run: true when nothing is `missing`; otherwise a line saying why it is
/// skipped and false, or a panic under `CI=true` (a real-server test is never skipped there).
pub fn runs_unless_missing(test: &str, missing: Option<&str>) -> bool {
    let Some(why) = missing else {
        return true;
    };
    if std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!("{test}: {why} (CI=true: not skipped)");
    }
    eprintln!("skipping {test}: {why}");
    false
}

/// Whether process `pid` is alive (exists and is not a zombie).
pub fn alive(pid: u32) -> bool {
    std::path::Path::new(&format!("/proc/{pid}")).exists()
        && !std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .unwrap_or_default()
            .contains(") Z ")
}
