//! The generated CRDs against the embedded cluster, which validates structural schemas and CEL
//! rules: what the schema states is refused on create (release pattern, image tag/digest oneOf,
//! satellite type enum and type/block oneOf), the CEL rules refuse a Cinder name over 43
//! characters, autoscaling bounds the wrong way round and a changed backend type, each with a
//! message naming the field; valid objects get their defaults.

use cinder_operator::crd::{Cinder, CinderBackend, crds};
use cinder_sim::{ClusterConfig, EmbeddedCluster};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ListParams, PostParams};
use serde_json::{Value, json};
use std::time::Duration;

async fn cluster_with_crds() -> EmbeddedCluster {
    let config = ClusterConfig {
        controllers: cinder_sim::controllers::ControllersConfig::all_off(),
        ..ClusterConfig::default()
    };
    let cluster = EmbeddedCluster::start(config).await.unwrap();
    let client = cluster.client().await;
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    for crd in crds() {
        api.create(&PostParams::default(), &crd).await.unwrap();
    }
    // Poll until the kinds are served (generous: the machine may be loaded).
    let cinders: Api<Cinder> = Api::namespaced(client.clone(), "default");
    let backends: Api<CinderBackend> = Api::namespaced(client, "default");
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        let ok = cinders.list(&ListParams::default()).await.is_ok()
            && backends.list(&ListParams::default()).await.is_ok();
        if ok {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "CRDs were not served within 60 s"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    cluster
}

fn cinder(name: &str) -> Value {
    json!({
        "apiVersion": "cinder.openstack.c5c3.io/v1alpha1", "kind": "Cinder",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "openStackRelease": "2026.1",
            "image": {"repository": "registry.example/cinder", "tag": "2026.1"},
            "database": {"clusterRef": {"name": "mariadb"}, "secretRef": {"name": "cinder-db"}},
            "messaging": {"clusterRef": {"name": "rabbitmq"}},
            "serviceUser": {"secretRef": {"name": "cinder-keystone"}},
            "keystoneEndpoint": "https://keystone.example:5000/v3"
        }
    })
}

fn backend(name: &str, spec: Value) -> Value {
    json!({
        "apiVersion": "cinder.openstack.c5c3.io/v1alpha1", "kind": "CinderBackend",
        "metadata": {"name": name, "namespace": "default"},
        "spec": spec
    })
}

async fn create(cluster: &EmbeddedCluster, obj: Value) -> Result<Value, kube::Error> {
    let gvk = kube::core::GroupVersionKind::gvk(
        "cinder.openstack.c5c3.io",
        "v1alpha1",
        obj["kind"].as_str().unwrap(),
    );
    let plural = if gvk.kind == "Cinder" {
        "cinders"
    } else {
        "cinderbackends"
    };
    let ar = kube::core::ApiResource::from_gvk_with_plural(&gvk, plural);
    let api: Api<kube::core::DynamicObject> =
        Api::namespaced_with(cluster.client().await, "default", &ar);
    let dynamic: kube::core::DynamicObject = serde_json::from_value(obj).unwrap();
    api.create(&PostParams::default(), &dynamic)
        .await
        .map(|o| serde_json::to_value(o).unwrap())
}

fn assert_invalid(r: Result<Value, kube::Error>, what: &str) {
    match r {
        Err(kube::Error::Api(s)) => assert_eq!(s.code, 422, "{what}: {s:?}"),
        other => panic!("{what}: expected 422 Invalid, got {other:?}"),
    }
}

/// A 422 whose message names `field` and says `says`.
fn assert_refused_naming(r: Result<Value, kube::Error>, field: &str, says: &str) {
    match r {
        Err(kube::Error::Api(s)) => {
            assert_eq!(s.code, 422, "{s:?}");
            assert!(
                s.message.contains(field) && s.message.contains(says),
                "422 naming {field} and saying {says:?}: {}",
                s.message
            );
        }
        other => panic!("expected 422 Invalid naming {field}, got {other:?}"),
    }
}

#[tokio::test]
async fn cel_rules_refuse_long_names_cross_field_specs_and_type_changes() {
    let cluster = cluster_with_crds().await;
    assert_refused_naming(
        create(&cluster, cinder(&"a".repeat(44))).await,
        "metadata.name",
        "at most 43 characters",
    );
    let mut bounds = cinder("bounds");
    bounds["spec"]["autoscaling"] = json!({"minReplicas": 5, "maxReplicas": 2});
    assert_refused_naming(
        create(&cluster, bounds).await,
        "spec.autoscaling",
        "minReplicas must not exceed maxReplicas",
    );
    let mut own = cinder("own");
    own["spec"]["serviceUser"]["secretRef"]["name"] = json!("own-service-user");
    assert_refused_naming(
        create(&cluster, own.clone()).await,
        "spec.serviceUser.secretRef.name",
        "the Secret the operator writes",
    );
    // On a target cluster the operator writes that Secret there: admitted.
    own["spec"]["targetClusterRef"] = json!({"name": "edge"});
    create(&cluster, own).await.unwrap();
    let mut another = cinder("another");
    another["spec"]["serviceUser"]["secretRef"]["name"] = json!("own-service-user");
    create(&cluster, another).await.unwrap();
    let mut dsn = cinder("dsn");
    dsn["spec"]["database"]["secretRef"]["name"] = json!("dsn-db-connection");
    assert_refused_naming(
        create(&cluster, dsn).await,
        "spec.database.secretRef.name",
        "the Secret the operator writes",
    );
    let mut broker = cinder("broker");
    broker["spec"]["messaging"] = json!({"secretRef": {"name": "broker-transport-url"}});
    assert_refused_naming(
        create(&cluster, broker).await,
        "spec.messaging.secretRef.name",
        "the Secret the operator writes",
    );

    create(&cluster, backend("typed", json!({"cinderRef": {"name": "c"}, "type": "NFS", "nfs": {"server": "s", "path": "/e"}})))
        .await
        .unwrap();
    let ar = kube::core::ApiResource::from_gvk_with_plural(
        &kube::core::GroupVersionKind::gvk("cinder.openstack.c5c3.io", "v1alpha1", "CinderBackend"),
        "cinderbackends",
    );
    let api: Api<kube::core::DynamicObject> =
        Api::namespaced_with(cluster.client().await, "default", &ar);
    let rbd = json!({"pool": "p", "user": "u", "monitors": ["m"], "keySecretRef": {"name": "k"}});
    let change = json!({"spec": {"type": "RBD", "nfs": null, "rbd": rbd}});
    let r = api
        .patch(
            "typed",
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(&change),
        )
        .await
        .map(|o| serde_json::to_value(o).unwrap());
    assert_refused_naming(r, "spec.type", "Invalid value");
    cluster.shutdown().await;
}

#[tokio::test]
async fn cinder_schema_admits_valid_objects_with_defaults_and_refuses_what_it_states() {
    let cluster = cluster_with_crds().await;
    let created = create(&cluster, cinder("cinder")).await.unwrap();
    assert_eq!(created["spec"]["api"]["replicas"], 3);
    assert_eq!(created["spec"]["dbPurge"]["schedule"], "1 0 * * *");
    assert_eq!(
        created["spec"]["secretStoreRef"]["name"],
        "openbao-cluster-store"
    );

    assert!(
        create(&cluster, cinder(&"a".repeat(43))).await.is_ok(),
        "43 characters are allowed"
    );

    let mut bad_release = cinder("bad-release");
    bad_release["spec"]["openStackRelease"] = json!("2026.3");
    assert_invalid(create(&cluster, bad_release).await, "release 2026.3");

    let mut both = cinder("both");
    both["spec"]["image"]["digest"] = json!(format!("sha256:{}", "a".repeat(64)));
    assert_invalid(create(&cluster, both).await, "tag and digest");

    let mut neither = cinder("neither");
    neither["spec"]["image"] = json!({"repository": "r"});
    assert_invalid(create(&cluster, neither).await, "neither tag nor digest");
    cluster.shutdown().await;
}

#[tokio::test]
async fn backend_schema_enforces_type_enum_and_matching_block() {
    let cluster = cluster_with_crds().await;
    let ok = create(&cluster, backend("nfs1", json!({"cinderRef": {"name": "c"}, "type": "NFS", "nfs": {"server": "s", "path": "/e"}})))
        .await
        .unwrap();
    assert_eq!(ok["spec"]["type"], "NFS");
    let rbd = json!({"pool": "p", "user": "u", "monitors": ["m"], "keySecretRef": {"name": "k"}});
    let ok = create(
        &cluster,
        backend(
            "rbd1",
            json!({"cinderRef": {"name": "c"}, "type": "RBD", "rbd": rbd}),
        ),
    )
    .await
    .unwrap();
    assert_eq!(ok["spec"]["rbd"]["clusterName"], "ceph");
    assert_invalid(
        create(&cluster, backend("iscsi", json!({"cinderRef": {"name": "c"}, "type": "ISCSI", "nfs": {"server": "s", "path": "/e"}}))).await,
        "unknown type",
    );
    assert_invalid(
        create(&cluster, backend("mismatch", json!({"cinderRef": {"name": "c"}, "type": "RBD", "nfs": {"server": "s", "path": "/e"}}))).await,
        "RBD with an nfs block",
    );
    assert_invalid(
        create(
            &cluster,
            backend("two", json!({"cinderRef": {"name": "c"}, "type": "NFS", "nfs": {"server": "s", "path": "/e"}, "rbd": rbd})),
        )
        .await,
        "both blocks",
    );
    cluster.shutdown().await;
}
