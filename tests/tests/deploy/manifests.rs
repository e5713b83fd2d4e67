//! deploy/ on the embedded cluster: every manifest `kubectl apply -k deploy/` would send is
//! accepted by a server-side dry run and then created for real (with a minimal
//! monitoring.coreos.com CRD registered, which deploy/ must not need); the Deployment is hardened
//! (non-root, read-only root filesystem, RuntimeDefault seccomp, resource requests) and wired
//! (health and readiness probes, secure metrics, leader election); the Service and the
//! ServiceMonitor of deploy/monitoring agree on the metrics port.

use cinder_e2e::deploy_helpers::*;
use cinder_e2e::eventually;
use cinder_sim::{ClusterConfig, EmbeddedCluster};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::discovery::Scope;

/// The part of prometheus-operator's ServiceMonitor CRD the test needs: the kind, served and
/// stored as v1, with an open schema.
fn service_monitor_crd() -> CustomResourceDefinition {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "servicemonitors.monitoring.coreos.com"},
        "spec": {
            "group": "monitoring.coreos.com",
            "scope": "Namespaced",
            "names": {"plural": "servicemonitors", "singular": "servicemonitor", "kind": "ServiceMonitor", "listKind": "ServiceMonitorList"},
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}
            }]
        }
    }))
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_manifest_is_accepted_by_the_embedded_cluster() {
    let manifests = deploy_manifests().unwrap();
    assert!(!manifests.is_empty());
    let cluster = EmbeddedCluster::start(ClusterConfig::default())
        .await
        .unwrap();
    let client = cluster.client().await;
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    crds.create(&PostParams::default(), &service_monitor_crd())
        .await
        .unwrap();
    let ar = kube::api::ApiResource::from_gvk_with_plural(
        &kube::core::GroupVersionKind::gvk("monitoring.coreos.com", "v1", "ServiceMonitor"),
        "servicemonitors",
    );
    let monitors: Api<DynamicObject> = Api::all_with(client.clone(), &ar);
    eventually("servicemonitors are served", || {
        let monitors = monitors.clone();
        async move { monitors.list(&ListParams::default()).await.ok().map(|_| ()) }
    })
    .await
    .unwrap();

    let dry_run = PatchParams::apply("cinder-e2e-deploy").dry_run();
    let apply = PatchParams::apply("cinder-e2e-deploy");
    for m in &manifests {
        let what = format!("{} from {}", m.describe(), m.path.display());
        let (resource, caps) = eventually(&format!("discovery of {what}"), || {
            let client = client.clone();
            let gvk = m.gvk.clone();
            async move { kube::discovery::pinned_kind(&client, &gvk).await.ok() }
        })
        .await
        .unwrap();
        let api: Api<DynamicObject> = match caps.scope {
            Scope::Namespaced => {
                let ns = m.object.metadata.namespace.as_deref();
                assert!(
                    ns.is_some(),
                    "{what}: a namespaced object names its namespace"
                );
                Api::namespaced_with(client.clone(), ns.unwrap_or_default(), &resource)
            }
            Scope::Cluster => Api::all_with(client.clone(), &resource),
        };
        let name = m.object.metadata.name.clone().unwrap_or_default();
        if let Err(e) = api.patch(&name, &dry_run, &Patch::Apply(&m.object)).await {
            panic!("{what}: refused by the dry run: {e}");
        }
        assert!(
            api.get_opt(&name).await.unwrap().is_none(),
            "{what}: the dry run stored the object"
        );
        if let Err(e) = api.patch(&name, &apply, &Patch::Apply(&m.object)).await {
            panic!("{what}: refused when created: {e}");
        }
        assert!(api.get_opt(&name).await.unwrap().is_some(), "{what}");
    }
    cluster.shutdown().await;
}

#[test]
fn deploy_holds_every_kind_an_installation_needs() {
    let manifests = deploy_manifests().unwrap();
    for kind in [
        "CustomResourceDefinition",
        "Namespace",
        "ServiceAccount",
        "ClusterRole",
        "ClusterRoleBinding",
        "Role",
        "RoleBinding",
        "Deployment",
        "Service",
        "NetworkPolicy",
    ] {
        assert!(
            !of_kind(&manifests, kind).is_empty(),
            "no {kind} in deploy/"
        );
    }
    let crds: Vec<String> = of_kind(&manifests, "CustomResourceDefinition")
        .iter()
        .filter_map(|m| m.object.metadata.name.clone())
        .collect();
    for crd in cinder_operator::crd::crds() {
        let name = crd.metadata.name.unwrap();
        assert!(crds.contains(&name), "{name} missing from deploy/");
    }
    let monitoring = kustomize(&deploy_dir().join("monitoring")).unwrap();
    let monitor = of_kind(&monitoring, "ServiceMonitor")[0];
    assert_eq!(monitor.gvk.group, "monitoring.coreos.com");
    assert_eq!(monitor.gvk.version, "v1");
}

#[test]
fn the_deployment_is_hardened_and_wired() {
    let manifests = deploy_manifests().unwrap();
    let deployments = of_kind(&manifests, "Deployment");
    assert_eq!(deployments.len(), 1);
    let d: Deployment = typed(deployments[0]).unwrap();
    let pod = d.spec.template.spec.unwrap();
    let pod_sc = pod.security_context.unwrap();
    assert_eq!(pod_sc.run_as_non_root, Some(true));
    assert_eq!(pod_sc.seccomp_profile.unwrap().type_, "RuntimeDefault");
    let accounts = of_kind(&manifests, "ServiceAccount");
    assert_eq!(
        pod.service_account_name.as_deref(),
        accounts[0].object.metadata.name.as_deref()
    );
    assert_eq!(pod.containers.len(), 1);
    let c = &pod.containers[0];
    let sc = c.security_context.clone().unwrap();
    assert_eq!(sc.run_as_non_root, Some(true));
    assert_eq!(sc.read_only_root_filesystem, Some(true));
    assert_eq!(sc.allow_privilege_escalation, Some(false));
    assert_eq!(sc.seccomp_profile.unwrap().type_, "RuntimeDefault");
    let requests = c.resources.clone().unwrap().requests.unwrap();
    assert!(requests.contains_key("cpu") && requests.contains_key("memory"));
    let live = c.liveness_probe.clone().unwrap().http_get.unwrap();
    let ready = c.readiness_probe.clone().unwrap().http_get.unwrap();
    assert_eq!(live.path.as_deref(), Some("/healthz"));
    assert_eq!(ready.path.as_deref(), Some("/readyz"));
    let ports = c.ports.clone().unwrap();
    let metrics = ports
        .iter()
        .find(|p| p.name.as_deref() == Some("metrics"))
        .unwrap();
    assert_eq!(metrics.container_port, 8443);
    let args = c.args.clone().unwrap();
    assert_eq!(args[0], "run");
    assert!(args.iter().any(|a| a == "--metrics-secure"), "{args:?}");
    assert!(
        args.iter().any(|a| a == "--metrics-bind=0.0.0.0:8443"),
        "{args:?}"
    );
    assert!(args.iter().any(|a| a == "--leader-elect"), "{args:?}");
    // The arguments parse with the binary's own command line.
    let argv = std::iter::once("cinder-operator".to_string()).chain(args.iter().cloned());
    let parsed = <cinder_operator::cli::Cli as clap::Parser>::try_parse_from(argv);
    assert!(parsed.is_ok(), "{args:?}: {:?}", parsed.err());
    let env = c.env.clone().unwrap();
    let pod_name = env.iter().find(|e| e.name == "POD_NAME").unwrap();
    let field = pod_name.value_from.clone().unwrap().field_ref.unwrap();
    assert_eq!(field.field_path, "metadata.name");

    // The Service selects the pods and exposes the port named metrics; the ServiceMonitor
    // scrapes that port of that Service.
    let labels = d.metadata.labels.clone().unwrap_or_default();
    let service: Service = typed(of_kind(&manifests, "Service")[0]).unwrap();
    let spec = service.spec.unwrap();
    for (k, v) in spec.selector.unwrap() {
        assert_eq!(labels.get(&k), Some(&v), "Service selector {k}={v}");
    }
    assert!(
        spec.ports
            .unwrap()
            .iter()
            .any(|p| p.name.as_deref() == Some("metrics"))
    );
    let monitoring = kustomize(&deploy_dir().join("monitoring")).unwrap();
    let monitor = &of_kind(&monitoring, "ServiceMonitor")[0].object.data;
    assert_eq!(monitor["spec"]["endpoints"][0]["port"], "metrics");
    assert_eq!(monitor["spec"]["endpoints"][0]["scheme"], "https");
    assert_eq!(
        monitor["spec"]["endpoints"][0]["bearerTokenFile"],
        "/var/run/secrets/kubernetes.io/serviceaccount/token"
    );
    assert!(monitor["spec"]["endpoints"][0]["tlsConfig"].is_object());
    let selected = monitor["spec"]["selector"]["matchLabels"]
        .as_object()
        .unwrap();
    let service_labels = service.metadata.labels.unwrap_or_default();
    for (k, v) in selected {
        assert_eq!(service_labels.get(k).map(String::as_str), v.as_str(), "{k}");
    }
}
