//! The operator's NetworkPolicy lets its traces out exactly when tracing is configured: deploy/
//! as shipped sets no `--otlp-endpoint` and opens no OTLP port, and an overlay with
//! deploy/components/tracing (rendered by the real `kubectl kustomize`, from a folder outside
//! deploy/ as a user's overlay is) sets `--otlp-endpoint` and opens that endpoint's port to TCP
//! egress.

use cinder_e2e::deploy_helpers::deploy_dir;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::networking::v1::NetworkPolicy;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use serde::Deserialize as _;
use std::path::Path;

/// The Deployment and the NetworkPolicy `kubectl kustomize dir` renders.
fn render(dir: &Path) -> (Deployment, NetworkPolicy) {
    let out = std::process::Command::new("kubectl")
        .arg("kustomize")
        .arg(dir)
        .output()
        .expect("kubectl runs (.ci/run installs it)");
    assert!(
        out.status.success(),
        "kubectl kustomize {}: {}",
        dir.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let (mut deployment, mut policy) = (None, None);
    for doc in serde_norway::Deserializer::from_str(&text) {
        let value = serde_json::to_value(serde_norway::Value::deserialize(doc).unwrap()).unwrap();
        match value["kind"].as_str() {
            Some("Deployment") if value["metadata"]["name"] == "cinder-operator" => {
                deployment = Some(serde_json::from_value(value).unwrap())
            }
            Some("NetworkPolicy") if value["metadata"]["name"] == "cinder-operator" => {
                policy = Some(serde_json::from_value(value).unwrap())
            }
            _ => {}
        }
    }
    (
        deployment.expect("the operator's Deployment"),
        policy.expect("the operator's NetworkPolicy"),
    )
}

/// The port of the operator's `--otlp-endpoint`, if it has one (4317 when the URL names none).
fn otlp_port(deployment: &Deployment) -> Option<i32> {
    let value = serde_json::to_value(deployment).ok()?;
    let args: Vec<String> = serde_json::from_value(
        value
            .pointer("/spec/template/spec/containers/0/args")?
            .clone(),
    )
    .ok()?;
    let url = args.iter().enumerate().find_map(|(i, a)| {
        a.strip_prefix("--otlp-endpoint=")
            .map(str::to_string)
            .or_else(|| {
                (a == "--otlp-endpoint")
                    .then(|| args.get(i + 1).cloned())
                    .flatten()
            })
    })?;
    let authority = url.split("://").nth(1)?.split('/').next()?;
    Some(
        authority
            .rsplit_once(':')
            .and_then(|(_, p)| p.parse().ok())
            .unwrap_or(4317),
    )
}

/// The TCP ports the policy lets out (numbered ports only; egress goes to collectors, not to
/// the operator's named container ports).
fn egress_tcp_ports(policy: &NetworkPolicy) -> Vec<i32> {
    policy
        .spec
        .as_ref()
        .and_then(|s| s.egress.clone())
        .unwrap_or_default()
        .iter()
        .flat_map(|rule| rule.ports.clone().unwrap_or_default())
        .filter(|p| p.protocol.as_deref().unwrap_or("TCP") == "TCP")
        .filter_map(|p| match p.port {
            Some(IntOrString::Int(n)) => Some(n),
            _ => None,
        })
        .collect()
}

#[test]
fn deploy_opens_no_otlp_port_without_tracing() {
    let (deployment, policy) = render(&deploy_dir());
    assert_eq!(otlp_port(&deployment), None);
    assert!(
        !egress_tcp_ports(&policy).contains(&4317),
        "{:?}",
        egress_tcp_ports(&policy)
    );
}

#[test]
fn the_tracing_component_opens_the_otlp_endpoints_port() {
    let overlay = tempfile::tempdir().unwrap();
    let deploy = deploy_dir().canonicalize().unwrap();
    // kustomize takes relative paths only, and no overlay inside the folder it builds on.
    let up = "../".repeat(overlay.path().components().count() - 1);
    let rel = format!(
        "{up}{}",
        deploy.display().to_string().trim_start_matches('/')
    );
    std::fs::write(
        overlay.path().join("kustomization.yaml"),
        format!(
            "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n\
             resources: [{rel}]\ncomponents: [{rel}/components/tracing]\n"
        ),
    )
    .unwrap();
    let (deployment, policy) = render(overlay.path());
    let port = otlp_port(&deployment).expect("the component sets --otlp-endpoint");
    let open = egress_tcp_ports(&policy);
    assert!(
        open.contains(&port),
        "--otlp-endpoint's port {port} is not let out by the NetworkPolicy (egress TCP {open:?})"
    );
    // The rest of the policy is deploy/'s: DNS and the API server stay open.
    for kept in [53, 443, 6443] {
        assert!(open.contains(&kept), "{kept} in {open:?}");
    }
}
