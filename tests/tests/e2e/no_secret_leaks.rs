//! No value of any Secret appears in the events, in the pipelines snapshot, in the admin pages
//! or in the logs: a scenario touching every credential path (derived Secrets, RBD keyring,
//! rotation, a ServiceRemoveSkipped event), then a search of all of them for every value.

use cinder_e2e::deploy_helpers::http_get;
use cinder_e2e::*;
use cinder_operator::crd::{Cinder, CinderBackend};
use cinder_operator::http::{Binds, Endpoints, MetricsEndpoint, Readiness};
use cinder_operator::metrics::Metrics;
use k8s_openapi::api::core::v1::Event as CoreEvent;
use k8s_openapi::api::events::v1::Event;
use kube::Api;
use kube::api::ListParams;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn secret_values_never_leave_their_secrets() {
    let h = Harness::start().await.unwrap();
    let creds = Credentials::fresh("leak");
    let ceph_key = "AQBleakcheckKEY-7f3a==";
    let rotated_db = "rotated-leak-Pw-51c";
    create_cluster_store(&h.client).await.unwrap();
    create_credentials(&h.client, &creds).await.unwrap();
    put_secret(&h.client, "leak-key", &[("key", ceph_key)])
        .await
        .unwrap();
    create_cinder(&h.client, "leak", serde_json::json!({}))
        .await
        .unwrap();
    create_rbd_backend(&h.client, "leakpool", "leak", "leak-key")
        .await
        .unwrap();
    wait_cinder_condition(
        &h.client,
        "leak",
        "BackendsReady",
        "True",
        "AllBackendsProjected",
    )
    .await
    .unwrap();
    put_secret(
        &h.client,
        "cinder-db",
        &[("username", "cinder"), ("password", rotated_db)],
    )
    .await
    .unwrap();
    eventually("the rotated DSN", || async {
        secret_value(&h.client, "leak-db-connection", "connection")
            .await
            .filter(|v| v.contains(rotated_db))
    })
    .await
    .unwrap();
    // The admin pages (and their JSON) while the Cinder and its backend exist.
    let endpoints = Endpoints::start(
        &Binds {
            metrics: "127.0.0.1:0".into(),
            probes: "127.0.0.1:0".into(),
            admin: "127.0.0.1:0".into(),
        },
        MetricsEndpoint::new(Metrics::new_registry().0, h.ctx.metrics.clone(), None),
        Readiness::always(),
        cinder_operator::cmd_run::admin_sources(&h.ctx),
    )
    .unwrap();
    let admin = endpoints.admin_addr.to_string();
    let mut pages = String::new();
    for path in [
        "/",
        "/ui/cinders/cinder-e2e/leak",
        "/ui/transactions",
        "/ui/devices",
        "/pipelines",
        "/actors",
    ] {
        let (addr, path) = (admin.clone(), path.to_string());
        let (status, body) = tokio::task::spawn_blocking(move || http_get(&addr, &path))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(status, 200, "{body}");
        pages.push_str(&body);
    }
    assert!(
        pages.contains("data-step=\"Backends\""),
        "the Cinder's page rendered"
    );
    endpoints.stop().await;

    // An event: a backend whose parent is gone releases its finalizer.
    let cinders: Api<Cinder> = h.api();
    cinders.delete("leak", &Default::default()).await.unwrap();
    let backends: Api<CinderBackend> = h.api();
    backends
        .delete("leakpool", &Default::default())
        .await
        .unwrap();
    let events: Api<Event> = h.api();
    let listed = eventually("events", || {
        let events = events.clone();
        async move {
            let list = events.list(&ListParams::default()).await.ok()?;
            (!list.items.is_empty()).then_some(list.items)
        }
    })
    .await
    .unwrap();
    let core_events: Api<CoreEvent> = h.api();
    let core_listed = core_events
        .list(&ListParams::default())
        .await
        .map(|l| l.items)
        .unwrap_or_default();

    let mut values = creds.values();
    values.push(ceph_key.to_string());
    values.push(rotated_db.to_string());
    let events_text = format!(
        "{}{}",
        serde_json::to_string(&listed).unwrap(),
        serde_json::to_string(&core_listed).unwrap()
    );
    let snapshot = h.ctx.pipelines_snapshot().await.to_string();
    let logs = h.logs.text();
    assert!(!logs.is_empty(), "the log capture works");
    assert!(snapshot.contains("leak") || snapshot.contains("pipelines"));
    for v in &values {
        assert!(
            !events_text.contains(v.as_str()),
            "a Secret value appears in the events"
        );
        assert!(
            !snapshot.contains(v.as_str()),
            "a Secret value appears in the pipelines snapshot"
        );
        assert!(
            !logs.contains(v.as_str()),
            "a Secret value appears in the logs"
        );
        assert!(
            !pages.contains(v.as_str()),
            "a Secret value appears in the admin pages"
        );
    }
    h.stop().await.unwrap();
}
