//! Helpers of the endpoint and run tests: a minimal HTTP/1.1 GET client, an OpenMetrics text
//! checker, a lock coordinator on its own actix thread, polling, and the sample Secret values.

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// One HTTP answer.
#[derive(Debug)]
pub struct Answer {
    pub status: u16,
    pub headers: BTreeMap<String, String>,
    pub body: String,
}

/// `GET path` on `addr` (HTTP/1.1, Connection: close).
pub async fn get(addr: SocketAddr, path: &str) -> Answer {
    let mut stream = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let request = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    stream
        .write_all(request.as_bytes())
        .await
        .expect("write request");
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).await.expect("read answer");
    let text = String::from_utf8(raw).expect("utf-8 answer");
    let (head, body) = text.split_once("\r\n\r\n").expect("header/body separator");
    let mut lines = head.split("\r\n");
    let status = lines
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|s| s.parse().ok())
        .expect("status line");
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    Answer {
        status,
        headers,
        body: body.to_string(),
    }
}

/// `GET path` parsed as JSON (asserting status 200).
pub async fn get_json(addr: SocketAddr, path: &str) -> serde_json::Value {
    let a = get(addr, path).await;
    assert_eq!(a.status, 200, "GET {path}: {}", a.body);
    serde_json::from_str(&a.body).expect("JSON body")
}

/// Polls `check` every 100 ms for up to 60 s.
pub async fn eventually<F, Fut>(what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    for _ in 0..600 {
        if check().await {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("timed out waiting for: {what}");
}

/// An embedded cluster with the operator's CRDs installed, and an admin client of it.
pub async fn cluster_with_crds() -> (cinder_sim::EmbeddedCluster, kube::Client) {
    let cluster = cinder_sim::EmbeddedCluster::start(cinder_sim::ClusterConfig::default())
        .await
        .expect("embedded cluster starts");
    let client = cluster.client().await;
    cinder_operator::embedded::install_crds(&client)
        .await
        .expect("CRDs install");
    (cluster, client)
}

/// Starts a lock coordinator (standard schema) on its own actix system thread.
pub fn coordinator() -> cinder_actors::CoordinatorHandle {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let system = actix::System::new();
        system.block_on(async move {
            let _ = tx.send(cinder_actors::CoordinatorHandle::start_standard());
            std::future::pending::<()>().await;
        });
    });
    rx.recv().expect("coordinator thread starts")
}

/// The repository's `deploy/samples`.
pub fn samples_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join("deploy")
        .join("samples")
}

/// Every secret value `run --embedded` brings: the values of the Secrets among the samples
/// (`stringData`) and those of the fake secret store of its fixtures (each property of a JSON
/// value, or the value).
pub fn sample_secret_values() -> Vec<String> {
    let manifests =
        cinder_operator::embedded::read_bootstrap(&samples_dir()).expect("samples parse");
    let mut values = Vec::new();
    for m in manifests.iter().filter(|m| m.gvk.kind == "Secret") {
        if let Some(map) = m.object.data.get("stringData").and_then(|d| d.as_object()) {
            values.extend(map.values().filter_map(|v| v.as_str()).map(str::to_string));
        }
        assert!(
            m.object.data.get("data").is_none(),
            "samples use stringData only"
        );
    }
    for m in manifests
        .iter()
        .filter(|m| m.gvk.kind.ends_with("SecretStore"))
    {
        let data = &m.object.data["spec"]["provider"]["fake"]["data"];
        for value in data
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|e| e["value"].as_str())
        {
            match serde_json::from_str::<serde_json::Value>(value) {
                Ok(serde_json::Value::Object(props)) => values.extend(
                    props
                        .values()
                        .filter_map(|v| v.as_str())
                        .map(str::to_string),
                ),
                _ => values.push(value.to_string()),
            }
        }
    }
    assert!(
        values.len() >= 4,
        "the samples carry secret values: {values:?}"
    );
    values
}

/// Asserts none of `secrets` appears in `text`.
pub fn assert_no_secret(what: &str, text: &str, secrets: &[String]) {
    for s in secrets {
        // Short values (a port, a user name) are not secret material.
        if s.len() >= 8 && s != "rabbitmq.openstack.svc" {
            assert!(
                !text.contains(s.as_str()),
                "{what} shows the secret value {s:?}"
            );
        }
    }
}

/// One sample: metric name, labels, value.
pub type Sample = (String, BTreeMap<String, String>, f64);

/// Checks OpenMetrics text: ends with `# EOF`, every family has one TYPE before its samples,
/// sample names belong to a declared family, label sets are well formed, values parse.
/// Returns the samples as (name, labels, value).
pub fn parse_openmetrics(text: &str) -> Result<Vec<Sample>, String> {
    if !text.ends_with("# EOF\n") && !text.ends_with("# EOF") {
        return Err("does not end with # EOF".into());
    }
    let mut types: BTreeMap<String, String> = BTreeMap::new();
    let mut seen_samples_of: BTreeSet<String> = BTreeSet::new();
    let mut samples = Vec::new();
    let lines: Vec<&str> = text.trim_end_matches('\n').lines().collect();
    for (i, line) in lines.iter().enumerate() {
        if *line == "# EOF" {
            if i + 1 != lines.len() {
                return Err(format!("# EOF before the end (line {i})"));
            }
            continue;
        }
        if let Some(rest) = line.strip_prefix("# ") {
            let mut parts = rest.splitn(3, ' ');
            let keyword = parts.next().unwrap_or_default();
            let family = parts.next().ok_or(format!("line {i}: no family: {line}"))?;
            match keyword {
                "TYPE" => {
                    let t = parts.next().ok_or(format!("line {i}: no type"))?;
                    if ![
                        "counter",
                        "gauge",
                        "histogram",
                        "summary",
                        "info",
                        "stateset",
                        "gaugehistogram",
                        "unknown",
                    ]
                    .contains(&t)
                    {
                        return Err(format!("line {i}: unknown type {t}"));
                    }
                    if types.insert(family.to_string(), t.to_string()).is_some() {
                        return Err(format!("line {i}: family {family} typed twice"));
                    }
                    if seen_samples_of.contains(family) {
                        return Err(format!("line {i}: TYPE of {family} after its samples"));
                    }
                }
                "HELP" | "UNIT" => {}
                other => return Err(format!("line {i}: unknown keyword {other}")),
            }
            continue;
        }
        let (name_labels, value) = line
            .rsplit_once(' ')
            .ok_or(format!("line {i}: no value: {line}"))?;
        let value: f64 = match value {
            "+Inf" => f64::INFINITY,
            "-Inf" => f64::NEG_INFINITY,
            v => v.parse().map_err(|_| format!("line {i}: bad value {v}"))?,
        };
        let (name, labels) = match name_labels.split_once('{') {
            None => (name_labels.to_string(), BTreeMap::new()),
            Some((n, rest)) => {
                let body = rest
                    .strip_suffix('}')
                    .ok_or(format!("line {i}: unclosed labels"))?;
                let mut labels = BTreeMap::new();
                let mut rest = body;
                while !rest.is_empty() {
                    let (k, after) = rest
                        .split_once("=\"")
                        .ok_or(format!("line {i}: bad label in {body}"))?;
                    let end = after
                        .find('"')
                        .ok_or(format!("line {i}: unterminated label value"))?;
                    labels.insert(k.to_string(), after[..end].to_string());
                    rest = after[end + 1..]
                        .strip_prefix(',')
                        .unwrap_or(&after[end + 1..]);
                }
                (n.to_string(), labels)
            }
        };
        if !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
        {
            return Err(format!("line {i}: bad metric name {name}"));
        }
        let family = types
            .keys()
            .filter(|f| {
                name == **f
                    || ["_total", "_bucket", "_count", "_sum", "_created", "_info"]
                        .iter()
                        .any(|s| name == format!("{f}{s}"))
            })
            .max_by_key(|f| f.len())
            .ok_or(format!("line {i}: sample {name} of no declared family"))?;
        seen_samples_of.insert(family.clone());
        samples.push((name, labels, value));
    }
    Ok(samples)
}
