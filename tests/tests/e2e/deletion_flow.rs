//! Deleting a Cinder: the finalizer issues Delete on the MariaDB Database/User/Grant and stays
//! (FinalizingDatabase) while mariadb-operator still holds them, then is released
//! (DatabaseFinalized); the Cinder's per-CR metric series leave the registry output; a backend
//! whose parent Cinder is gone releases its finalizer with ServiceRemoveSkipped.

use cinder_e2e::database_helpers::*;
use cinder_e2e::test_cluster::TestCluster;
use cinder_e2e::*;
use cinder_operator::context::{OperatorContext, OperatorOptions};
use cinder_operator::controller::run_operator;
use cinder_operator::crd::{Cinder, CinderBackend};
use cinder_operator::metrics::{JobKind, JobResult, Metrics, encode_openmetrics};
use cinder_operator::names;
use cinder_sim::ClusterConfig;
use kube::Api;
use std::sync::Arc;
use std::time::Duration;

/// A cluster (embedded, or real with `CINDER_E2E_CLUSTER=real`) and an in-process operator
/// whose metrics registry the test keeps.
struct Operator {
    cluster: TestCluster,
    client: kube::Client,
    ctx: Arc<OperatorContext>,
    /// The operator's metrics registry as OpenMetrics text.
    encode: Box<dyn Fn() -> String + Send + Sync>,
    shutdown: tokio::sync::watch::Sender<bool>,
    task: tokio::task::JoinHandle<anyhow::Result<()>>,
}

async fn start(finalizer_delay: Duration) -> Operator {
    let _logs = capture_logs();
    let mut config = ClusterConfig::default();
    config.controllers.secret_stores.switch =
        cinder_sim::controllers::config::Switch::on(Duration::from_millis(50));
    config.controllers.mariadb.finalizer_delay = finalizer_delay;
    let cluster = TestCluster::start(config).await.unwrap();
    let client = cluster.client().await;
    install_crds(&client).await.unwrap();
    create_namespace(&client, NS).await.unwrap();
    let (registry, metrics) = Metrics::new_registry();
    let options = OperatorOptions {
        // The embedded cluster's Service names do not resolve on this host.
        health_check: cinder_operator::context::HealthCheckRoute::ApiServerProxy,
        lease_namespace: NS.to_string(),
        ..Default::default()
    };
    let ctx = OperatorContext::new(client.clone(), options, Arc::new(metrics))
        .await
        .unwrap();
    let (shutdown, rx) = tokio::sync::watch::channel(false);
    let task = tokio::spawn(run_operator(ctx.clone(), rx));
    eventually("the operator is ready", || {
        let ctx = ctx.clone();
        async move { ctx.is_ready().then_some(()) }
    })
    .await
    .unwrap();
    let encode = Box::new(move || encode_openmetrics(&registry).unwrap());
    Operator {
        cluster,
        client,
        ctx,
        encode,
        shutdown,
        task,
    }
}

impl Operator {
    fn series_of(&self, cinder: &str) -> Vec<String> {
        let text = (self.encode)();
        let label = format!("cinder=\"{cinder}\"");
        text.lines()
            .filter(|l| !l.starts_with('#') && l.contains(&label))
            .map(str::to_string)
            .collect()
    }

    async fn stop(self) {
        let _ = self.shutdown.send(true);
        let _ = tokio::time::timeout(EVENTUALLY, self.task).await;
        self.cluster.shutdown().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deletion_waits_for_the_database_then_releases_and_forgets_the_metrics() {
    let op = start(Duration::from_secs(4)).await;
    let client = op.client.clone();
    database_environment(&client, "deletion").await.unwrap();
    create_cinder(&client, "doomed", serde_json::json!({}))
        .await
        .unwrap();
    create_nfs_backend(&client, "nfs1", "doomed").await.unwrap();
    wait_cinder_condition(&client, "doomed", "DatabaseReady", "True", "DatabaseSynced")
        .await
        .unwrap();
    // The Database step feeds a db_sync pair of its own (DatabaseServices::for_env), not the
    // served registry's: the test feeds the served pair the way a db-sync completion does.
    op.ctx.metrics.job(JobKind::DbSync).observe(
        NS,
        "doomed",
        JobResult::Succeeded,
        Duration::from_secs(3),
    );
    let series = op.series_of("doomed");
    assert!(
        series
            .iter()
            .any(|l| l.starts_with("cinder_operator_db_sync_total")),
        "{series:#?}"
    );
    let backends: Api<CinderBackend> = Api::namespaced(client.clone(), NS);
    eventually("the backend's finalizer", || {
        let backends = backends.clone();
        async move {
            let b = backends.get("nfs1").await.ok()?;
            b.metadata
                .finalizers
                .unwrap_or_default()
                .iter()
                .any(|f| f == names::SERVICE_REMOVE_FINALIZER)
                .then_some(())
        }
    })
    .await
    .unwrap();
    for kind in ["Database", "User", "Grant"] {
        assert!(
            mariadb_object(&client, kind, "doomed").await.is_some(),
            "{kind}"
        );
    }

    let cinders: Api<Cinder> = Api::namespaced(client.clone(), NS);
    cinders.delete("doomed", &Default::default()).await.unwrap();

    // mariadb-operator holds the three objects for a while: the Cinder stays, with the event.
    let event = eventually("a FinalizingDatabase event", || {
        let client = client.clone();
        async move {
            cinder_events(&client, "doomed", "FinalizingDatabase")
                .await
                .into_iter()
                .next()
        }
    })
    .await
    .unwrap();
    let note = event.note.unwrap_or_default();
    assert!(note.contains("Database/doomed"), "{note}");
    let held = cinders.get("doomed").await.unwrap();
    assert!(
        held.metadata
            .finalizers
            .unwrap_or_default()
            .iter()
            .any(|f| f == names::CINDER_FINALIZER)
    );
    let db = mariadb_object(&client, "Database", "doomed").await;
    assert!(
        db.is_some_and(|d| d.metadata.deletion_timestamp.is_some()),
        "Delete was issued on the Database"
    );

    // Then the finalizer is released.
    eventually("the Cinder leaves", || {
        let cinders = cinders.clone();
        async move {
            cinders
                .get_opt("doomed")
                .await
                .ok()?
                .is_none()
                .then_some(())
        }
    })
    .await
    .unwrap();
    eventually("a DatabaseFinalized event", || {
        let client = client.clone();
        async move {
            cinder_events(&client, "doomed", "DatabaseFinalized")
                .await
                .into_iter()
                .next()
        }
    })
    .await
    .unwrap();
    for kind in ["Database", "User", "Grant"] {
        assert!(
            mariadb_object(&client, kind, "doomed").await.is_none(),
            "{kind} left behind"
        );
    }
    assert_eq!(op.series_of("doomed"), Vec::<String>::new());

    // The orphaned backend waits for its parent, and deleting it releases its finalizer.
    wait_satellite_condition::<CinderBackend>(
        &client,
        "nfs1",
        "CredentialsReady",
        "False",
        "WaitingForParent",
    )
    .await
    .unwrap();
    backends.delete("nfs1", &Default::default()).await.unwrap();
    eventually("the backend leaves", || {
        let backends = backends.clone();
        async move { backends.get_opt("nfs1").await.ok()?.is_none().then_some(()) }
    })
    .await
    .unwrap();
    let events: Api<k8s_openapi::api::events::v1::Event> = Api::namespaced(client.clone(), NS);
    eventually("a ServiceRemoveSkipped event on the backend", || {
        let events = events.clone();
        async move {
            let list = events.list(&Default::default()).await.ok()?;
            list.items
                .iter()
                .any(|e| {
                    e.reason.as_deref() == Some("ServiceRemoveSkipped")
                        && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("nfs1")
                })
                .then_some(())
        }
    })
    .await
    .unwrap();
    op.stop().await;
}
