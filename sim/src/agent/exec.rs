//! `exec` in a running container, as the kubelet serves it to the API server: a WebSocket with
//! the channel.k8s.io protocols (v5, v4) on the node's daemonEndpoints port at
//! `GET /exec/{namespace}/{pod}/{container}?command=..&command=..&stdin=&stdout=&stderr=`. The
//! command runs through `nsenter` in the container's network, mount and UTS namespaces and root,
//! with the container's environment; the container's pid is read from the `<restart>.pid` file
//! beside its log (so this, like the log server, reads files only). Every message is one channel
//! byte and data: 0 stdin, 1 stdout, 2 stderr, 3 the final `Status` (with the exit code as
//! cause when it is not 0), 4 resize (ignored); with v5, `255 <channel>` closes a channel (for
//! stdin: end of input for the command).

use std::path::Path;
use std::time::Duration;

use futures::{SinkExt, StreamExt};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::handshake::derive_accept_key;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::protocol::{CloseFrame, Role};

use super::logs::{LogQuery, find};

/// The subprotocols served, preferred first.
pub const PROTOCOLS: [&str; 2] = ["v5.channel.k8s.io", "v4.channel.k8s.io"];

const STDOUT: u8 = 1;
const STDERR: u8 = 2;
const ERROR: u8 = 3;
const CLOSE: u8 = 255;

/// What an exec request asks for.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct ExecQuery {
    pub namespace: String,
    pub pod: String,
    pub container: String,
    pub command: Vec<String>,
    pub stdin: bool,
    pub stdout: bool,
    pub stderr: bool,
}

/// Parses `/exec/{ns}/{pod}/{container}?...` (`command` repeated, flags `true`/`1`).
pub fn parse_target(target: &str) -> Option<ExecQuery> {
    let (namespace, pod, container, query) = super::container_path::parse(target, "/exec/")?;
    let mut q = ExecQuery {
        namespace: namespace.to_owned(),
        pod: pod.to_owned(),
        container: container.to_owned(),
        ..ExecQuery::default()
    };
    let yes = |v: &str| v.eq_ignore_ascii_case("true") || v == "1";
    for (key, value) in form_urlencoded::parse(query.as_bytes()) {
        match key.as_ref() {
            "command" => q.command.push(value.into_owned()),
            "stdin" => q.stdin = yes(&value),
            "stdout" => q.stdout = yes(&value),
            "stderr" => q.stderr = yes(&value),
            _ => {}
        }
    }
    Some(q)
}

/// The value of header `name` in a request head.
fn header<'a>(head: &'a str, name: &str) -> Option<&'a str> {
    head.lines().skip(1).find_map(|line| {
        let (key, value) = line.split_once(':')?;
        key.trim().eq_ignore_ascii_case(name).then(|| value.trim())
    })
}

/// The subprotocol to answer with: the first of the client's that is served.
pub fn choose_protocol(offered: &str) -> Option<&'static str> {
    offered
        .split(',')
        .map(str::trim)
        .find_map(|p| PROTOCOLS.iter().copied().find(|s| *s == p))
}

/// The final Status of the error channel for an exit code, as the kubelet writes it.
pub fn exit_status(command: &[String], code: i32) -> serde_json::Value {
    if code == 0 {
        return json!({"metadata": {}, "status": "Success"});
    }
    json!({
        "metadata": {},
        "status": "Failure",
        "message": format!(
            "command terminated with non-zero exit code: error executing command [{}], exit code {code}",
            command.join(" ")
        ),
        "reason": "NonZeroExitCode",
        "details": {"causes": [{"reason": "ExitCode", "message": code.to_string()}]},
    })
}

/// The pid of the running container `q` names, or why there is none.
fn running_pid(root: &Path, q: &ExecQuery) -> Result<u32, String> {
    let log = find(
        root,
        &LogQuery {
            namespace: q.namespace.clone(),
            pod: q.pod.clone(),
            container: q.container.clone(),
            ..LogQuery::default()
        },
    )?;
    let not_running = || {
        format!(
            "container not found (\"{}\"): container {} is not running",
            q.container, q.container
        )
    };
    let mut done = log.clone().into_os_string();
    done.push(".done");
    if Path::new(&done).exists() {
        return Err(not_running());
    }
    std::fs::read_to_string(log.with_extension("pid"))
        .ok()
        .and_then(|p| p.trim().parse().ok())
        .ok_or_else(not_running)
}

/// The environment of process `pid` (what the kubelet gives a command run in the container:
/// `kubectl exec` and exec probes).
pub(crate) fn environment(pid: u32) -> Vec<(String, String)> {
    std::fs::read(format!("/proc/{pid}/environ"))
        .unwrap_or_default()
        .split(|b| *b == 0)
        .filter_map(|pair| {
            let text = String::from_utf8_lossy(pair);
            let (k, v) = text.split_once('=')?;
            Some((k.to_owned(), v.to_owned()))
        })
        .collect()
}

/// Answers an exec request whose head (up to and with the blank line) is `head` and whose
/// further bytes already read are `rest`.
pub async fn answer(
    mut stream: TcpStream,
    head: &str,
    rest: Vec<u8>,
    target: &str,
    root: &Path,
) -> std::io::Result<()> {
    let refuse = |code: u16, message: &str| {
        format!(
            "HTTP/1.1 {code} Refused\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{message}",
            message.len()
        )
    };
    let Some(q) = parse_target(target).filter(|q| !q.command.is_empty()) else {
        let text = refuse(400, "an exec request names a container and a command");
        return stream.write_all(text.as_bytes()).await;
    };
    let (Some(key), Some(protocol)) = (
        header(head, "sec-websocket-key"),
        header(head, "sec-websocket-protocol").and_then(choose_protocol),
    ) else {
        let text = refuse(
            400,
            "exec needs a WebSocket upgrade with a channel.k8s.io protocol",
        );
        return stream.write_all(text.as_bytes()).await;
    };
    let pid = match running_pid(root, &q) {
        Ok(pid) => pid,
        Err(message) => return stream.write_all(refuse(400, &message).as_bytes()).await,
    };
    let accept = derive_accept_key(key.as_bytes());
    stream
        .write_all(
            format!(
                "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: {accept}\r\nSec-WebSocket-Protocol: {protocol}\r\n\r\n"
            )
            .as_bytes(),
        )
        .await?;
    let ws = WebSocketStream::from_partially_read(stream, rest, Role::Server, None).await;
    run(ws, pid, &q, protocol == PROTOCOLS[0]).await;
    Ok(())
}

fn frame(channel: u8, data: &[u8]) -> Message {
    let mut bytes = Vec::with_capacity(data.len() + 1);
    bytes.push(channel);
    bytes.extend_from_slice(data);
    Message::Binary(bytes.into())
}

/// Runs the command and moves the channels until it ended and its output was sent.
async fn run(ws: WebSocketStream<TcpStream>, pid: u32, q: &ExecQuery, v5: bool) {
    use std::process::Stdio;
    let (mut sink, mut source) = ws.split();
    let pipe = |on: bool| if on { Stdio::piped() } else { Stdio::null() };
    let mut command = tokio::process::Command::new("nsenter");
    command
        .arg("-t")
        .arg(pid.to_string())
        .args(["-n", "-m", "-u", "-r", "-w", "--"])
        .args(&q.command)
        .env_clear()
        .envs(environment(pid))
        .stdin(pipe(q.stdin))
        .stdout(pipe(q.stdout))
        .stderr(pipe(q.stderr))
        .kill_on_drop(true);
    let mut child = match command.spawn() {
        Ok(child) => child,
        Err(error) => {
            let status = json!({"metadata": {}, "status": "Failure", "reason": "InternalError",
                "message": format!("error executing command {:?}: {error}", q.command)});
            let _ = sink.send(frame(ERROR, status.to_string().as_bytes())).await;
            let _ = sink.close().await;
            return;
        }
    };
    let (tx, mut rx) = tokio::sync::mpsc::channel::<Message>(16);
    let writer = tokio::spawn(async move {
        while let Some(message) = rx.recv().await {
            if sink.send(message).await.is_err() {
                break;
            }
        }
        // A normal closure with its status code, as the kubelet ends the stream (clients
        // report a close without a code as an error).
        let normal = CloseFrame {
            code: CloseCode::Normal,
            reason: "".into(),
        };
        let _ = sink.send(Message::Close(Some(normal))).await;
        let _ = sink.close().await;
    });
    let mut readers = Vec::new();
    let outputs: [(u8, Option<Box<dyn tokio::io::AsyncRead + Send + Unpin>>); 2] = [
        (STDOUT, child.stdout.take().map(|o| Box::new(o) as _)),
        (STDERR, child.stderr.take().map(|o| Box::new(o) as _)),
    ];
    for (channel, output) in outputs {
        let Some(mut output) = output else { continue };
        let tx = tx.clone();
        readers.push(tokio::spawn(async move {
            let mut buf = vec![0u8; 16 * 1024];
            while let Ok(n) = output.read(&mut buf).await {
                if n == 0 || tx.send(frame(channel, &buf[..n])).await.is_err() {
                    break;
                }
            }
        }));
    }
    let mut stdin = child.stdin.take();
    let input = tokio::spawn(async move {
        while let Some(Ok(message)) = source.next().await {
            let data: Vec<u8> = match message {
                Message::Binary(b) => b.to_vec(),
                Message::Text(t) => t.as_bytes().to_vec(),
                Message::Close(_) => break,
                _ => continue,
            };
            match data.split_first() {
                Some((0, bytes)) => {
                    if let Some(input) = stdin.as_mut()
                        && input.write_all(bytes).await.is_err()
                    {
                        stdin = None;
                    }
                }
                Some((&CLOSE, [0, ..])) if v5 => stdin = None,
                _ => {}
            }
        }
    });
    let code = match child.wait().await {
        Ok(status) => {
            use std::os::unix::process::ExitStatusExt;
            status
                .code()
                .or_else(|| status.signal().map(|s| 128 + s))
                .unwrap_or(255)
        }
        Err(_) => 255,
    };
    for reader in readers {
        // Output a process left running in the background keeps open is not waited for.
        let _ = tokio::time::timeout(Duration::from_secs(2), reader).await;
    }
    let status = exit_status(&q.command, code);
    let _ = tx.send(frame(ERROR, status.to_string().as_bytes())).await;
    drop(tx);
    let _ = writer.await;
    input.abort();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_exec_target_gives_its_command_and_channels() {
        let q = parse_target(
            "/exec/ns/p/c?command=%2Fbin%2Fsh&command=-c&command=exit+3&stdin=false&stdout=True&stderr=1",
        )
        .unwrap();
        assert_eq!(q.command, ["/bin/sh", "-c", "exit 3"]);
        assert!(!q.stdin && q.stdout && q.stderr);
        assert_eq!(
            (q.namespace.as_str(), q.pod.as_str(), q.container.as_str()),
            ("ns", "p", "c")
        );
        assert!(parse_target("/exec/ns/p").is_none());
        assert!(parse_target("/exec/../p/c?command=x").is_none());
    }

    #[test]
    fn the_protocol_is_the_first_offered_that_is_served() {
        assert_eq!(
            choose_protocol("v5.channel.k8s.io, v4.channel.k8s.io"),
            Some("v5.channel.k8s.io")
        );
        assert_eq!(
            choose_protocol("channel.k8s.io,v4.channel.k8s.io"),
            Some("v4.channel.k8s.io")
        );
        assert_eq!(choose_protocol("SPDY/3.1"), None);
    }

    #[test]
    fn a_non_zero_exit_is_the_kubelets_status_with_the_code_as_cause() {
        assert_eq!(exit_status(&[], 0)["status"], "Success");
        let failed = exit_status(&["sh".to_owned(), "-c".to_owned(), "exit 3".to_owned()], 3);
        assert_eq!(failed["reason"], "NonZeroExitCode");
        assert_eq!(failed["details"]["causes"][0]["message"], "3");
        assert_eq!(
            failed["message"],
            "command terminated with non-zero exit code: error executing command [sh -c exit 3], exit code 3"
        );
    }
}
