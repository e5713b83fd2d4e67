//! `kubectl apply -k deploy/` on the embedded cluster without the prometheus-operator CRDs exits
//! 0 and creates the operator Deployment (and the Service keeps its prometheus.io scrape
//! annotations); after the ServiceMonitor and PrometheusRule CRDs are installed,
//! `kubectl apply -k deploy/monitoring` exits 0 and creates both objects (and the binding that
//! lets Prometheus read the HTTPS `/metrics`).

use cinder_e2e::deploy_helpers::{deploy_dir, kustomize};
use cinder_e2e::eventually;
use cinder_e2e::observability_helpers::{on_path, run, test_telemetry};
use cinder_sim::{ClusterConfig, EmbeddedCluster};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Api;
use kube::api::{ApiResource, DynamicObject, ListParams, PostParams};

const MONITORING_NS: &str = "cinder-system";

/// A minimal CRD of prometheus-operator's kind `kind` (plural `plural`) with an open schema.
fn monitoring_crd(kind: &str, plural: &str) -> CustomResourceDefinition {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("{plural}.monitoring.coreos.com")},
        "spec": {
            "group": "monitoring.coreos.com",
            "scope": "Namespaced",
            "names": {"plural": plural, "singular": kind.to_lowercase(), "kind": kind, "listKind": format!("{kind}List")},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]
        }
    }))
    .expect("a valid CRD")
}

fn monitoring_api(client: &kube::Client, kind: &str, plural: &str) -> Api<DynamicObject> {
    let ar = ApiResource::from_gvk_with_plural(
        &kube::core::GroupVersionKind::gvk("monitoring.coreos.com", "v1", kind),
        plural,
    );
    Api::namespaced_with(client.clone(), MONITORING_NS, &ar)
}

#[test]
fn deploy_holds_no_monitoring_kind_and_monitoring_holds_both() {
    let plain = kustomize(&deploy_dir()).unwrap();
    for m in &plain {
        assert_ne!(
            m.gvk.group,
            "monitoring.coreos.com",
            "{} in deploy/ needs the prometheus-operator CRDs",
            m.describe()
        );
    }
    let service = plain.iter().find(|m| m.gvk.kind == "Service").unwrap();
    let annotations = service
        .object
        .metadata
        .annotations
        .clone()
        .unwrap_or_default();
    assert_eq!(
        annotations.get("prometheus.io/scrape").map(String::as_str),
        Some("true")
    );
    assert_eq!(
        annotations.get("prometheus.io/port").map(String::as_str),
        Some("8443")
    );
    assert_eq!(
        annotations.get("prometheus.io/scheme").map(String::as_str),
        Some("https")
    );
    let monitoring = kustomize(&deploy_dir().join("monitoring")).unwrap();
    let kinds: Vec<&str> = monitoring.iter().map(|m| m.gvk.kind.as_str()).collect();
    assert_eq!(
        kinds,
        vec!["ServiceMonitor", "ClusterRoleBinding", "PrometheusRule"]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_applies_deploy_without_the_monitoring_crds() {
    test_telemetry();
    let Some(kubectl) = on_path("kubectl") else {
        println!("SKIPPED kubectl_applies_deploy_without_the_monitoring_crds: no kubectl on PATH");
        return;
    };
    let cluster = EmbeddedCluster::start(ClusterConfig::default())
        .await
        .unwrap();
    let kubeconfig = cluster.kubeconfig_path().display().to_string();
    let env = [("KUBECONFIG", kubeconfig.as_str())];
    let deploy = deploy_dir().display().to_string();
    let apply = |dir: String| {
        let kubectl = kubectl.clone();
        let env = env.map(|(k, v)| (k, v.to_string()));
        tokio::task::spawn_blocking(move || {
            let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
            run(
                &kubectl,
                &["apply", "--server-side=false", "-k", &dir],
                &env,
            )
        })
    };

    let out = apply(deploy.clone()).await.unwrap().unwrap();
    assert!(
        out.status.success(),
        "kubectl apply -k deploy/ exited {:?}:\n{}\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let client = cluster.client().await;
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), MONITORING_NS);
    assert!(
        deployments
            .get_opt("cinder-operator")
            .await
            .unwrap()
            .is_some()
    );
    let services: Api<Service> = Api::namespaced(client.clone(), MONITORING_NS);
    let service = services.get("cinder-operator-metrics").await.unwrap();
    let annotations = service.metadata.annotations.unwrap_or_default();
    assert_eq!(
        annotations.get("prometheus.io/scrape").map(String::as_str),
        Some("true")
    );

    // Without the CRDs the monitoring overlay is refused (so the plain install is what made the
    // difference above), and with them it applies.
    let refused = apply(format!("{deploy}/monitoring"))
        .await
        .unwrap()
        .unwrap();
    assert!(
        !refused.status.success(),
        "deploy/monitoring applied without its CRDs"
    );
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    for (kind, plural) in [
        ("ServiceMonitor", "servicemonitors"),
        ("PrometheusRule", "prometheusrules"),
    ] {
        crds.create(&PostParams::default(), &monitoring_crd(kind, plural))
            .await
            .unwrap();
        let api = monitoring_api(&client, kind, plural);
        eventually(&format!("{plural} are served"), || {
            let api = api.clone();
            async move { api.list(&ListParams::default()).await.ok().map(|_| ()) }
        })
        .await
        .unwrap();
    }
    let out = apply(format!("{deploy}/monitoring"))
        .await
        .unwrap()
        .unwrap();
    assert!(
        out.status.success(),
        "kubectl apply -k deploy/monitoring exited {:?}:\n{}\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    for (kind, plural) in [
        ("ServiceMonitor", "servicemonitors"),
        ("PrometheusRule", "prometheusrules"),
    ] {
        let api = monitoring_api(&client, kind, plural);
        assert!(
            api.get_opt("cinder-operator").await.unwrap().is_some(),
            "{kind} cinder-operator"
        );
    }
    cluster.shutdown().await;
}
