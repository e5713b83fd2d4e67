//! The forms clients ask for and send beyond plain JSON: protobuf request bodies (built-in kinds
//! decoded, custom resources refused with 415), the Accept header (406 only when nothing
//! acceptable is offered), aggregated discovery through kube-rs, metadata-only gets, lists and
//! watches (PartialObjectMetadata), `/openapi/v2` with built-in and CRD definitions, objects as
//! a real server writes them (`status: {}`, Deployment defaults) and Status field order.

use crate::common::{eventually, raw, server_only};
use cinder_sim::api::protobuf;
use futures::StreamExt;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ListParams, PartialObjectMeta, PostParams};
use kube::runtime::watcher;
use prost::Message;
use prost_reflect::{DynamicMessage, Value as PValue};
use serde_json::json;
use std::sync::{Arc, Mutex};

fn message(name: &str) -> DynamicMessage {
    DynamicMessage::new(protobuf::pool().unwrap().get_message_by_name(name).unwrap())
}

/// A protobuf body as kubectl sends it: `k8s\0` and a runtime.Unknown around the object.
fn envelope(api_version: &str, kind: &str, object: &DynamicMessage) -> Vec<u8> {
    let mut tm = message("apimachinery.pkg.runtime.TypeMeta");
    tm.set_field_by_name("apiVersion", PValue::String(api_version.into()));
    tm.set_field_by_name("kind", PValue::String(kind.into()));
    let mut u = message("apimachinery.pkg.runtime.Unknown");
    u.set_field_by_name("typeMeta", PValue::Message(tm));
    u.set_field_by_name("raw", PValue::Bytes(object.encode_to_vec().into()));
    let mut out = protobuf::MAGIC.to_vec();
    out.extend(u.encode_to_vec());
    out
}

fn config_map(name: &str) -> DynamicMessage {
    let mut meta = message("apimachinery.pkg.apis.meta.v1.ObjectMeta");
    meta.set_field_by_name("name", PValue::String(name.into()));
    let mut cm = message("api.core.v1.ConfigMap");
    cm.set_field_by_name("metadata", PValue::Message(meta));
    let mut data = std::collections::HashMap::new();
    data.insert(
        prost_reflect::MapKey::String("greeting".into()),
        PValue::String("hello".into()),
    );
    cm.set_field_by_name("data", PValue::Map(data));
    cm
}

const PB: &str = "application/vnd.kubernetes.protobuf";
const KUBECTL_ACCEPT: &str = "application/vnd.kubernetes.protobuf,application/json";

#[tokio::test]
async fn protobuf_bodies_and_accept_headers() {
    let c = server_only().await;
    let url = c.url();
    let path = "/api/v1/namespaces/default/configmaps";
    let body = envelope("v1", "ConfigMap", &config_map("from-pb"));
    let created = raw(
        &url,
        "POST",
        path,
        &[("Content-Type", PB), ("Accept", KUBECTL_ACCEPT)],
        &body,
    )
    .await;
    assert_eq!(created.code, 201, "{}", created.body);
    assert_eq!(created.content_type, "application/json");
    assert_eq!(created.json()["data"]["greeting"], "hello");
    let stored = c
        .store()
        .get("", "configmaps", "default", "from-pb")
        .unwrap();
    assert_eq!(stored["data"], json!({"greeting": "hello"}));

    // a body that is not what its content type says: 400, nothing stored
    let bad = raw(
        &url,
        "POST",
        path,
        &[("Content-Type", PB)],
        "{\"kind\":\"ConfigMap\"}",
    )
    .await;
    assert_eq!(
        (bad.code, bad.json()["reason"].as_str()),
        (400, Some("BadRequest"))
    );

    // only protobuf acceptable: 406 NotAcceptable (this server writes JSON)
    let only_pb = raw(&url, "GET", path, &[("Accept", PB)], "").await;
    assert_eq!(only_pb.code, 406);
    assert_eq!(only_pb.json()["reason"], "NotAcceptable");

    // custom resources have no protobuf form
    let crd = json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "gadgets.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced",
                 "names": {"plural": "gadgets", "singular": "gadget", "kind": "Gadget"},
                 "versions": [{"name": "v1", "served": true, "storage": true,
                               "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]}
    });
    let r = raw(
        &url,
        "POST",
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
        &[("Content-Type", "application/json")],
        crd.to_string(),
    )
    .await;
    assert_eq!(r.code, 201, "{}", r.body);
    let r = raw(
        &url,
        "POST",
        "/apis/example.com/v1/namespaces/default/gadgets",
        &[("Content-Type", PB)],
        envelope("example.com/v1", "Gadget", &config_map("g")),
    )
    .await;
    assert_eq!(
        (r.code, r.json()["reason"].as_str()),
        (415, Some("UnsupportedMediaType"))
    );
    assert!(c.store().list("example.com", "gadgets", None).is_empty());
}

#[tokio::test]
async fn aggregated_discovery_through_kube_rs() {
    let c = server_only().await;
    let client = c.client().await;
    let groups = client.list_api_groups_aggregated().await.unwrap();
    let apps = groups
        .items
        .iter()
        .find(|g| g.metadata.as_ref().and_then(|m| m.name.as_deref()) == Some("apps"))
        .expect("apps in aggregated discovery");
    let deployments = apps.versions[0]
        .resources
        .iter()
        .find(|r| r.resource.as_deref() == Some("deployments"))
        .unwrap();
    assert_eq!(deployments.scope.as_deref(), Some("Namespaced"));
    let core = client.list_core_api_versions_aggregated().await.unwrap();
    assert!(
        core.items[0].versions[0]
            .resources
            .iter()
            .any(|r| r.resource.as_deref() == Some("configmaps"))
    );
}

#[tokio::test]
async fn metadata_only_reads_lists_and_watches() {
    let c = server_only().await;
    let client = c.client().await;
    let api: Api<ConfigMap> = Api::default_namespaced(client.clone());
    let cm: ConfigMap = serde_json::from_value(
        json!({"metadata": {"name": "meta", "labels": {"a": "b"}}, "data": {"secret-ish": "x"}}),
    )
    .unwrap();
    api.create(&PostParams::default(), &cm).await.unwrap();
    let one = api.get_metadata("meta").await.unwrap();
    assert_eq!(one.types.as_ref().unwrap().kind, "PartialObjectMetadata");
    assert_eq!(one.metadata.labels.unwrap()["a"], "b");
    let list = api.list_metadata(&ListParams::default()).await.unwrap();
    assert_eq!(list.items.len(), 1);
    assert_eq!(
        list.items[0].types.as_ref().unwrap().kind,
        "PartialObjectMetadata"
    );

    let url = c.url();
    let r = raw(
        &url,
        "GET",
        "/api/v1/namespaces/default/configmaps/meta",
        &[(
            "Accept",
            "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1",
        )],
        "",
    )
    .await;
    assert!(r.json().get("data").is_none(), "{}", r.body);

    let seen = Arc::new(Mutex::new(Vec::new()));
    let sink = seen.clone();
    let task = tokio::spawn(async move {
        let metadata_api: Api<PartialObjectMeta<ConfigMap>> = Api::default_namespaced(client);
        let mut stream = watcher::watcher(metadata_api, watcher::Config::default()).boxed();
        while let Some(Ok(e)) = stream.next().await {
            if let watcher::Event::Apply(m) | watcher::Event::InitApply(m) = e {
                sink.lock()
                    .unwrap()
                    .push(m.metadata.name.unwrap_or_default());
            }
        }
    });
    eventually("metadata watcher sees the object", || async {
        seen.lock().unwrap().contains(&"meta".to_string())
    })
    .await;
    task.abort();
}

#[tokio::test]
async fn objects_read_back_as_a_real_server_writes_them() {
    let c = server_only().await;
    let api: Api<Deployment> = Api::default_namespaced(c.client().await);
    let d: Deployment = serde_json::from_value(json!({
        "metadata": {"name": "web"},
        "spec": {"selector": {"matchLabels": {"app": "web"}},
                 "template": {"metadata": {"labels": {"app": "web"}},
                              "spec": {"containers": [{"name": "web", "image": "nginx:1.27"}]}}}
    }))
    .unwrap();
    let created = api.create(&PostParams::default(), &d).await.unwrap();
    assert!(created.status.is_some(), "status: {{}} on create");
    let spec = created.spec;
    assert_eq!(spec.replicas, Some(1));
    assert_eq!(spec.revision_history_limit, Some(10));
    assert_eq!(spec.progress_deadline_seconds, Some(600));
    assert_eq!(
        spec.strategy.unwrap().type_.as_deref(),
        Some("RollingUpdate")
    );
    let container = &spec.template.spec.unwrap().containers[0];
    assert_eq!(container.image_pull_policy.as_deref(), Some("IfNotPresent"));

    // Status objects: the real server's field order
    let r = raw(
        &c.url(),
        "GET",
        "/api/v1/namespaces/default/configmaps/none",
        &[],
        "",
    )
    .await;
    assert_eq!(r.code, 404);
    assert!(
        r.body.starts_with(
            r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"configmaps \"none\" not found","reason":"NotFound","details":{"name":"none","kind":"configmaps"},"code":404}"#
        ),
        "{}",
        r.body
    );
}

#[tokio::test]
async fn openapi_v2_has_builtins_and_crds() {
    let c = server_only().await;
    let crd = json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced",
                 "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
                 "versions": [{"name": "v1", "served": true, "storage": true,
                               "schema": {"openAPIV3Schema": {"type": "object", "properties": {"spec": {"type": "object", "nullable": true,
                                   "properties": {"size": {"type": "integer"}}}}}}}]}
    });
    let url = c.url();
    let r = raw(
        &url,
        "POST",
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
        &[("Content-Type", "application/json")],
        crd.to_string(),
    )
    .await;
    assert_eq!(r.code, 201);
    let doc = raw(
        &url,
        "GET",
        "/openapi/v2",
        &[("Accept", "application/json")],
        "",
    )
    .await;
    assert_eq!(doc.code, 200);
    let doc = doc.json();
    assert_eq!(doc["swagger"], "2.0");
    let defs = &doc["definitions"];
    assert!(defs["io.k8s.api.apps.v1.Deployment"]["properties"]["spec"].is_object());
    assert!(defs["io.k8s.api.core.v1.PodTemplateSpec"].is_object());
    let widget = &defs["com.example.v1.Widget"];
    assert_eq!(widget["properties"]["spec"]["x-nullable"], true);
    assert_eq!(
        widget["x-kubernetes-group-version-kind"][0]["kind"],
        "Widget"
    );
}
