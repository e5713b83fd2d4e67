//! The operator run in-process against the embedded cluster bootstrapped like `run --embedded`
//! (CRDs + deploy/samples): the samples progress, /metrics carries the pipeline families with
//! their labels (an injected API failure produces a labelled error series), /readyz turns 200
//! once the controllers synced, the admin views show the sample backends, and no value of any
//! sample Secret appears in any admin view.

use crate::support::*;
use cinder_lease::DeviceLockMetrics;
use cinder_operator::cmd_run::{admin_sources, readiness};
use cinder_operator::context::{OperatorContext, OperatorOptions};
use cinder_operator::crd::Cinder;
use cinder_operator::embedded;
use cinder_operator::http::{Binds, Endpoints, MetricsEndpoint};
use cinder_operator::metrics::Metrics;
use cinder_sim::{ClusterConfig, EmbeddedCluster, ErrorRule};
use kube::api::{Api, Patch, PatchParams};
use std::sync::Arc;

fn condition<'a>(
    states: &'a [embedded::SampleState],
    kind: &str,
    name: &str,
    t: &str,
) -> Option<&'a embedded::ConditionState> {
    states
        .iter()
        .find(|s| s.kind == kind && s.name == name)
        .and_then(|s| s.conditions.iter().find(|c| c.type_ == t))
}

fn series(text: &str, name: &str, labels: &[(&str, &str)]) -> bool {
    parse_openmetrics(text)
        .unwrap_or_else(|e| panic!("{e}\n{text}"))
        .iter()
        .any(|(n, l, _)| {
            n == name
                && labels
                    .iter()
                    .all(|(k, v)| l.get(*k).map(String::as_str) == Some(*v))
        })
}

/// The embedded cluster bootstrapped like `run --embedded`, the operator running on it, and its
/// endpoints on free ports.
struct Running {
    cluster: EmbeddedCluster,
    client: kube::Client,
    samples: Vec<embedded::Manifest>,
    ctx: Arc<OperatorContext>,
    endpoints: Endpoints,
    stop: tokio::sync::watch::Sender<bool>,
    operator: tokio::task::JoinHandle<anyhow::Result<()>>,
}

async fn start() -> Running {
    let cluster = EmbeddedCluster::start(ClusterConfig::default())
        .await
        .unwrap();
    let client = cluster.client().await;
    embedded::install_crds(&client).await.unwrap();
    let samples = embedded::read_bootstrap(&samples_dir()).unwrap();
    embedded::apply(&client, &samples).await.unwrap();

    let (mut registry, metrics) = Metrics::new_registry();
    let device_lock_metrics = DeviceLockMetrics::default();
    device_lock_metrics.register(&mut registry);
    let options = OperatorOptions {
        // The embedded cluster's Service names do not resolve on this host.
        health_check: cinder_operator::context::HealthCheckRoute::ApiServerProxy,
        device_lock_metrics,
        ..OperatorOptions::default()
    };
    let ctx = OperatorContext::new(client.clone(), options, Arc::new(metrics))
        .await
        .unwrap();
    let endpoints = Endpoints::start(
        &Binds {
            metrics: "127.0.0.1:0".into(),
            probes: "127.0.0.1:0".into(),
            admin: "127.0.0.1:0".into(),
        },
        MetricsEndpoint::new(registry, ctx.metrics.clone(), Some(ctx.coordinator.clone())),
        readiness(&ctx),
        admin_sources(&ctx),
    )
    .unwrap();
    let (stop, stop_rx) = tokio::sync::watch::channel(false);
    let operator = tokio::spawn(cinder_operator::controller::run_operator(
        ctx.clone(),
        stop_rx,
    ));

    // The samples progress: the Cinder's credentials gate passes and the backends are Ready.
    let tracked = embedded::tracked(&samples);
    assert_eq!(
        tracked.len(),
        4,
        "one Cinder, two backends, one backup backend"
    );
    eventually(
        "SecretsReady=True on the sample Cinder and Ready satellites",
        || async {
            let states = embedded::look(&client, &tracked).await;
            condition(&states, "Cinder", "cinder", "SecretsReady")
                .is_some_and(|c| c.status == "True")
                && ["nfs", "ceph"].iter().all(|b| {
                    condition(&states, "CinderBackend", b, "Ready")
                        .is_some_and(|c| c.status == "True")
                })
        },
    )
    .await;
    Running {
        cluster,
        client,
        samples,
        ctx,
        endpoints,
        stop,
        operator,
    }
}

impl Running {
    /// Stops new passes, waits for the controllers, drains the coordinator, stops everything.
    async fn shutdown(self) {
        self.stop.send(true).unwrap();
        self.operator.await.unwrap().unwrap();
        let drained = self.ctx.coordinator.shutdown().await.unwrap();
        drained.release().await;
        self.endpoints.stop().await;
        self.cluster.shutdown().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn operator_on_the_embedded_cluster_serves_metrics_and_views_without_secrets() {
    let r = start().await;
    let (cluster, client, endpoints) = (&r.cluster, &r.client, &r.endpoints);
    let probes = endpoints.probes_addr;
    eventually(
        "/readyz answers 200 once the controllers synced",
        || async { get(probes, "/readyz").await.status == 200 },
    )
    .await;
    let metrics_addr = endpoints.metrics_addr;
    eventually("step durations with sub_reconciler labels", || async {
        let text = get(metrics_addr, "/metrics").await.body;
        [
            "Secrets",
            "DBConnectionSecret",
            "TransportURLSecret",
            "Backends",
        ]
        .iter()
        .all(|step| {
            series(
                &text,
                "cinder_operator_reconcile_duration_seconds_count",
                &[("sub_reconciler", step)],
            )
        })
    })
    .await;

    // A failing read of the secret store makes the Secrets step fail: a labelled error series.
    cluster.faults().add_error_rule(ErrorRule::always(
        Some("get"),
        Some("clustersecretstores"),
        500,
    ));
    let cinders: Api<Cinder> = Api::namespaced(client.clone(), "openstack");
    let mut nudge = 0;
    eventually("cinder_operator_reconcile_errors_total{sub_reconciler=Secrets,condition_type=SecretsReady}", || {
        nudge += 1;
        let cinders = cinders.clone();
        async move {
            let patch = serde_json::json!({"metadata": {"annotations": {"test.cinder.openstack.c5c3.io/nudge": nudge.to_string()}}});
            let _ = cinders.patch("cinder", &PatchParams::default(), &Patch::Merge(&patch)).await;
            let text = get(metrics_addr, "/metrics").await.body;
            series(
                &text,
                "cinder_operator_reconcile_errors_total",
                &[("sub_reconciler", "Secrets"), ("condition_type", "SecretsReady")],
            )
        }
    })
    .await;
    cluster.faults().clear();
    let answer = get(metrics_addr, "/metrics").await;
    assert_eq!(
        answer.headers["content-type"],
        "application/openmetrics-text; version=1.0.0; charset=utf-8"
    );
    assert!(answer.body.ends_with("# EOF\n"));

    // Admin views: pipelines know the sample Cinder; nothing shows a sample Secret value.
    let admin = endpoints.admin_addr;
    let pipelines = get_json(admin, "/pipelines").await;
    assert!(pipelines.to_string().contains("\"cinder\""), "{pipelines}");
    let secrets = sample_secret_values();
    for path in ["/actors", "/transactions", "/pipelines", "/devices", "/"] {
        let a = get(admin, path).await;
        assert_eq!(a.status, 200, "GET {path}");
        assert_no_secret(path, &a.body, &secrets);
    }

    assert!(!r.samples.is_empty());
    r.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_actors_list_the_sample_backends() {
    let r = start().await;
    let admin = r.endpoints.admin_addr;
    eventually("/actors lists the sample backends", || async {
        let actors = get_json(admin, "/actors").await;
        let ids: Vec<String> = actors["actors"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter(|x| x["kind"] == "backend")
                    .filter_map(|x| x["id"].as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default();
        ["openstack/nfs", "openstack/ceph"]
            .iter()
            .all(|b| ids.iter().any(|id| id.ends_with(b)))
    })
    .await;
    r.shutdown().await;
}
