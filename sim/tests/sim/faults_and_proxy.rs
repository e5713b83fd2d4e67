//! Fault injection (error answers by verb and resource, watch drops per event) and the Service
//! proxy health check (ready Deployment behind the selector → 200 "OK", else 503, forced answers).

use crate::common::server_only;
use crate::common::{eventually, raw};
use cinder_sim::{ErrorRule, ServiceFault};
use futures::StreamExt;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Service};
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher;
use serde_json::json;
use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

fn cm(name: &str) -> ConfigMap {
    serde_json::from_value(json!({"metadata": {"name": name}})).unwrap()
}

#[tokio::test]
async fn injected_errors_match_verb_and_resource() {
    let c = server_only().await;
    let api: Api<ConfigMap> = Api::namespaced(c.client().await, "default");
    api.create(&PostParams::default(), &cm("before"))
        .await
        .unwrap();
    let faults = c.faults();
    faults.add_error_rule(ErrorRule::always(Some("create"), Some("configmaps"), 500));
    faults.add_error_rule(ErrorRule::always(Some("list"), Some("configmaps"), 429));
    faults.add_error_rule(ErrorRule::always(Some("patch"), None, 500));
    faults.add_error_rule(ErrorRule::always(Some("update"), Some("configmaps"), 409));

    let err = api
        .create(&PostParams::default(), &cm("x"))
        .await
        .unwrap_err();
    assert!(
        matches!(err, kube::Error::Api(ref s) if s.code == 500 && s.reason == "InternalError"),
        "{err:?}"
    );
    // (kube-rs retries 429 by itself: checked over plain HTTP)
    let throttled = raw(
        &c.url(),
        "GET",
        "/api/v1/namespaces/default/configmaps",
        &[],
        "",
    )
    .await;
    assert_eq!(
        (throttled.code, throttled.json()["reason"].as_str()),
        (429, Some("TooManyRequests"))
    );
    let err = api
        .patch(
            "before",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"a": "b"}})),
        )
        .await
        .unwrap_err();
    assert!(
        matches!(err, kube::Error::Api(ref s) if s.code == 500),
        "{err:?}"
    );
    let current = api.get("before").await.unwrap();
    let err = api
        .replace("before", &PostParams::default(), &current)
        .await
        .unwrap_err();
    assert!(
        matches!(err, kube::Error::Api(ref s) if s.code == 409 && s.reason == "Conflict"),
        "{err:?}"
    );
    // other verbs and resources are untouched
    assert!(api.get("before").await.is_ok());
    let secrets: Api<k8s_openapi::api::core::v1::Secret> =
        Api::namespaced(c.client().await, "default");
    secrets
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "s"}})).unwrap(),
        )
        .await
        .unwrap();
    // nothing was written by the refused requests
    assert!(api.get_opt("x").await.unwrap().is_none());
    assert!(
        c.store()
            .get("", "configmaps", "default", "before")
            .unwrap()
            .get("data")
            .is_none()
    );
    // the record shows the refused requests with their status
    let refused: Vec<(String, u16)> = c
        .requests()
        .iter()
        .filter(|r| r.resource == "configmaps" && r.status >= 400 && r.status != 404)
        .map(|r| (r.verb.clone(), r.status))
        .collect();
    assert_eq!(
        refused,
        [
            ("create".to_string(), 500),
            ("list".to_string(), 429),
            ("patch".to_string(), 500),
            ("update".to_string(), 409)
        ]
    );

    faults.clear();
    api.create(&PostParams::default(), &cm("x")).await.unwrap();
    c.shutdown().await;
}

#[tokio::test]
async fn a_watcher_survives_dropped_watch_connections() {
    let c = server_only().await;
    let api: Api<ConfigMap> = Api::namespaced(c.client().await, "default");
    let seen: Arc<Mutex<BTreeSet<String>>> = Arc::default();
    let s3 = seen.clone();
    let stream = watcher::watcher(api.clone(), watcher::Config::default())
        .default_backoff()
        .applied_objects();
    let follower = tokio::spawn(async move {
        let mut stream = std::pin::pin!(stream);
        while let Some(ev) = stream.next().await {
            if let Ok(o) = ev {
                s3.lock().unwrap().insert(o.name_any());
            }
        }
    });
    c.faults().set_watch_drop_probability(0.5);
    for i in 0..40 {
        api.create(&PostParams::default(), &cm(&format!("d-{i}")))
            .await
            .unwrap();
    }
    eventually("every object seen despite drops", || async {
        seen.lock().unwrap().len() == 40
    })
    .await;
    let watches = c
        .requests()
        .iter()
        .filter(|r| r.verb == "watch" && r.resource == "configmaps")
        .count();
    assert!(
        watches > 1,
        "the watch was dropped and resumed ({watches} watch requests)"
    );
    follower.abort();
    c.shutdown().await;
}

#[tokio::test]
async fn service_health_follows_the_ready_deployment_behind_it() {
    let c = server_only().await;
    let client = c.client().await;
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), "default");
    let services: Api<Service> = Api::namespaced(client.clone(), "default");
    let d = json!({"metadata": {"name": "cinder-api"}, "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "cinder-api"}},
        "template": {"metadata": {"labels": {"app": "cinder-api", "tier": "api"}}, "spec": {"containers": [{"name": "api", "image": "cinder"}]}}}});
    deployments
        .create(&PostParams::default(), &serde_json::from_value(d).unwrap())
        .await
        .unwrap();
    let s = json!({"metadata": {"name": "cinder-api"}, "spec": {"selector": {"app": "cinder-api"}, "ports": [{"port": 8776}]}});
    services
        .create(&PostParams::default(), &serde_json::from_value(s).unwrap())
        .await
        .unwrap();
    let url = c.url();
    let health = "/api/v1/namespaces/default/services/cinder-api:8776/proxy/healthcheck";

    let not_ready = raw(&url, "GET", health, &[], "").await;
    assert_eq!(not_ready.code, 503);
    deployments
        .patch_status(
            "cinder-api",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"readyReplicas": 1}})),
        )
        .await
        .unwrap();
    let ready = raw(&url, "GET", health, &[], "").await;
    assert_eq!((ready.code, ready.body.as_str()), (200, "OK"));
    let no_port = raw(
        &url,
        "GET",
        "/api/v1/namespaces/default/services/cinder-api/proxy/healthcheck",
        &[],
        "",
    )
    .await;
    assert_eq!(no_port.code, 200);
    let missing = raw(
        &url,
        "GET",
        "/api/v1/namespaces/default/services/nope/proxy/healthcheck",
        &[],
        "",
    )
    .await;
    assert_eq!(missing.code, 404);

    let faults = c.faults();
    faults.set_service_fault(ServiceFault {
        namespace: "default".into(),
        name: "cinder-api".into(),
        status: Some(500),
        delay: Duration::ZERO,
    });
    assert_eq!(raw(&url, "GET", health, &[], "").await.code, 500);
    faults.set_service_fault(ServiceFault {
        namespace: "default".into(),
        name: "cinder-api".into(),
        status: None,
        delay: Duration::from_millis(20),
    });
    assert_eq!(raw(&url, "GET", health, &[], "").await.code, 200);
    faults.clear_service_fault("default", "cinder-api");

    // no ready replica: unavailable again
    deployments
        .patch_status(
            "cinder-api",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"readyReplicas": 0}})),
        )
        .await
        .unwrap();
    assert_eq!(raw(&url, "GET", health, &[], "").await.code, 503);
    c.shutdown().await;
}
