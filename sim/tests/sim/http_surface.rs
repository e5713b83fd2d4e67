//! The HTTP surface clients discover: /version, /api, /apis, resource lists (short names,
//! categories, status subresources), aggregated discovery for the Accept header that asks for
//! it and the legacy documents otherwise, OpenAPI v3, Table answers for built-ins, and streaming-list watches.

use crate::common::server_only;
use crate::common::{eventually, raw};
use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::ResourceExt;
use kube::api::{Api, PostParams};
use kube::runtime::watcher::{self, Event};
use serde_json::json;
use std::sync::{Arc, Mutex};

#[tokio::test]
async fn discovery_documents() {
    let c = server_only().await;
    let url = c.url();
    let version = raw(&url, "GET", "/version", &[], "").await.json();
    assert_eq!(version["major"], "1");
    let api = raw(&url, "GET", "/api", &[], "").await.json();
    assert_eq!(api["versions"], json!(["v1"]));

    // kubectl asks for aggregated discovery first and gets it, with its content type
    let aggregated =
        "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json";
    let doc = raw(&url, "GET", "/apis", &[("Accept", aggregated)], "").await;
    assert_eq!(
        doc.content_type,
        "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
    );
    assert_eq!(doc.json()["kind"], "APIGroupDiscoveryList");
    // without it, the legacy list as plain JSON
    let groups = raw(&url, "GET", "/apis", &[("Accept", "application/json")], "").await;
    assert_eq!(groups.content_type, "application/json");
    let groups = groups.json();
    assert_eq!(groups["kind"], "APIGroupList");
    let names: Vec<&str> = groups["groups"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|g| g["name"].as_str())
        .collect();
    for g in [
        "apps",
        "batch",
        "coordination.k8s.io",
        "apiextensions.k8s.io",
        "policy",
        "autoscaling",
        "networking.k8s.io",
        "events.k8s.io",
        "rbac.authorization.k8s.io",
    ] {
        assert!(names.contains(&g), "{g} in {names:?}");
    }

    let apps = raw(&url, "GET", "/apis/apps/v1", &[], "").await.json();
    let res = apps["resources"].as_array().unwrap();
    let deploy = res.iter().find(|r| r["name"] == "deployments").unwrap();
    assert_eq!(deploy["kind"], "Deployment");
    assert_eq!(deploy["namespaced"], true);
    assert_eq!(deploy["shortNames"], json!(["deploy"]));
    assert_eq!(deploy["categories"], json!(["all"]));
    assert!(
        deploy["verbs"]
            .as_array()
            .unwrap()
            .contains(&json!("watch"))
    );
    assert!(res.iter().any(|r| r["name"] == "deployments/status"));
    let core = raw(&url, "GET", "/api/v1", &[], "").await.json();
    let core_names: Vec<&str> = core["resources"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|r| r["name"].as_str())
        .collect();
    for r in [
        "namespaces",
        "pods",
        "pods/status",
        "services",
        "services/proxy",
        "secrets",
        "configmaps",
        "events",
        "serviceaccounts",
    ] {
        assert!(core_names.contains(&r), "{r}");
    }
    assert_eq!(
        raw(&url, "GET", "/apis/nope.example.com/v1", &[], "")
            .await
            .code,
        404
    );

    // kube-rs discovery agrees
    let discovery = kube::Discovery::new(c.client().await).run().await.unwrap();
    assert!(
        discovery
            .groups()
            .any(|g| g.name() == "coordination.k8s.io")
    );

    // OpenAPI v3 index and a group-version document carrying the fieldValidation parameter
    let index = raw(&url, "GET", "/openapi/v3", &[], "").await.json();
    let apps_url = index["paths"]["apis/apps/v1"]["serverRelativeURL"]
        .as_str()
        .unwrap()
        .to_string();
    let doc = raw(&url, "GET", &apps_url, &[], "").await.json();
    let patch = &doc["paths"]["/apis/apps/v1/namespaces/{namespace}/deployments/{name}"]["patch"];
    assert_eq!(
        patch["x-kubernetes-group-version-kind"]["kind"],
        "Deployment"
    );
    assert!(
        patch["parameters"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["name"] == "fieldValidation")
    );
    c.shutdown().await;
}

#[tokio::test]
async fn tables_for_built_ins() {
    let c = server_only().await;
    let url = c.url();
    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": [{"name": "a", "image": "x"}, {"name": "b", "image": "y"}]}});
    assert_eq!(
        raw(
            &url,
            "POST",
            "/api/v1/namespaces/default/pods",
            &[("Content-Type", "application/json")],
            &pod.to_string()
        )
        .await
        .code,
        201
    );
    let status = json!({"status": {"phase": "Running", "containerStatuses": [{"name": "a", "ready": true, "restartCount": 2}, {"name": "b", "ready": false, "restartCount": 1}]}});
    let patched = raw(
        &url,
        "PATCH",
        "/api/v1/namespaces/default/pods/p/status",
        &[("Content-Type", "application/merge-patch+json")],
        &status.to_string(),
    )
    .await;
    assert_eq!(patched.code, 200);
    let accept = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json";
    let t = raw(
        &url,
        "GET",
        "/api/v1/namespaces/default/pods",
        &[("Accept", accept)],
        "",
    )
    .await
    .json();
    assert_eq!(t["kind"], "Table");
    let cols: Vec<&str> = t["columnDefinitions"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|c| c["name"].as_str())
        .collect();
    assert_eq!(
        cols,
        [
            "Name",
            "Ready",
            "Status",
            "Restarts",
            "Age",
            "IP",
            "Node",
            "Nominated Node",
            "Readiness Gates"
        ]
    );
    let wide: Vec<i64> = t["columnDefinitions"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|c| c["priority"].as_i64())
        .collect();
    assert_eq!(wide, [0, 0, 0, 0, 0, 1, 1, 1, 1]);
    let row = &t["rows"][0];
    assert_eq!(row["cells"][0], "p");
    assert_eq!(row["cells"][1], "1/2");
    assert_eq!(row["cells"][2], "Running");
    assert_eq!(row["cells"][3], 3);
    assert_eq!(row["object"]["kind"], "PartialObjectMetadata");
    let with_object = raw(
        &url,
        "GET",
        "/api/v1/namespaces/default/pods/p?includeObject=Object",
        &[("Accept", accept)],
        "",
    )
    .await
    .json();
    assert_eq!(with_object["rows"][0]["object"]["kind"], "Pod");
    let none = raw(
        &url,
        "GET",
        "/api/v1/namespaces/default/pods?includeObject=None",
        &[("Accept", accept)],
        "",
    )
    .await
    .json();
    assert!(none["rows"][0].get("object").is_none());
    let ns = raw(
        &url,
        "GET",
        "/api/v1/namespaces/default",
        &[("Accept", accept)],
        "",
    )
    .await
    .json();
    assert_eq!(
        ns["rows"][0]["cells"],
        json!(["default", "Active", ns["rows"][0]["cells"][2]])
    );
    let ev = json!({"apiVersion": "v1", "kind": "Event", "metadata": {"name": "p.1"}, "type": "Normal", "reason": "Started",
        "message": "hello", "involvedObject": {"kind": "Pod", "name": "p", "namespace": "default"}});
    assert_eq!(
        raw(
            &url,
            "POST",
            "/api/v1/namespaces/default/events",
            &[("Content-Type", "application/json")],
            &ev.to_string()
        )
        .await
        .code,
        201
    );
    let events = raw(
        &url,
        "GET",
        "/api/v1/namespaces/default/events",
        &[("Accept", accept)],
        "",
    )
    .await
    .json();
    let cols: Vec<&str> = events["columnDefinitions"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|c| c["name"].as_str())
        .collect();
    assert_eq!(
        cols,
        ["Last Seen", "Type", "Reason", "Object", "Message", "Name"]
    );
    assert_eq!(
        events["rows"][0]["cells"].as_array().unwrap()[1..],
        [
            json!("Normal"),
            json!("Started"),
            json!("pod/p"),
            json!("hello"),
            json!("p.1")
        ]
    );
    c.shutdown().await;
}

#[tokio::test]
async fn streaming_list_watch_sends_initial_events_then_a_bookmark() {
    let c = server_only().await;
    let api: Api<ConfigMap> = Api::namespaced(c.client().await, "default");
    for i in 0..3 {
        api.create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": format!("s-{i}")}})).unwrap(),
        )
        .await
        .unwrap();
    }
    let events: Arc<Mutex<Vec<String>>> = Arc::default();
    let e2 = events.clone();
    let stream = watcher::watcher(api.clone(), watcher::Config::default().streaming_lists());
    let task = tokio::spawn(async move {
        let mut stream = std::pin::pin!(stream);
        while let Some(Ok(ev)) = stream.next().await {
            let s = match ev {
                Event::Init => "init".to_string(),
                Event::InitApply(o) => format!("init:{}", o.name_any()),
                Event::InitDone => "done".to_string(),
                Event::Apply(o) => format!("apply:{}", o.name_any()),
                Event::Delete(o) => format!("delete:{}", o.name_any()),
            };
            e2.lock().unwrap().push(s);
        }
    });
    eventually("initial events", || async {
        events.lock().unwrap().contains(&"done".to_string())
    })
    .await;
    api.create(
        &PostParams::default(),
        &serde_json::from_value(json!({"metadata": {"name": "s-3"}})).unwrap(),
    )
    .await
    .unwrap();
    eventually("live event", || async {
        events.lock().unwrap().contains(&"apply:s-3".to_string())
    })
    .await;
    let got = events.lock().unwrap().clone();
    assert_eq!(
        got,
        [
            "init",
            "init:s-0",
            "init:s-1",
            "init:s-2",
            "done",
            "apply:s-3"
        ]
    );
    // the initial state came through the watch itself, not a list
    let cm_requests: Vec<String> = c
        .requests()
        .into_iter()
        .filter(|r| r.resource == "configmaps" && r.method == "GET")
        .map(|r| r.verb)
        .collect();
    assert!(
        cm_requests.contains(&"watch".to_string()) && !cm_requests.contains(&"list".to_string()),
        "{cm_requests:?}"
    );
    task.abort();
    c.shutdown().await;
}
