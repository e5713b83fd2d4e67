//! The admin, probe and metrics endpoints served over real listeners against a coordinator the
//! test loads itself: actor listing and lookup (404 with a message), held locks and waiters,
//! devices, pipelines, the HTML pages (escaped, under the Content-Security-Policy), redaction,
//! the bounds on list views and answer sizes, readiness, and the OpenMetrics text.

use crate::support::*;
use cinder_actors::Kind;
use cinder_actors::query::{query, upsert_backend};
use cinder_lease::{DeviceLockMetrics, DeviceLocks, DeviceLocksConfig, Priority};
use cinder_operator::http::{
    AdminSources, Binds, Endpoints, Inventory, InventorySource, MetricsEndpoint, PipelinesSource,
    Readiness,
};
use cinder_operator::metrics::{Metrics, OPENMETRICS_CONTENT_TYPE};
use cinder_sim::{ClusterConfig, EmbeddedCluster};
use serde_json::json;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

const SECRET: &str = "s3cr3t-value-123";
const URL_PASSWORD: &str = "pw-secret-999";

struct Fixture {
    cluster: EmbeddedCluster,
    coordinator: cinder_actors::CoordinatorHandle,
    devices: DeviceLocks,
    metrics: Arc<Metrics>,
    ready: Arc<AtomicBool>,
    endpoints: Endpoints,
}

async fn fixture() -> Fixture {
    let pipelines: PipelinesSource = Arc::new(|| {
        Box::pin(async {
            json!({"pipelines": [{"namespace": "openstack", "name": "<b>cinder</b>",
                                  "currentStep": "Secrets", "token": SECRET}]})
        })
    });
    fixture_with(pipelines).await
}

/// The fixture with `pipelines` as the `/pipelines` source.
async fn fixture_with(pipelines: PipelinesSource) -> Fixture {
    let cluster = EmbeddedCluster::start(ClusterConfig::default())
        .await
        .unwrap();
    let coordinator = coordinator();
    coordinator
        .load(
            Kind::Backend,
            "openstack/nfs",
            json!({"name": "nfs", "type": "NFS", "password": SECRET,
                   "broker": format!("rabbit://cinder:{URL_PASSWORD}@rabbit:5672/")}),
        )
        .await
        .unwrap();
    coordinator
        .load(
            Kind::Backend,
            "openstack/ceph",
            json!({"name": "ceph", "type": "RBD", "key": SECRET}),
        )
        .await
        .unwrap();
    // Resource actors start on the first transaction that touches a value; after that they
    // live as long as the value does.
    let touched = coordinator
        .lock(vec![
            query([upsert_backend("openstack/nfs", "", "")]),
            query([upsert_backend("openstack/ceph", "", "")]),
        ])
        .await
        .unwrap();
    touched.unlock().await;
    let devices = DeviceLocks::new(
        coordinator.clone(),
        cluster.client().await,
        DeviceLocksConfig::new("default"),
        DeviceLockMetrics::default(),
    )
    .unwrap();
    let (mut registry, metrics) = Metrics::new_registry();
    DeviceLockMetrics::default().register(&mut registry);
    let metrics = Arc::new(metrics);
    let ready = Arc::new(AtomicBool::new(false));
    let inventory: InventorySource = Arc::new(|| Box::pin(async { Ok(Inventory::default()) }));
    let r = ready.clone();
    let endpoints = Endpoints::start(
        &Binds {
            metrics: "127.0.0.1:0".into(),
            probes: "127.0.0.1:0".into(),
            admin: "127.0.0.1:0".into(),
        },
        MetricsEndpoint::new(registry, metrics.clone(), Some(coordinator.clone())),
        Readiness::new(move || {
            (!r.load(Ordering::SeqCst)).then(|| "controllers not synced".to_string())
        }),
        AdminSources {
            coordinator: coordinator.clone(),
            devices: devices.clone(),
            pipelines,
            inventory,
            shards: cinder_operator::shards::ShardView::all(),
        },
    )
    .unwrap();
    Fixture {
        cluster,
        coordinator,
        devices,
        metrics,
        ready,
        endpoints,
    }
}

impl Fixture {
    async fn stop(self) {
        self.endpoints.stop().await;
        self.cluster.shutdown().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn actors_list_and_lookup_with_values_redacted() {
    let f = fixture().await;
    let admin = f.endpoints.admin_addr;
    let actors = get(admin, "/actors").await;
    assert_eq!(actors.status, 200);
    assert_eq!(actors.headers["content-type"], "application/json");
    let v: serde_json::Value = serde_json::from_str(&actors.body).unwrap();
    let ids: Vec<(&str, &str)> = v["actors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| (a["kind"].as_str().unwrap(), a["id"].as_str().unwrap()))
        .collect();
    assert!(ids.contains(&("backend", "openstack/nfs")), "{ids:?}");
    assert!(ids.contains(&("backend", "openstack/ceph")), "{ids:?}");
    assert!(
        !actors.body.contains(SECRET) && !actors.body.contains(URL_PASSWORD),
        "{}",
        actors.body
    );

    let one = get_json(admin, "/actors/backend/openstack%2Fnfs").await;
    assert_eq!(one["value"]["name"], "nfs");
    assert_eq!(one["value"]["password"], "<redacted>");
    assert_eq!(
        one["value"]["broker"],
        "rabbit://cinder:<redacted>@rabbit:5672/"
    );
    assert_eq!(one["exists"], true);

    let missing = get(admin, "/actors/backend/nothing-here").await;
    assert_eq!(missing.status, 404);
    let err: serde_json::Value = serde_json::from_str(&missing.body).unwrap();
    assert!(
        err["error"].as_str().unwrap().contains("nothing-here"),
        "{}",
        missing.body
    );

    let unknown = get(admin, "/no-such-view").await;
    assert_eq!(unknown.status, 404);
    assert!(unknown.body.contains("/actors"), "{}", unknown.body);
    f.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_views_and_answers_are_bounded() {
    use cinder_operator::http::admin::{MAX_LIST_ENTRIES, MAX_RESPONSE_BYTES};
    // A pipeline record whose name alone is above the size limit: both its JSON view and the
    // HTML overview that lists it are too large to send.
    let huge = "x".repeat(MAX_RESPONSE_BYTES + 1024);
    let pipelines: PipelinesSource = Arc::new(move || {
        let huge = huge.clone();
        Box::pin(async move {
            json!({"pipelines": [{"namespace": "openstack", "name": huge, "currentStep": "Secrets"}]})
        })
    });
    let f = fixture_with(pipelines).await;
    let admin = f.endpoints.admin_addr;
    for path in ["/pipelines", "/", "/?fragment=main"] {
        let answer = get(admin, path).await;
        assert_eq!(answer.status, 507, "{path}");
        assert!(
            answer.body.len() < 1024,
            "{path}: {} bytes",
            answer.body.len()
        );
        let err: serde_json::Value = serde_json::from_str(&answer.body).unwrap();
        assert!(
            err["error"]
                .as_str()
                .is_some_and(|e| e.contains(&MAX_RESPONSE_BYTES.to_string())),
            "{path}: {}",
            answer.body
        );
    }

    // More resource actors than a list view carries.
    let extra = MAX_LIST_ENTRIES + 3;
    for i in 0..extra {
        let id = format!("bulk/b{i}");
        f.coordinator
            .load(Kind::Backend, &id, json!({"name": format!("b{i}")}))
            .await
            .unwrap();
        let touched = f
            .coordinator
            .lock(vec![query([upsert_backend(&id, "", "")])])
            .await
            .unwrap();
        touched.unlock().await;
    }
    let actors = get_json(admin, "/actors").await;
    // At least the fixture's two backends and the bulk ones.
    let count = actors["count"].as_u64().unwrap_or(0) as usize;
    assert!(count >= extra + 2, "{count} actors counted");
    assert_eq!(actors["truncated"], true);
    assert_eq!(
        actors["actors"].as_array().map(Vec::len),
        Some(MAX_LIST_ENTRIES)
    );
    f.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transactions_show_held_locks_waiters_and_age() {
    let f = fixture().await;
    let admin = f.endpoints.admin_addr;
    let held = f
        .coordinator
        .lock(vec![query([upsert_backend("openstack/nfs", "", "")])])
        .await
        .unwrap();
    let c = f.coordinator.clone();
    let waiter = tokio::spawn(async move {
        let l = c
            .lock(vec![query([upsert_backend("openstack/nfs", "", "")])])
            .await
            .unwrap();
        l.unlock().await;
    });
    let waiting = |v: &serde_json::Value| {
        v["transactions"].as_array().is_some_and(|ts| {
            ts.iter()
                .any(|t| t["waiting_on"]["lock"]["id"] == "openstack/nfs")
        })
    };
    eventually("a waiter on openstack/nfs", || async {
        waiting(&get_json(admin, "/transactions").await)
    })
    .await;
    let view = get_json(admin, "/transactions").await;
    assert!(waiting(&view), "{view}");
    let ts = view["transactions"].as_array().unwrap();
    assert_eq!(view["count"], ts.len());
    let holder = ts
        .iter()
        .find(|t| {
            t["held"]
                .as_array()
                .unwrap()
                .iter()
                .any(|l| l["kind"] == "backend" && l["id"] == "openstack/nfs")
        })
        .expect("the holder shows its lock");
    assert!(holder["age_ms"].is_u64(), "{holder}");
    assert_eq!(holder["what"], "lock");

    // The gauge follows the coordinator at scrape time.
    let metrics = get(f.endpoints.metrics_addr, "/metrics").await.body;
    let samples = parse_openmetrics(&metrics).unwrap();
    let in_flight = samples
        .iter()
        .find(|(n, _, _)| n == "cinder_operator_transactions_in_flight")
        .map(|s| s.2)
        .unwrap();
    assert!(in_flight >= 1.0, "{metrics}");

    held.unlock().await;
    waiter.await.unwrap();
    eventually("no transaction left", || async {
        get_json(admin, "/transactions").await["count"] == 0
    })
    .await;
    f.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn devices_and_pipelines_views() {
    let f = fixture().await;
    let admin = f.endpoints.admin_addr;
    let guard = f.devices.lock("dev-1", Priority::High).await.unwrap();
    let devices = get_json(admin, "/devices").await;
    assert_eq!(devices["namespace"], "default");
    let shards = get_json(admin, "/shards").await;
    assert_eq!(
        shards,
        serde_json::json!({"sharded": false, "count": 0, "held": []})
    );
    let d = devices["devices"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["device"] == "dev-1")
        .expect("dev-1 listed");
    assert!(d["holder"].is_object(), "{d}");
    assert_eq!(d["lease_held_here"], true);
    guard.release().await;

    let pipelines = get_json(admin, "/pipelines").await;
    assert_eq!(pipelines["pipelines"][0]["currentStep"], "Secrets");
    assert_eq!(pipelines["pipelines"][0]["token"], "<redacted>");
    f.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn html_pages_are_escaped_redacted_and_under_the_csp() {
    let f = fixture().await;
    let admin = f.endpoints.admin_addr;
    let held = f
        .devices
        .lock("dev-<i>1</i>", Priority::High)
        .await
        .unwrap();
    for path in ["/", "/ui/transactions", "/ui/devices", "/?fragment=main"] {
        let page = get(admin, path).await;
        assert_eq!(page.status, 200, "{path}");
        assert_eq!(page.headers["content-type"], "text/html; charset=utf-8");
        assert_eq!(
            page.headers["content-security-policy"],
            cinder_operator::http::ui::html::CSP
        );
        assert!(
            !page.body.contains("<b>") && !page.body.contains("<i>"),
            "{path}: raw markup from data"
        );
        assert!(
            !page.body.contains(SECRET) && !page.body.contains(URL_PASSWORD),
            "{path}"
        );
    }
    let overview = get(admin, "/").await.body;
    assert!(
        overview.contains("openstack/&lt;b&gt;cinder&lt;/b&gt;"),
        "{overview}"
    );
    assert!(overview.contains("<script src=\"/ui/admin.js\" defer></script>"));
    let fragment = get(admin, "/?fragment=main").await.body;
    assert!(fragment.starts_with("<h1>Cinders</h1>"), "{fragment}");
    let devices = get(admin, "/ui/devices").await.body;
    assert!(
        devices.contains("dev-&lt;i&gt;1&lt;/i&gt;") && devices.contains("this replica"),
        "{devices}"
    );
    let missing = get(admin, "/ui/cinders/openstack/nope").await;
    assert_eq!(missing.status, 404);
    held.release().await;
    f.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn probes_follow_readiness() {
    let f = fixture().await;
    let probes = f.endpoints.probes_addr;
    let health = get(probes, "/healthz").await;
    assert_eq!((health.status, health.body.as_str()), (200, "ok\n"));
    let not_ready = get(probes, "/readyz").await;
    assert_eq!(not_ready.status, 503);
    assert!(
        not_ready.body.contains("controllers not synced"),
        "{}",
        not_ready.body
    );
    f.ready.store(true, Ordering::SeqCst);
    assert_eq!(get(probes, "/readyz").await.status, 200);
    f.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_are_openmetrics_with_the_pipeline_families() {
    let f = fixture().await;
    f.metrics
        .observe_step("Secrets", std::time::Duration::from_millis(3));
    f.metrics.count_step_error("Backends", "BackendsReady");
    let answer = get(f.endpoints.metrics_addr, "/metrics").await;
    assert_eq!(answer.status, 200);
    assert_eq!(answer.headers["content-type"], OPENMETRICS_CONTENT_TYPE);
    let samples =
        parse_openmetrics(&answer.body).unwrap_or_else(|e| panic!("{e}\n{}", answer.body));
    assert!(samples.iter().any(|(n, l, v)| n
        == "cinder_operator_reconcile_duration_seconds_count"
        && l.get("sub_reconciler").map(String::as_str) == Some("Secrets")
        && *v == 1.0));
    assert!(
        samples
            .iter()
            .any(|(n, l, v)| n == "cinder_operator_reconcile_errors_total"
                && l.get("sub_reconciler").map(String::as_str) == Some("Backends")
                && l.get("condition_type").map(String::as_str) == Some("BackendsReady")
                && *v == 1.0)
    );
    // Device-lock families registered in the same registry are served too.
    assert!(
        answer.body.contains("# TYPE cinder_operator_device_lock"),
        "{}",
        answer.body
    );
    f.stop().await;
}

#[test]
fn the_openmetrics_checker_rejects_malformed_text() {
    assert!(
        parse_openmetrics("# TYPE a counter\na_total 1\n").is_err(),
        "no EOF"
    );
    assert!(
        parse_openmetrics("b_total 1\n# EOF\n").is_err(),
        "undeclared family"
    );
    assert!(
        parse_openmetrics("# TYPE a counter\na_total{x=\"1\" 1\n# EOF\n").is_err(),
        "unclosed labels"
    );
    assert!(
        parse_openmetrics("# TYPE a counter\na_total one\n# EOF\n").is_err(),
        "bad value"
    );
    assert!(
        parse_openmetrics("# TYPE a counter\n# TYPE a counter\n# EOF\n").is_err(),
        "typed twice"
    );
    let ok = parse_openmetrics(
        "# HELP a Things.\n# TYPE a counter\na_total{x=\"1\",y=\"2\"} 3\n# EOF\n",
    )
    .unwrap();
    assert_eq!(ok[0].1["y"], "2");
}
