//! Deleting a Cinder that names a target cluster (two embedded clusters): with the target
//! registered, the children carrying the ownership label on the target (the VPAs and the
//! HTTPRoute among them) are deleted and the
//! finalizer is released; with the target deregistered mid-deletion, the finalizer is released
//! with a RemoteChildrenAbandoned Warning naming the label of what stays behind.

use cinder_e2e::database_helpers::cinder_events;
use cinder_e2e::target_helpers::{register, target_cluster};
use cinder_e2e::*;
use cinder_operator::crd::Cinder;
use cinder_operator::kube_ext::ownership::OWNER_LABEL;
use cinder_operator::names;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Api;
use kube::api::PostParams;

async fn remote_child(target: &kube::Client, name: &str, owner: &str) {
    let api: Api<ConfigMap> = Api::namespaced(target.clone(), NS);
    let cm = ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            labels: Some([(OWNER_LABEL.to_string(), owner.to_string())].into()),
            ..Default::default()
        },
        ..Default::default()
    };
    api.create(&PostParams::default(), &cm).await.unwrap();
}

/// A labelled object of the optional kind `kind` (VPA, HTTPRoute) named `name` on the target.
async fn remote_optional(
    target: &kube::Client,
    kind: cinder_operator::kube_ext::capability::OptionalKind,
    name: &str,
    owner: &str,
    spec: serde_json::Value,
) -> Api<kube::api::DynamicObject> {
    let api = kind.namespaced(target, NS);
    let mut obj = kube::api::DynamicObject::new(name, &kind.api_resource()).data(spec);
    obj.metadata.namespace = Some(NS.to_string());
    obj.metadata.labels = Some([(OWNER_LABEL.to_string(), owner.to_string())].into());
    api.create(&PostParams::default(), &obj).await.unwrap();
    api
}

async fn wait_finalizer(cinders: &Api<Cinder>, name: &str) {
    eventually("the Cinder finalizer", || {
        let cinders = cinders.clone();
        let name = name.to_string();
        async move {
            let c = cinders.get(&name).await.ok()?;
            c.metadata
                .finalizers
                .unwrap_or_default()
                .iter()
                .any(|f| f == names::CINDER_FINALIZER)
                .then_some(())
        }
    })
    .await
    .unwrap();
}

async fn wait_gone(cinders: &Api<Cinder>, name: &str) {
    eventually("the Cinder leaves", || {
        let cinders = cinders.clone();
        let name = name.to_string();
        async move { cinders.get_opt(&name).await.ok()?.is_none().then_some(()) }
    })
    .await
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deletion_cleans_the_target_by_label_or_abandons_a_deregistered_one() {
    let h = Harness::start().await.unwrap();
    let (target, remote) = target_cluster(true).await.unwrap();
    register(&h, "remote", target.kubeconfig_yaml())
        .await
        .unwrap();
    let cinders: Api<Cinder> = h.api();
    let with_target = serde_json::json!({"targetClusterRef": {"name": "remote"}});

    // Registered target: the labelled children there are deleted, the others stay.
    create_cinder(&h.client, "t1", with_target.clone())
        .await
        .unwrap();
    wait_finalizer(&cinders, "t1").await;
    let owner = format!("{NS}.t1");
    remote_child(&remote, "t1-config-abc", &owner).await;
    remote_child(&remote, "unrelated", &format!("{NS}.other")).await;
    use cinder_operator::kube_ext::capability::{HTTP_ROUTE, VERTICAL_POD_AUTOSCALER};
    let vpas = remote_optional(
        &remote,
        VERTICAL_POD_AUTOSCALER,
        "t1-api",
        &owner,
        serde_json::json!({"spec": {"targetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "t1-api"}}}),
    )
    .await;
    let routes = remote_optional(
        &remote,
        HTTP_ROUTE,
        "t1-api",
        &owner,
        serde_json::json!({"spec": {"parentRefs": [{"name": "public"}]}}),
    )
    .await;
    cinders.delete("t1", &Default::default()).await.unwrap();
    wait_gone(&cinders, "t1").await;
    let remote_maps: Api<ConfigMap> = Api::namespaced(remote.clone(), NS);
    eventually("the labelled child leaves the target", || {
        let remote_maps = remote_maps.clone();
        async move {
            remote_maps
                .get_opt("t1-config-abc")
                .await
                .ok()?
                .is_none()
                .then_some(())
        }
    })
    .await
    .unwrap();
    assert!(remote_maps.get_opt("unrelated").await.unwrap().is_some());
    for (what, api) in [("VPA", &vpas), ("HTTPRoute", &routes)] {
        eventually(
            &format!("the labelled {what} leaves the target"),
            || async { api.get_opt("t1-api").await.ok()?.is_none().then_some(()) },
        )
        .await
        .unwrap();
    }
    assert!(
        !cinder_events(&h.client, "t1", "DatabaseFinalized")
            .await
            .is_empty()
    );
    assert!(
        cinder_events(&h.client, "t1", "RemoteChildrenAbandoned")
            .await
            .is_empty()
    );

    // Deregistered mid-deletion: released with a Warning naming what stays behind.
    create_cinder(&h.client, "t2", with_target).await.unwrap();
    wait_finalizer(&cinders, "t2").await;
    remote_child(&remote, "t2-config-abc", &format!("{NS}.t2")).await;
    let secrets: Api<Secret> = h.api();
    secrets
        .delete("target-remote", &Default::default())
        .await
        .unwrap();
    cinders.delete("t2", &Default::default()).await.unwrap();
    wait_gone(&cinders, "t2").await;
    let events = cinder_events(&h.client, "t2", "RemoteChildrenAbandoned").await;
    let event = events.first().expect("a RemoteChildrenAbandoned event");
    assert_eq!(event.type_.as_deref(), Some("Warning"));
    let note = event.note.clone().unwrap_or_default();
    assert!(note.contains(&format!("{OWNER_LABEL}={NS}.t2")), "{note}");
    assert!(note.contains("not registered"), "{note}");
    assert!(
        remote_maps
            .get_opt("t2-config-abc")
            .await
            .unwrap()
            .is_some(),
        "an unreachable target is left as it is"
    );

    target.shutdown().await;
    h.stop().await.unwrap();
}
