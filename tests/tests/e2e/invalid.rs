//! Invalid custom resources: refused by the API server (422) with a message naming the field,
//! or — where only CEL could refuse it and the server does not run CEL — reported by a
//! condition naming the field. Either way the operator keeps running.

use cinder_e2e::*;
use cinder_operator::crd::{Cinder, CinderBackend};

/// Either a 422 naming `field`, or (admitted) a condition `type_`/`reason` naming `field`.
async fn refused_or_reported<K>(
    h: &Harness,
    body: serde_json::Value,
    field: &str,
    name: &str,
    type_: &str,
    reason: &str,
) where
    K: kube::Resource<Scope = kube::core::NamespaceResourceScope, DynamicType = ()>
        + Clone
        + std::fmt::Debug
        + serde::de::DeserializeOwned
        + serde::Serialize,
{
    match create_raw::<K>(&h.client, body).await {
        Err(kube::Error::Api(s)) => {
            assert_eq!(s.code, 422, "{s:?}");
            assert!(
                s.message.contains(field),
                "422 message must name {field}: {}",
                s.message
            );
        }
        Err(e) => panic!("unexpected error: {e}"),
        Ok(_) => {
            let c = wait_satellite_condition::<K>(&h.client, name, type_, "False", reason)
                .await
                .unwrap();
            assert!(
                c.message.contains(field),
                "condition must name {field}: {}",
                c.message
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_resources_are_refused_or_reported_with_the_field() {
    let h = Harness::start().await.unwrap();
    create_cluster_store(&h.client).await.unwrap();
    create_credentials(&h.client, &Credentials::fresh("inv"))
        .await
        .unwrap();

    let mut bad_release = cinder_json("badrelease", serde_json::json!({}));
    bad_release["spec"]["openStackRelease"] = "2026.3".into();
    refused_or_reported::<Cinder>(
        &h,
        bad_release,
        "openStackRelease",
        "badrelease",
        "Ready",
        "InvalidSpec",
    )
    .await;

    let mut both = cinder_json("both", serde_json::json!({}));
    both["spec"]["image"]["digest"] = format!("sha256:{}", "a".repeat(64)).into();
    refused_or_reported::<Cinder>(&h, both, "image", "both", "Ready", "InvalidSpec").await;

    let long = "c".repeat(44);
    refused_or_reported::<Cinder>(
        &h,
        cinder_json(&long, serde_json::json!({})),
        "metadata.name",
        &long,
        "Ready",
        "InvalidSpec",
    )
    .await;

    // The credential Secret named as the Secret the operator writes for this Cinder: refused
    // (by the CRD's rule, or by the operator before any step), never written over.
    let own = cinder_json(
        "own",
        serde_json::json!({"serviceUser": {"secretRef": {"name": "own-service-user"}}}),
    );
    refused_or_reported::<Cinder>(
        &h,
        own,
        "spec.serviceUser.secretRef.name",
        "own",
        "Ready",
        "InvalidSpec",
    )
    .await;

    let nfs_without_block = serde_json::json!({
        "apiVersion": "cinder.openstack.c5c3.io/v1alpha1",
        "kind": "CinderBackend",
        "metadata": {"name": "nfsless", "namespace": NS},
        "spec": {"cinderRef": {"name": "any"}, "type": "NFS"}
    });
    refused_or_reported::<CinderBackend>(
        &h,
        nfs_without_block,
        "nfs",
        "nfsless",
        "CredentialsReady",
        "InvalidSpec",
    )
    .await;

    // The operator is still healthy: a valid Cinder converges.
    create_cinder(&h.client, "valid", serde_json::json!({}))
        .await
        .unwrap();
    wait_cinder_condition(
        &h.client,
        "valid",
        "SecretsReady",
        "True",
        "SecretsAvailable",
    )
    .await
    .unwrap();
    assert!(h.ctx.is_ready());
    h.stop().await.unwrap();
}
