//! Container logs as a kubelet keeps and serves them: one file per container start under
//! `<state>/logs/<namespace>_<pod>_<uid>/<container>/<restart>.log` (a `.done` file beside it
//! once that process ended), served over HTTP on the node's daemonEndpoints port at
//! `GET /containerLogs/{namespace}/{pod}/{container}?previous=true&follow=true&tailLines=N`.
//! The answers read files only; they share no state with the pod tasks. The port itself is
//! [`super::node_port`]'s.

use std::path::{Path, PathBuf};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// What a log request asks for.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct LogQuery {
    pub namespace: String,
    pub pod: String,
    pub container: String,
    pub previous: bool,
    pub follow: bool,
    pub tail_lines: Option<usize>,
}

/// Parses `/containerLogs/{ns}/{pod}/{container}?...`.
pub fn parse_target(target: &str) -> Option<LogQuery> {
    let (namespace, pod, container, query) =
        super::container_path::parse(target, "/containerLogs/")?;
    let mut q = LogQuery {
        namespace: namespace.to_owned(),
        pod: pod.to_owned(),
        container: container.to_owned(),
        ..LogQuery::default()
    };
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (key, value) = pair.split_once('=').unwrap_or((pair, "true"));
        match key {
            "previous" => q.previous = value == "true" || value == "1",
            "follow" => q.follow = value == "true" || value == "1",
            "tailLines" => q.tail_lines = value.parse().ok(),
            _ => {}
        }
    }
    Some(q)
}

/// The log file a query names, or the kubelet's message for why there is none.
pub fn find(root: &Path, q: &LogQuery) -> Result<PathBuf, String> {
    let prefix = format!("{}_{}_", q.namespace, q.pod);
    let pod_dir = std::fs::read_dir(root)
        .map_err(|e| e.to_string())?
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_string_lossy().starts_with(&prefix))
        .max_by_key(|e| e.metadata().and_then(|m| m.modified()).ok())
        .map(|e| e.path())
        .ok_or_else(|| format!("pods \"{}\" not found", q.pod))?;
    let dir = pod_dir.join(&q.container);
    let mut runs: Vec<u32> = std::fs::read_dir(&dir)
        .map_err(|_| {
            format!(
                "container \"{}\" in pod \"{}\" is waiting to start: ContainerCreating",
                q.container, q.pod
            )
        })?
        .filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str()?.strip_suffix(".log")?.parse().ok())
        .collect();
    runs.sort_unstable();
    let Some(&current) = runs.last() else {
        return Err(format!(
            "container \"{}\" in pod \"{}\" is waiting to start: ContainerCreating",
            q.container, q.pod
        ));
    };
    if q.previous {
        return runs
            .iter()
            .rev()
            .nth(1)
            .map(|n| dir.join(format!("{n}.log")))
            .ok_or_else(|| {
                format!(
                    "previous terminated container \"{}\" in pod \"{}\" not found",
                    q.container, q.pod
                )
            });
    }
    Ok(dir.join(format!("{current}.log")))
}

/// The last `n` lines of `bytes`.
pub fn tail(bytes: &[u8], n: usize) -> &[u8] {
    if n == 0 {
        return &[];
    }
    let end = if bytes.ends_with(b"\n") {
        bytes.len() - 1
    } else {
        bytes.len()
    };
    let mut seen = 0;
    for (i, b) in bytes[..end].iter().enumerate().rev() {
        if *b == b'\n' {
            seen += 1;
            if seen == n {
                return &bytes[i + 1..];
            }
        }
    }
    bytes
}

/// Answers a request for `target` (its head read by [`super::node_port`]) from the log files
/// under `root`.
pub async fn answer(
    mut stream: TcpStream,
    method: &str,
    target: &str,
    root: &Path,
) -> std::io::Result<()> {
    let reply = |code: u16, reason: &str, body: &str| {
        format!(
            "HTTP/1.0 {code} {reason}\r\nContent-Type: text/plain\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        )
    };
    if method != "GET" {
        stream
            .write_all(reply(405, "Method Not Allowed", "only GET").as_bytes())
            .await?;
        return Ok(());
    }
    let Some(q) = parse_target(target) else {
        stream
            .write_all(reply(404, "Not Found", "no such path").as_bytes())
            .await?;
        return Ok(());
    };
    let file = match find(root, &q) {
        Ok(f) => f,
        Err(message) => {
            stream
                .write_all(reply(400, "Bad Request", &message).as_bytes())
                .await?;
            return Ok(());
        }
    };
    stream
        .write_all(b"HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\n\r\n")
        .await?;
    let bytes = tokio::fs::read(&file).await.unwrap_or_default();
    let start = match q.tail_lines {
        Some(n) => bytes.len() - tail(&bytes, n).len(),
        None => 0,
    };
    stream.write_all(&bytes[start..]).await?;
    if !q.follow {
        return Ok(());
    }
    let mut offset = bytes.len() as u64;
    let mut done = PathBuf::from(&file);
    done.as_mut_os_string().push(".done");
    loop {
        let finished = done.exists();
        let mut f = tokio::fs::File::open(&file).await?;
        let len = f.metadata().await?.len();
        if len > offset {
            use tokio::io::AsyncSeekExt;
            f.seek(std::io::SeekFrom::Start(offset)).await?;
            let mut chunk = vec![0u8; usize::try_from(len - offset).unwrap_or(0).min(1 << 20)];
            let n = f.read(&mut chunk).await?;
            stream.write_all(&chunk[..n]).await?;
            offset += n as u64;
            continue;
        }
        if finished {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_and_tails() {
        let q =
            parse_target("/containerLogs/ns/p/c?previous=true&tailLines=2&follow=false").unwrap();
        assert_eq!(
            (q.namespace.as_str(), q.pod.as_str(), q.container.as_str()),
            ("ns", "p", "c")
        );
        assert!(q.previous && !q.follow);
        assert_eq!(q.tail_lines, Some(2));
        assert!(parse_target("/containerLogs/ns/p").is_none());
        assert!(parse_target("/containerLogs/../p/c").is_none());
        assert_eq!(tail(b"a\nb\nc\n", 2), b"b\nc\n");
        assert_eq!(tail(b"a\nb\nc", 5), b"a\nb\nc");
        assert_eq!(tail(b"a\nb\n", 0), b"");
    }

    #[test]
    fn current_and_previous_runs_are_found() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("ns_p_uid1/c");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("0.log"), "first\n").unwrap();
        let mut q = parse_target("/containerLogs/ns/p/c").unwrap();
        assert_eq!(find(root.path(), &q).unwrap(), dir.join("0.log"));
        q.previous = true;
        assert!(
            find(root.path(), &q)
                .unwrap_err()
                .contains("previous terminated container")
        );
        std::fs::write(dir.join("1.log"), "second\n").unwrap();
        assert_eq!(find(root.path(), &q).unwrap(), dir.join("0.log"));
        q.previous = false;
        assert_eq!(find(root.path(), &q).unwrap(), dir.join("1.log"));
        q.pod = "other".into();
        assert!(find(root.path(), &q).is_err());
    }
}
