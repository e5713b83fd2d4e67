//! kube-rs against the embedded cluster: create, get, list with label and field selectors, the
//! four patch types, replace with a stale resourceVersion, delete, status subresource, generation.

use crate::common::server_only;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;

fn cm(name: &str, labels: serde_json::Value) -> ConfigMap {
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "labels": labels},
        "data": {"k": name}
    }))
    .unwrap()
}

#[tokio::test]
async fn create_get_list_with_selectors_and_delete() {
    let c = server_only().await;
    let api: Api<ConfigMap> = Api::namespaced(c.client().await, "default");
    let a = api
        .create(
            &PostParams::default(),
            &cm("a", json!({"app": "cinder", "tier": "api"})),
        )
        .await
        .unwrap();
    assert!(a.metadata.uid.is_some());
    assert!(a.metadata.resource_version.is_some());
    assert!(a.metadata.creation_timestamp.is_some());
    api.create(
        &PostParams::default(),
        &cm("b", json!({"app": "cinder", "tier": "volume"})),
    )
    .await
    .unwrap();
    api.create(&PostParams::default(), &cm("c", json!({"app": "glance"})))
        .await
        .unwrap();

    let dup = api
        .create(&PostParams::default(), &cm("a", json!({})))
        .await
        .unwrap_err();
    assert!(
        matches!(dup, kube::Error::Api(ref s) if s.code == 409 && s.reason == "AlreadyExists"),
        "{dup:?}"
    );

    let got = api.get("a").await.unwrap();
    assert_eq!(got.data.unwrap()["k"], "a");
    let missing = api.get("zzz").await.unwrap_err();
    assert!(matches!(missing, kube::Error::Api(ref s) if s.code == 404 && s.reason == "NotFound"));

    let names = |l: kube::core::ObjectList<ConfigMap>| {
        let mut n: Vec<String> = l
            .items
            .into_iter()
            .filter_map(|c| c.metadata.name)
            .filter(|n| n.len() == 1)
            .collect();
        n.sort();
        n
    };
    assert_eq!(
        names(
            api.list(&ListParams::default().labels("app=cinder"))
                .await
                .unwrap()
        ),
        ["a", "b"]
    );
    assert_eq!(
        names(
            api.list(&ListParams::default().labels("app in (cinder,glance),tier!=api"))
                .await
                .unwrap()
        ),
        ["b", "c"]
    );
    assert_eq!(
        names(
            api.list(&ListParams::default().labels("!tier,app"))
                .await
                .unwrap()
        ),
        ["c"]
    );
    assert_eq!(
        names(
            api.list(&ListParams::default().labels("app notin (glance)"))
                .await
                .unwrap()
        ),
        ["a", "b"]
    );
    assert_eq!(
        names(
            api.list(&ListParams::default().fields("metadata.name=b"))
                .await
                .unwrap()
        ),
        ["b"]
    );
    assert_eq!(
        names(
            api.list(
                &ListParams::default()
                    .fields("metadata.name!=b,metadata.namespace=default")
                    .labels("app")
            )
            .await
            .unwrap()
        ),
        ["a", "c"]
    );
    let paged = api
        .list(&ListParams::default().labels("app").limit(2))
        .await
        .unwrap();
    assert_eq!(paged.items.len(), 2);
    let token = paged.metadata.continue_.clone().unwrap();
    let rest = api
        .list(
            &ListParams::default()
                .labels("app")
                .limit(2)
                .continue_token(&token),
        )
        .await
        .unwrap();
    assert_eq!(rest.items.len(), 1);

    // all namespaces
    let all: Api<ConfigMap> = Api::all(c.client().await);
    assert_eq!(
        all.list(&ListParams::default().labels("app"))
            .await
            .unwrap()
            .items
            .len(),
        3
    );

    api.delete("a", &DeleteParams::default()).await.unwrap();
    assert!(api.get_opt("a").await.unwrap().is_none());
    c.shutdown().await;
}

#[tokio::test]
async fn creating_in_a_missing_namespace_is_not_found_until_it_exists() {
    let c = server_only().await;
    let client = c.client().await;
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "later");
    let err = api
        .create(&PostParams::default(), &cm("x", json!({})))
        .await
        .unwrap_err();
    assert!(
        matches!(err, kube::Error::Api(ref s) if s.code == 404),
        "{err:?}"
    );
    let ns: Api<Namespace> = Api::all(client);
    ns.create(
        &PostParams::default(),
        &serde_json::from_value(json!({"metadata": {"name": "later"}})).unwrap(),
    )
    .await
    .unwrap();
    api.create(&PostParams::default(), &cm("x", json!({})))
        .await
        .unwrap();
    let n = ns.get("later").await.unwrap();
    assert_eq!(n.status.unwrap().phase.as_deref(), Some("Active"));
    c.shutdown().await;
}

#[tokio::test]
async fn replace_with_a_stale_resource_version_conflicts() {
    let c = server_only().await;
    let api: Api<ConfigMap> = Api::namespaced(c.client().await, "default");
    let first = api
        .create(&PostParams::default(), &cm("r", json!({})))
        .await
        .unwrap();
    let mut second = first.clone();
    second.data = Some([("k".to_string(), "2".to_string())].into());
    let updated = api
        .replace("r", &PostParams::default(), &second)
        .await
        .unwrap();
    assert_ne!(
        updated.metadata.resource_version,
        first.metadata.resource_version
    );
    let mut stale = first.clone();
    stale.data = Some([("k".to_string(), "3".to_string())].into());
    let err = api
        .replace("r", &PostParams::default(), &stale)
        .await
        .unwrap_err();
    assert!(
        matches!(err, kube::Error::Api(ref s) if s.code == 409 && s.reason == "Conflict"),
        "{err:?}"
    );
    assert_eq!(api.get("r").await.unwrap().data.unwrap()["k"], "2");
    c.shutdown().await;
}

fn deployment(name: &str) -> serde_json::Value {
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "labels": {"app": name}},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": name}},
                 "template": {"metadata": {"labels": {"app": name}},
                              "spec": {"containers": [{"name": "api", "image": "cinder:1"}, {"name": "sidecar", "image": "log:1"}]}}}
    })
}

#[tokio::test]
async fn all_four_patch_types() {
    let c = server_only().await;
    let api: Api<Deployment> = Api::namespaced(c.client().await, "default");
    let d: Deployment = serde_json::from_value(deployment("p")).unwrap();
    api.create(&PostParams::default(), &d).await.unwrap();

    // merge patch
    let m = api
        .patch(
            "p",
            &PatchParams::default(),
            &Patch::Merge(
                json!({"metadata": {"labels": {"merged": "yes"}}, "spec": {"replicas": 2}}),
            ),
        )
        .await
        .unwrap();
    assert_eq!(m.metadata.labels.unwrap()["merged"], "yes");
    assert_eq!(m.spec.replicas, Some(2));
    assert_eq!(m.metadata.generation, Some(2));

    // JSON patch
    let ops = serde_json::from_value(json!([
        {"op": "test", "path": "/spec/replicas", "value": 2},
        {"op": "replace", "path": "/spec/replicas", "value": 3}
    ]))
    .unwrap();
    let j = api
        .patch("p", &PatchParams::default(), &Patch::<()>::Json(ops))
        .await
        .unwrap();
    assert_eq!(j.spec.replicas, Some(3));
    let failing =
        serde_json::from_value(json!([{"op": "test", "path": "/spec/replicas", "value": 99}]))
            .unwrap();
    let err = api
        .patch("p", &PatchParams::default(), &Patch::<()>::Json(failing))
        .await
        .unwrap_err();
    assert!(
        matches!(err, kube::Error::Api(ref s) if s.code == 422),
        "{err:?}"
    );

    // strategic merge: containers merge by name
    let s = api
        .patch("p", &PatchParams::default(), &Patch::Strategic(json!({"spec": {"template": {"spec": {"containers": [{"name": "sidecar", "image": "log:2"}]}}}})))
        .await
        .unwrap();
    let containers = s.spec.template.spec.unwrap().containers;
    assert_eq!(containers.len(), 2);
    assert_eq!(containers[0].image.as_deref(), Some("cinder:1"));
    assert_eq!(containers[1].image.as_deref(), Some("log:2"));

    // server-side apply: conflict between managers, then force
    let applied = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "p"}, "spec": {"replicas": 5}});
    // the fields were set by updates of another manager: a plain apply conflicts, a forced one takes them
    let err = api
        .patch("p", &PatchParams::apply("alice"), &Patch::Apply(&applied))
        .await
        .unwrap_err();
    assert!(
        matches!(err, kube::Error::Api(ref s) if s.code == 409),
        "{err:?}"
    );
    let a = api
        .patch(
            "p",
            &PatchParams::apply("alice").force(),
            &Patch::Apply(&applied),
        )
        .await
        .unwrap();
    assert_eq!(a.spec.replicas, Some(5));
    let mf = a.metadata.managed_fields.unwrap();
    assert!(
        mf.iter()
            .any(|e| e.manager.as_deref() == Some("alice")
                && e.operation.as_deref() == Some("Apply"))
    );
    let bob = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "p"}, "spec": {"replicas": 7}});
    let err = api
        .patch("p", &PatchParams::apply("bob"), &Patch::Apply(&bob))
        .await
        .unwrap_err();
    assert!(
        matches!(err, kube::Error::Api(ref s) if s.code == 409 && s.message.contains("alice")),
        "{err:?}"
    );
    let forced = api
        .patch("p", &PatchParams::apply("bob").force(), &Patch::Apply(&bob))
        .await
        .unwrap();
    assert_eq!(forced.spec.replicas, Some(7));

    // apply creates
    let created = api
        .patch(
            "q",
            &PatchParams::apply("alice"),
            &Patch::Apply(&deployment("q")),
        )
        .await
        .unwrap();
    assert_eq!(created.metadata.generation, Some(1));

    // a labels-only patch leaves the generation alone
    let before = api.get("p").await.unwrap().metadata.generation;
    let after = api
        .patch(
            "p",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"x": "y"}}})),
        )
        .await
        .unwrap();
    assert_eq!(after.metadata.generation, before);
    c.shutdown().await;
}

#[tokio::test]
async fn status_subresource_owns_status() {
    let c = server_only().await;
    let api: Api<Deployment> = Api::namespaced(c.client().await, "default");
    let d: Deployment = serde_json::from_value(deployment("s")).unwrap();
    api.create(&PostParams::default(), &d).await.unwrap();
    // status through the main endpoint is ignored
    let main = api
        .patch(
            "s",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"readyReplicas": 9}})),
        )
        .await
        .unwrap();
    assert!(main.status.and_then(|s| s.ready_replicas).is_none());
    // through /status it is taken, and spec changes there are ignored
    let st = api
        .patch_status(
            "s",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"readyReplicas": 1}, "spec": {"replicas": 4}})),
        )
        .await
        .unwrap();
    assert_eq!(st.status.unwrap().ready_replicas, Some(1));
    assert_eq!(st.spec.replicas, Some(1));
    assert_eq!(st.metadata.generation, Some(1));
    // a no-op write keeps the resourceVersion
    let again = api
        .patch_status(
            "s",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"readyReplicas": 1}})),
        )
        .await
        .unwrap();
    assert_eq!(
        again.metadata.resource_version,
        st.metadata.resource_version
    );
    c.shutdown().await;
}
