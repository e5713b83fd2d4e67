//! Object lifecycle: owner-reference garbage collection of a three-level chain (background,
//! foreground, orphan), finalizers holding an object, namespace deletion, CRD registration with
//! schema validation (422 naming the field) and defaults, CRD deletion removing instances.

use crate::common::{eventually, server_only};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, Patch, PatchParams, PostParams,
    PropagationPolicy,
};
use kube::core::GroupVersionKind;
use serde_json::{Value, json};

fn owned(name: &str, owner: Option<&ConfigMap>) -> ConfigMap {
    let mut v = json!({"metadata": {"name": name}});
    if let Some(o) = owner {
        v["metadata"]["ownerReferences"] = json!([{"apiVersion": "v1", "kind": "ConfigMap", "name": o.metadata.name, "uid": o.metadata.uid, "blockOwnerDeletion": true}]);
    }
    serde_json::from_value(v).unwrap()
}

async fn chain(api: &Api<ConfigMap>, prefix: &str) -> [ConfigMap; 3] {
    let a = api
        .create(&PostParams::default(), &owned(&format!("{prefix}-a"), None))
        .await
        .unwrap();
    let b = api
        .create(
            &PostParams::default(),
            &owned(&format!("{prefix}-b"), Some(&a)),
        )
        .await
        .unwrap();
    let c = api
        .create(
            &PostParams::default(),
            &owned(&format!("{prefix}-c"), Some(&b)),
        )
        .await
        .unwrap();
    [a, b, c]
}

#[tokio::test]
async fn three_level_owner_chain_is_collected() {
    let c = server_only().await;
    let api: Api<ConfigMap> = Api::namespaced(c.client().await, "default");

    // background: the root goes at once, the rest follows
    chain(&api, "bg").await;
    api.delete("bg-a", &DeleteParams::background())
        .await
        .unwrap();
    eventually("background chain gone", || async {
        api.get_opt("bg-b").await.unwrap().is_none() && api.get_opt("bg-c").await.unwrap().is_none()
    })
    .await;

    // foreground: the root stays (deletionTimestamp, foregroundDeletion) until its dependents are gone
    chain(&api, "fg").await;
    // a finalizer on the leaf holds the whole chain
    api.patch(
        "fg-c",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": ["test/hold"]}})),
    )
    .await
    .unwrap();
    api.delete("fg-a", &DeleteParams::foreground())
        .await
        .unwrap();
    eventually("leaf marked for deletion", || async {
        api.get_opt("fg-c")
            .await
            .unwrap()
            .is_some_and(|o| o.metadata.deletion_timestamp.is_some())
    })
    .await;
    let root = api.get("fg-a").await.unwrap();
    assert!(root.metadata.deletion_timestamp.is_some());
    assert!(
        root.metadata
            .finalizers
            .unwrap()
            .contains(&"foregroundDeletion".to_string())
    );
    api.patch(
        "fg-c",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .unwrap();
    eventually("foreground chain gone", || async {
        api.get_opt("fg-a").await.unwrap().is_none()
            && api.get_opt("fg-b").await.unwrap().is_none()
            && api.get_opt("fg-c").await.unwrap().is_none()
    })
    .await;

    // orphan: dependents stay, without the owner reference
    chain(&api, "or").await;
    let dp = DeleteParams {
        propagation_policy: Some(PropagationPolicy::Orphan),
        ..DeleteParams::default()
    };
    api.delete("or-a", &dp).await.unwrap();
    eventually("orphaning done", || async {
        api.get_opt("or-a").await.unwrap().is_none()
    })
    .await;
    let b = api.get("or-b").await.unwrap();
    assert!(b.metadata.owner_references.unwrap_or_default().is_empty());
    assert!(api.get_opt("or-c").await.unwrap().is_some());
    c.shutdown().await;
}

#[tokio::test]
async fn finalizer_holds_an_object_until_removed() {
    let c = server_only().await;
    let api: Api<ConfigMap> = Api::namespaced(c.client().await, "default");
    let mut cm = owned("held", None);
    cm.metadata.finalizers = Some(vec!["test/one".into(), "test/two".into()]);
    api.create(&PostParams::default(), &cm).await.unwrap();
    let deleted = api.delete("held", &DeleteParams::default()).await.unwrap();
    let obj = deleted
        .left()
        .expect("the object is returned while finalizers are pending");
    assert!(obj.metadata.deletion_timestamp.is_some());
    // still readable, still deleting
    api.patch(
        "held",
        &PatchParams::default(),
        &Patch::Json::<()>(
            serde_json::from_value(json!([{"op": "remove", "path": "/metadata/finalizers/0"}]))
                .unwrap(),
        ),
    )
    .await
    .unwrap();
    assert!(
        api.get("held")
            .await
            .unwrap()
            .metadata
            .deletion_timestamp
            .is_some()
    );
    api.patch(
        "held",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": []}})),
    )
    .await
    .unwrap();
    assert!(api.get_opt("held").await.unwrap().is_none());

    // deleting a namespace deletes what is in it, then the namespace
    let ns: Api<Namespace> = Api::all(c.client().await);
    ns.create(
        &PostParams::default(),
        &serde_json::from_value(json!({"metadata": {"name": "doomed"}})).unwrap(),
    )
    .await
    .unwrap();
    let inner: Api<ConfigMap> = Api::namespaced(c.client().await, "doomed");
    inner
        .create(&PostParams::default(), &owned("x", None))
        .await
        .unwrap();
    ns.delete("doomed", &DeleteParams::default()).await.unwrap();
    eventually("namespace gone", || async {
        ns.get_opt("doomed").await.unwrap().is_none()
    })
    .await;
    let err = ns
        .delete("default", &DeleteParams::default())
        .await
        .unwrap_err();
    assert!(
        matches!(err, kube::Error::Api(ref s) if s.code == 403),
        "{err:?}"
    );
    assert!(c.store().get("", "configmaps", "doomed", "x").is_none());
    c.shutdown().await;
}

fn crd() -> CustomResourceDefinition {
    serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "cinders.cinder.openstack.c5c3.io"},
        "spec": {"group": "cinder.openstack.c5c3.io", "scope": "Namespaced",
            "names": {"plural": "cinders", "singular": "cinder", "kind": "Cinder", "listKind": "CinderList"},
            "versions": [{"name": "v1alpha1", "served": true, "storage": true, "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": {"type": "object", "required": ["openStackRelease"], "properties": {
                        "openStackRelease": {"type": "string", "pattern": "^[0-9]{4}\\.[12]$"},
                        "replicas": {"type": "integer", "format": "int32", "minimum": 1, "default": 1},
                        "api": {"type": "object", "default": {}, "properties": {"port": {"type": "integer", "default": 8776}}},
                        "backend": {"nullable": true, "oneOf": [{"required": ["ceph"]}, {"required": ["nfs"]}],
                            "type": "object", "properties": {"ceph": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}, "nfs": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}
                    }},
                    "status": {"type": "object", "properties": {"phase": {"type": "string", "enum": ["Pending", "Ready"]}}}
                }}}}]}
    }))
    .unwrap()
}

#[tokio::test]
async fn custom_resources_are_validated_defaulted_and_removed_with_their_crd() {
    let c = server_only().await;
    let client = c.client().await;
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let created = crds.create(&PostParams::default(), &crd()).await.unwrap();
    let conds = created.status.unwrap().conditions.unwrap();
    assert!(
        conds
            .iter()
            .any(|c| c.type_ == "Established" && c.status == "True")
    );

    let gvk = GroupVersionKind::gvk("cinder.openstack.c5c3.io", "v1alpha1", "Cinder");
    let ar = ApiResource::from_gvk_with_plural(&gvk, "cinders");
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), "default", &ar);
    let obj = |name: &str, spec: Value| -> DynamicObject {
        serde_json::from_value(json!({"apiVersion": "cinder.openstack.c5c3.io/v1alpha1", "kind": "Cinder", "metadata": {"name": name}, "spec": spec})).unwrap()
    };

    // defaults, pruning of unknown fields
    let ok = api
        .create(
            &PostParams::default(),
            &obj("ok", json!({"openStackRelease": "2025.1", "junk": true})),
        )
        .await
        .unwrap();
    assert_eq!(ok.data["spec"]["replicas"], 1);
    assert_eq!(ok.data["spec"]["api"]["port"], 8776);
    assert!(ok.data["spec"].get("junk").is_none());

    // violations: 422 Invalid naming the field
    for (spec, field) in [
        (json!({}), "spec.openStackRelease"),
        (json!({"openStackRelease": "zed"}), "spec.openStackRelease"),
        (
            json!({"openStackRelease": "2025.1", "replicas": 0}),
            "spec.replicas",
        ),
        (
            json!({"openStackRelease": "2025.1", "replicas": "two"}),
            "spec.replicas",
        ),
        (
            json!({"openStackRelease": "2025.1", "backend": {"ceph": {}, "nfs": {}}}),
            "spec.backend",
        ),
    ] {
        let err = api
            .create(&PostParams::default(), &obj("bad", spec.clone()))
            .await
            .unwrap_err();
        let kube::Error::Api(s) = err else {
            panic!("{spec}: not an API error")
        };
        assert_eq!((s.code, s.reason.as_str()), (422, "Invalid"), "{spec}");
        assert!(s.message.contains(field), "{spec}: {}", s.message);
        let causes = s.details.unwrap().causes;
        assert!(
            causes.iter().any(|c| c.field == field),
            "{spec}: {causes:?}"
        );
    }
    assert!(api.get_opt("bad").await.unwrap().is_none());

    // status is validated on status writes
    let err = api
        .patch_status(
            "ok",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"phase": "Exploded"}})),
        )
        .await
        .unwrap_err();
    assert!(
        matches!(err, kube::Error::Api(ref s) if s.code == 422 && s.message.contains("status.phase")),
        "{err:?}"
    );
    let st = api
        .patch_status(
            "ok",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"phase": "Ready"}})),
        )
        .await
        .unwrap();
    assert_eq!(st.data["status"]["phase"], "Ready");

    // the resource is discoverable
    let discovery = kube::Discovery::new(client.clone())
        .filter(&["cinder.openstack.c5c3.io"])
        .run()
        .await
        .unwrap();
    assert!(discovery.resolve_gvk(&gvk).is_some());

    // deleting the CRD removes its instances and the resource
    crds.delete("cinders.cinder.openstack.c5c3.io", &DeleteParams::default())
        .await
        .unwrap();
    assert!(
        c.store()
            .list("cinder.openstack.c5c3.io", "cinders", None)
            .is_empty()
    );
    let err = api.list(&Default::default()).await.unwrap_err();
    assert!(
        matches!(err, kube::Error::Api(ref s) if s.code == 404),
        "{err:?}"
    );
    c.shutdown().await;
}

#[tokio::test]
async fn every_namespace_gets_kube_root_ca_crt_and_the_default_service_account() {
    use k8s_openapi::api::core::v1::{Pod, ServiceAccount};
    let c = cinder_sim::EmbeddedCluster::start(cinder_sim::ClusterConfig::default())
        .await
        .unwrap();
    let client = c.client().await;
    let namespaces: Api<Namespace> = Api::all(client.clone());
    namespaces
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "fresh"}})).unwrap(),
        )
        .await
        .unwrap();
    for ns in ["default", "fresh"] {
        let maps: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
        let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), ns);
        eventually(&format!("kube-root-ca.crt and default in {ns}"), || async {
            maps.get_opt("kube-root-ca.crt")
                .await
                .ok()
                .flatten()
                .is_some()
                && accounts.get_opt("default").await.ok().flatten().is_some()
        })
        .await;
    }
    // a pod of the namespace is admitted with the account's token volume
    let pods: Api<Pod> = Api::namespaced(client.clone(), "fresh");
    let pod = pods
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "p"},
                "spec": {"containers": [{"name": "c", "image": "x"}]}}))
            .unwrap(),
        )
        .await
        .unwrap();
    let spec = pod.spec.unwrap();
    assert_eq!(spec.service_account_name.as_deref(), Some("default"));
    let volume = &spec.volumes.unwrap_or_default()[0];
    assert!(
        volume.name.starts_with("kube-api-access-"),
        "{}",
        volume.name
    );
    assert_eq!(spec.tolerations.map(|t| t.len()), Some(2));
    assert_eq!(
        pod.status.and_then(|s| s.qos_class).as_deref(),
        Some("BestEffort")
    );
    c.shutdown().await;
}
