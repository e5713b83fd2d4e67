//! Probes and lifecycle hooks run for real, as the kubelet runs them: httpGet and tcpSocket
//! from the host against the pod's IP, exec inside the container's namespaces (`nsenter` into
//! its network, mount and UTS namespaces and root) with the container's environment, as a
//! kubelet's exec probe gets it. Each answers success or the kubelet's failure
//! message; timings (initialDelaySeconds, periodSeconds, timeoutSeconds, thresholds) are read
//! by [`Timing`].

use std::net::Ipv4Addr;
use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// A probe's timings with the Kubernetes defaults.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Timing {
    pub initial_delay: Duration,
    pub period: Duration,
    pub timeout: Duration,
    pub success_threshold: u32,
    pub failure_threshold: u32,
}

impl Timing {
    pub fn of(probe: &Value) -> Timing {
        let seconds =
            |key: &str, default: u64| Duration::from_secs(probe[key].as_u64().unwrap_or(default));
        let count = |key: &str, default: u32| {
            probe[key]
                .as_u64()
                .and_then(|n| u32::try_from(n).ok())
                .filter(|n| *n > 0)
                .unwrap_or(default)
        };
        Timing {
            initial_delay: seconds("initialDelaySeconds", 0),
            period: seconds("periodSeconds", 10).max(Duration::from_secs(1)),
            timeout: seconds("timeoutSeconds", 1).max(Duration::from_secs(1)),
            success_threshold: count("successThreshold", 1),
            failure_threshold: count("failureThreshold", 3),
        }
    }
}

/// A named or numbered port of `container`.
fn port_of(port: &Value, container: &Value) -> Result<u16, String> {
    match port {
        Value::Number(n) => n
            .as_u64()
            .and_then(|n| u16::try_from(n).ok())
            .ok_or_else(|| format!("invalid port {n}")),
        Value::String(name) => {
            if let Ok(n) = name.parse::<u16>() {
                return Ok(n);
            }
            container
                .get("ports")
                .and_then(Value::as_array)
                .and_then(|ps| ps.iter().find(|p| p["name"] == name.as_str()))
                .and_then(|p| p["containerPort"].as_u64())
                .and_then(|n| u16::try_from(n).ok())
                .ok_or_else(|| format!("port \"{name}\" not found in the container's ports"))
        }
        _ => Err("probe has no port".to_owned()),
    }
}

/// Runs one probe or hook handler (`httpGet`, `tcpSocket` or `exec`); Err is the failure
/// message the kubelet puts after "Readiness probe failed: ".
pub async fn run(
    handler: &Value,
    container: &Value,
    pod_ip: Ipv4Addr,
    pid: Option<u32>,
    timeout: Duration,
) -> Result<(), String> {
    if let Some(http) = handler.get("httpGet") {
        let port = port_of(&http["port"], container)?;
        let host = http["host"].as_str().unwrap_or_default();
        let host = if host.is_empty() {
            pod_ip.to_string()
        } else {
            host.to_owned()
        };
        let path = http["path"].as_str().unwrap_or("/");
        let scheme = http["scheme"].as_str().unwrap_or("HTTP").to_lowercase();
        let url = format!("{scheme}://{host}:{port}{path}");
        if scheme != "http" {
            return Err(format!(
                "Get \"{url}\": HTTPS probes are not supported by the process runtime"
            ));
        }
        let mut headers = String::new();
        for h in http
            .get("httpHeaders")
            .and_then(Value::as_array)
            .map_or(&[][..], Vec::as_slice)
        {
            headers.push_str(&format!(
                "{}: {}\r\n",
                h["name"].as_str().unwrap_or_default(),
                h["value"].as_str().unwrap_or_default()
            ));
        }
        let request = format!(
            "GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\nUser-Agent: kube-probe/1.32\r\nAccept: */*\r\n{headers}Connection: close\r\n\r\n"
        );
        let address = format!("{host}:{port}");
        let answer = tokio::time::timeout(timeout, async {
            let mut stream = tokio::net::TcpStream::connect(&address)
                .await
                .map_err(|e| format!("Get \"{url}\": dial tcp {address}: connect: {}", short(&e)))?;
            stream
                .write_all(request.as_bytes())
                .await
                .map_err(|e| format!("Get \"{url}\": {e}"))?;
            let mut head = vec![0u8; 64];
            let n = stream
                .read(&mut head)
                .await
                .map_err(|e| format!("Get \"{url}\": {e}"))?;
            let line = String::from_utf8_lossy(&head[..n]).into_owned();
            line.split_whitespace()
                .nth(1)
                .and_then(|c| c.parse::<u16>().ok())
                .ok_or_else(|| format!("Get \"{url}\": malformed HTTP response"))
        })
        .await
        .map_err(|_| {
            format!("Get \"{url}\": context deadline exceeded (Client.Timeout exceeded while awaiting headers)")
        })??;
        return if (200..400).contains(&answer) {
            Ok(())
        } else {
            Err(format!("HTTP probe failed with statuscode: {answer}"))
        };
    }
    if let Some(tcp) = handler.get("tcpSocket") {
        let port = port_of(&tcp["port"], container)?;
        let host = tcp["host"]
            .as_str()
            .filter(|h| !h.is_empty())
            .map_or_else(|| pod_ip.to_string(), str::to_owned);
        let address = format!("{host}:{port}");
        return match tokio::time::timeout(timeout, tokio::net::TcpStream::connect(&address)).await {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(e)) => Err(format!("dial tcp {address}: connect: {}", short(&e))),
            Err(_) => Err(format!("dial tcp {address}: i/o timeout")),
        };
    }
    if let Some(exec) = handler.get("exec") {
        let command: Vec<String> = exec
            .get("command")
            .and_then(Value::as_array)
            .map(|c| {
                c.iter()
                    .filter_map(|s| s.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default();
        let Some(pid) = pid else {
            return Err("container is not running".to_owned());
        };
        if command.is_empty() {
            return Err("exec probe has no command".to_owned());
        }
        let mut child = tokio::process::Command::new("nsenter");
        child
            .arg("-t")
            .arg(pid.to_string())
            .args(["-n", "-m", "-u", "-r", "-w", "--"])
            .args(&command)
            .env_clear()
            // `pid` is the container's keeper; its first child is the container's process,
            // whose environment a command run in the container gets (as `kubectl exec` does).
            .envs(super::exec::environment(super::sandbox::container_init(
                pid,
            )))
            .stdin(std::process::Stdio::null())
            .kill_on_drop(true);
        let output = tokio::time::timeout(timeout, child.output()).await;
        return match output {
            Err(_) => Err(format!("command {command:?} timed out")),
            Ok(Err(e)) => Err(e.to_string()),
            Ok(Ok(out)) if out.status.success() => Ok(()),
            Ok(Ok(out)) => {
                // The kubelet reports an exec probe's combined output.
                let text = format!(
                    "{}{}",
                    String::from_utf8_lossy(&out.stdout),
                    String::from_utf8_lossy(&out.stderr)
                )
                .trim()
                .to_owned();
                Err(if text.is_empty() {
                    format!(
                        "command {command:?} exited with {}",
                        out.status.code().unwrap_or(-1)
                    )
                } else {
                    text
                })
            }
        };
    }
    Err("the process runtime supports httpGet, tcpSocket and exec handlers".to_owned())
}

fn short(error: &std::io::Error) -> String {
    match error.kind() {
        std::io::ErrorKind::ConnectionRefused => "connection refused".to_owned(),
        _ => error.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn timings_default_like_kubernetes() {
        let t = Timing::of(&json!({}));
        assert_eq!(t.period, Duration::from_secs(10));
        assert_eq!(t.timeout, Duration::from_secs(1));
        assert_eq!((t.success_threshold, t.failure_threshold), (1, 3));
        let t = Timing::of(
            &json!({"initialDelaySeconds": 2, "periodSeconds": 1, "failureThreshold": 1}),
        );
        assert_eq!(
            (t.initial_delay, t.failure_threshold),
            (Duration::from_secs(2), 1)
        );
        let c = json!({"ports": [{"name": "http", "containerPort": 8080}]});
        assert_eq!(port_of(&json!("http"), &c), Ok(8080));
        assert_eq!(port_of(&json!(81), &c), Ok(81));
        assert!(port_of(&json!("nope"), &c).is_err());
    }

    #[tokio::test]
    async fn tcp_and_http_probes_answer_like_the_kubelet() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        tokio::spawn(async move {
            while let Ok((mut s, _)) = listener.accept().await {
                let mut buf = [0u8; 512];
                let n = s.read(&mut buf).await.unwrap_or(0);
                let req = String::from_utf8_lossy(&buf[..n]).into_owned();
                let code = if req.starts_with("GET /ok ") {
                    200
                } else {
                    503
                };
                let _ = s
                    .write_all(format!("HTTP/1.1 {code} X\r\nContent-Length: 0\r\n\r\n").as_bytes())
                    .await;
            }
        });
        let ip = Ipv4Addr::LOCALHOST;
        let t = Duration::from_secs(1);
        let c = json!({});
        assert_eq!(
            run(&json!({"tcpSocket": {"port": port}}), &c, ip, None, t).await,
            Ok(())
        );
        assert_eq!(
            run(
                &json!({"httpGet": {"port": port, "path": "/ok"}}),
                &c,
                ip,
                None,
                t
            )
            .await,
            Ok(())
        );
        assert_eq!(
            run(
                &json!({"httpGet": {"port": port, "path": "/bad"}}),
                &c,
                ip,
                None,
                t
            )
            .await,
            Err("HTTP probe failed with statuscode: 503".to_owned())
        );
        let closed = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let refused = run(&json!({"tcpSocket": {"port": closed}}), &c, ip, None, t)
            .await
            .unwrap_err();
        assert!(refused.ends_with("connection refused"), "{refused}");
    }
}
