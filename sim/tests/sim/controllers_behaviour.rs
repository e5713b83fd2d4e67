//! The simulated controllers against a running embedded cluster, through kube-rs like the
//! operator: Deployments roll out, Jobs run pods with configured exit codes and retry, CronJobs
//! fire on trigger and honour suspend and Forbid, mariadb-operator / external-secrets / Gateway
//! API objects become Ready (or stay refused as configured), switched-off controllers leave
//! objects alone, and disabled fixtures leave their CRDs absent.

use std::future::Future;
use std::time::Duration;

use cinder_sim::controllers::{
    ControllersConfig, ControllersHandle, FiringOutcome, FixtureSet, JobResult, JobRule,
    PodOutcome, Switch, kinds,
};
use cinder_sim::{ClusterConfig, EmbeddedCluster};
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use k8s_openapi::api::batch::v1::{CronJob, Job};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::{WatchStreamExt, watcher};
use regex::Regex;
use serde_json::{Value, json};

const FAST: Duration = Duration::from_millis(100);

async fn start(config: ControllersConfig) -> EmbeddedCluster {
    EmbeddedCluster::start(ClusterConfig {
        controllers: config,
        ..ClusterConfig::default()
    })
    .await
    .unwrap()
}

fn fast_config() -> ControllersConfig {
    let mut config = ControllersConfig::default();
    config.deployments.switch = Switch::on(FAST);
    config.jobs.switch = Switch::on(FAST);
    config.mariadb.switch = Switch::on(FAST);
    config.mariadb.finalizer_delay = Duration::from_millis(300);
    config.secret_stores.switch = Switch::on(FAST);
    config.gateways.switch = Switch::on(FAST);
    config.autoscalers = Switch::on(FAST);
    config
}

fn handle(cluster: &EmbeddedCluster) -> &ControllersHandle {
    cluster.controllers().unwrap()
}

/// Polls `probe` every 50 ms for up to 60 s until it yields a value.
async fn eventually<T, F, Fut>(what: &str, mut probe: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(value) = probe().await {
            return value;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn condition<'a>(status: &'a Value, kind: &str) -> Option<&'a Value> {
    status
        .get("conditions")?
        .as_array()?
        .iter()
        .find(|c| c["type"] == kind)
}

fn condition_is(status: &Value, kind: &str, want: &str) -> bool {
    condition(status, kind).is_some_and(|c| c["status"] == want)
}

fn json_of<T: serde::Serialize>(value: &T) -> Value {
    serde_json::to_value(value).unwrap()
}

fn deployment(name: &str, replicas: i32) -> Deployment {
    serde_json::from_value(json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "api", "image": "cinder:2025.2"}]}
            }
        }
    }))
    .unwrap()
}

fn job(name: &str, backoff_limit: i32) -> Job {
    serde_json::from_value(json!({
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "labels": {"app": "cinder"}},
        "spec": {
            "backoffLimit": backoff_limit,
            "template": {
                "metadata": {"labels": {"app": "cinder"}},
                "spec": {"restartPolicy": "Never", "containers": [{"name": "manage", "image": "cinder:2025.2"}]}
            }
        }
    }))
    .unwrap()
}

async fn dynamic_create(
    client: &kube::Client,
    kind: kinds::Kind,
    namespace: Option<&str>,
    body: Value,
) -> DynamicObject {
    let resource = kind.resource();
    let api: Api<DynamicObject> = match namespace {
        Some(ns) => Api::namespaced_with(client.clone(), ns, &resource),
        None => Api::all_with(client.clone(), &resource),
    };
    let mut object: DynamicObject = serde_json::from_value(body).unwrap();
    object.types = Some(kube::core::TypeMeta {
        api_version: resource.api_version.clone(),
        kind: resource.kind.clone(),
    });
    api.create(&PostParams::default(), &object).await.unwrap()
}

async fn dynamic_status(
    client: &kube::Client,
    kind: kinds::Kind,
    namespace: Option<&str>,
    name: &str,
) -> Option<Value> {
    let resource = kind.resource();
    let api: Api<DynamicObject> = match namespace {
        Some(ns) => Api::namespaced_with(client.clone(), ns, &resource),
        None => Api::all_with(client.clone(), &resource),
    };
    let object = api.get_opt(name).await.unwrap()?;
    object.data.get("status").cloned()
}

#[tokio::test]
async fn deployment_becomes_ready_and_reconverges_after_a_template_change() {
    let mut config = fast_config();
    config.deployments.switch = Switch::on(Duration::from_secs(1));
    config.deployments.held.insert("default/stalled");
    let cluster = start(config).await;
    let client = cluster.client().await;
    let api: Api<Deployment> = Api::namespaced(client.clone(), "default");
    api.create(&PostParams::default(), &deployment("stalled", 1))
        .await
        .unwrap();
    api.create(&PostParams::default(), &deployment("api", 2))
        .await
        .unwrap();

    let ready = eventually("deployment ready", || async {
        let status = json_of(&api.get("api").await.unwrap().status);
        (status["readyReplicas"] == 2 && status["observedGeneration"] == 1).then_some(status)
    })
    .await;
    assert_eq!(ready["updatedReplicas"], 2);
    assert_eq!(ready["availableReplicas"], 2);
    assert!(condition_is(&ready, "Available", "True"));
    assert!(condition_is(&ready, "Progressing", "True"));

    // Follow every status the rollout writes through a watch, from the current version on.
    let params = watcher::Config::default().fields("metadata.name=api");
    let mut statuses = watcher::watcher(api.clone(), params)
        .applied_objects()
        .boxed();
    let listed = statuses.try_next().await.unwrap().unwrap();
    assert_eq!(listed.metadata.generation, Some(1));
    let patch = json!({"spec": {"template": {"metadata": {"annotations": {"rollout": "2"}}}}});
    api.patch("api", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    let mut saw_lagging = false;
    let converged = tokio::time::timeout(Duration::from_secs(60), async {
        while let Some(object) = statuses.try_next().await.unwrap() {
            let status = json_of(&object.status);
            if status["observedGeneration"] != 2 {
                continue;
            }
            if status["updatedReplicas"] == 0 {
                saw_lagging = true;
            }
            if status["updatedReplicas"] == 2 && status["readyReplicas"] == 2 {
                return status;
            }
        }
        panic!("watch ended");
    })
    .await
    .unwrap();
    assert!(saw_lagging, "the rollout first reports no replica updated");
    assert_eq!(converged["availableReplicas"], 2);
    assert_eq!(api.get("api").await.unwrap().metadata.generation, Some(2));

    // A held Deployment never finishes its rollout until released.
    let stalled = json_of(&api.get("stalled").await.unwrap().status);
    assert_eq!(stalled["observedGeneration"], 1);
    assert_eq!(stalled["updatedReplicas"], 0);
    assert!(condition_is(&stalled, "Available", "False"));
    handle(&cluster).update_config(|c| {
        c.deployments.held.remove("default/stalled");
    });
    eventually("released deployment ready", || async {
        let status = json_of(&api.get("stalled").await.unwrap().status);
        (status["readyReplicas"] == 1 && status["updatedReplicas"] == 1).then_some(())
    })
    .await;

    // An HPA on it reports the Deployment's replicas.
    let hpas: Api<HorizontalPodAutoscaler> = Api::namespaced(client.clone(), "default");
    let hpa: HorizontalPodAutoscaler = serde_json::from_value(json!({
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": "api"},
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "api"},
            "minReplicas": 1,
            "maxReplicas": 5
        }
    }))
    .unwrap();
    hpas.create(&PostParams::default(), &hpa).await.unwrap();
    eventually("hpa status", || async {
        let status = json_of(&hpas.get("api").await.unwrap().status);
        (status["currentReplicas"] == 2 && status["desiredReplicas"] == 2).then_some(())
    })
    .await;

    // A VPA on it recommends resources for its container.
    dynamic_create(
        &client,
        kinds::VERTICAL_POD_AUTOSCALER,
        Some("default"),
        json!({"metadata": {"name": "api"}, "spec": {"targetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "api"}, "updatePolicy": {"updateMode": "Off"}}}),
    )
    .await;
    let vpa = eventually("vpa recommendation", || async {
        let status = dynamic_status(
            &client,
            kinds::VERTICAL_POD_AUTOSCALER,
            Some("default"),
            "api",
        )
        .await?;
        condition_is(&status, "RecommendationProvided", "True").then_some(status)
    })
    .await;
    assert_eq!(
        vpa["recommendation"]["containerRecommendations"][0]["containerName"],
        "api"
    );
    cluster.shutdown().await;
}

#[tokio::test]
async fn jobs_end_with_configured_exit_codes_and_retry_with_new_pods() {
    let mut config = fast_config();
    config.jobs.rules = vec![
        JobRule::new(
            Regex::new("^broken-").unwrap(),
            PodOutcome::exit(2, "check failed"),
        ),
        JobRule::new(
            Regex::new("^flaky-").unwrap(),
            PodOutcome::exit(2, "first try failed"),
        )
        .then(PodOutcome::exit(0, "all good")),
    ];
    let cluster = start(config).await;
    let client = cluster.client().await;
    let jobs: Api<Job> = Api::namespaced(client.clone(), "default");
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let broken = jobs
        .create(&PostParams::default(), &job("broken-migrate", 1))
        .await
        .unwrap();
    let flaky = jobs
        .create(&PostParams::default(), &job("flaky-sync", 3))
        .await
        .unwrap();
    let plain = jobs
        .create(&PostParams::default(), &job("plain", 6))
        .await
        .unwrap();

    let terminal = |name: &'static str, kind: &'static str| {
        let jobs = jobs.clone();
        async move {
            eventually(name, || async {
                let status = json_of(&jobs.get(name).await.unwrap().status);
                condition_is(&status, kind, "True").then_some(status)
            })
            .await
        }
    };
    let failed = terminal("broken-migrate", "Failed").await;
    assert!(condition_is(&failed, "FailureTarget", "True"));
    assert_eq!(
        condition(&failed, "Failed").unwrap()["reason"],
        "BackoffLimitExceeded"
    );
    assert_eq!(failed["failed"], 2);
    assert!(failed.get("completionTime").is_none_or(Value::is_null));

    let complete = terminal("flaky-sync", "Complete").await;
    assert!(condition_is(&complete, "SuccessCriteriaMet", "True"));
    assert_eq!(complete["succeeded"], 1);
    assert_eq!(complete["failed"], 1);
    assert!(complete["completionTime"].is_string());
    assert!(complete["startTime"].is_string());

    let plain_status = terminal("plain", "Complete").await;
    assert!(plain_status.get("failed").is_none_or(Value::is_null));

    // Pods carry the Job's uid and name labels, an owner reference, and the terminated state.
    let flaky_uid = flaky.metadata.uid.clone().unwrap();
    let flaky_pods = pods
        .list(
            &ListParams::default()
                .labels(&format!("batch.kubernetes.io/controller-uid={flaky_uid}")),
        )
        .await
        .unwrap()
        .items;
    assert_eq!(flaky_pods.len(), 2, "the retry runs as a second pod");
    let mut outcomes = Vec::new();
    for pod in &flaky_pods {
        let labels = pod.metadata.labels.clone().unwrap();
        assert_eq!(labels["controller-uid"], flaky_uid);
        assert_eq!(labels["job-name"], "flaky-sync");
        assert_eq!(labels["batch.kubernetes.io/job-name"], "flaky-sync");
        assert_eq!(labels["app"], "cinder");
        let owner = &pod.metadata.owner_references.as_ref().unwrap()[0];
        assert_eq!(
            (owner.kind.as_str(), owner.uid.as_str()),
            ("Job", flaky_uid.as_str())
        );
        let status = json_of(&pod.status);
        let terminated = &status["containerStatuses"][0]["state"]["terminated"];
        outcomes.push((
            status["phase"].as_str().unwrap().to_owned(),
            terminated["exitCode"].as_i64().unwrap(),
            terminated["message"].as_str().unwrap().to_owned(),
        ));
    }
    outcomes.sort();
    assert_eq!(
        outcomes,
        [
            ("Failed".to_owned(), 2, "first try failed".to_owned()),
            ("Succeeded".to_owned(), 0, "all good".to_owned()),
        ]
    );
    let broken_pods = pods
        .list(&ListParams::default().labels(&format!(
            "batch.kubernetes.io/controller-uid={}",
            broken.metadata.uid.clone().unwrap()
        )))
        .await
        .unwrap()
        .items;
    assert_eq!(broken_pods.len(), 2);
    assert!(
        broken_pods
            .iter()
            .all(|p| json_of(&p.status)["phase"] == "Failed")
    );

    // The run record.
    let runs = handle(&cluster).job_runs();
    let flaky_run = runs.iter().find(|r| r.uid == flaky_uid).unwrap();
    assert_eq!(flaky_run.result, Some(JobResult::Succeeded));
    assert_eq!(flaky_run.attempts.len(), 2);
    assert_eq!(flaky_run.attempts[0].exit_code, Some(2));
    assert_eq!(flaky_run.attempts[1].exit_code, Some(0));
    assert!(
        flaky_run
            .finished
            .is_some_and(|end| end >= flaky_run.started)
    );
    let broken_run = runs
        .iter()
        .find(|r| Some(&r.uid) == broken.metadata.uid.as_ref())
        .unwrap();
    assert_eq!(broken_run.result, Some(JobResult::Failed));
    assert_eq!(broken_run.attempts.len(), 2);
    assert_eq!(
        broken_run.attempts[1].message.as_deref(),
        Some("check failed")
    );
    let plain_run = runs
        .iter()
        .find(|r| Some(&r.uid) == plain.metadata.uid.as_ref())
        .unwrap();
    assert_eq!(plain_run.attempts.len(), 1);
    cluster.shutdown().await;
}

#[tokio::test]
async fn finished_jobs_expire_after_their_ttl_and_deleted_runs_are_closed() {
    let mut config = fast_config();
    config.jobs.rules = vec![
        JobRule::new(Regex::new("^stuck").unwrap(), PodOutcome::success())
            .with_delay(Duration::from_secs(3600)),
    ];
    let cluster = start(config).await;
    let client = cluster.client().await;
    let jobs: Api<Job> = Api::namespaced(client.clone(), "default");
    let mut expiring = job("expiring", 0);
    expiring.spec.as_mut().unwrap().ttl_seconds_after_finished = Some(0);
    let expiring = jobs
        .create(&PostParams::default(), &expiring)
        .await
        .unwrap();
    let stuck = jobs
        .create(&PostParams::default(), &job("stuck", 0))
        .await
        .unwrap();
    eventually("expired job deleted", || async {
        jobs.get_opt("expiring")
            .await
            .unwrap()
            .is_none()
            .then_some(())
    })
    .await;

    let run_of = |uid: Option<String>| {
        let runs = handle(&cluster).job_runs();
        runs.into_iter().find(|r| Some(&r.uid) == uid.as_ref())
    };
    assert_eq!(
        run_of(expiring.metadata.uid.clone()).unwrap().result,
        Some(JobResult::Succeeded)
    );
    eventually("stuck job running", || async {
        run_of(stuck.metadata.uid.clone()).filter(|r| r.attempts.len() == 1)
    })
    .await;
    // Two runs going at once show up as an overlapping pair.
    let second = jobs
        .create(&PostParams::default(), &job("stuck-b", 0))
        .await
        .unwrap();
    eventually("second stuck job running", || async {
        run_of(second.metadata.uid.clone()).filter(|r| r.attempts.len() == 1)
    })
    .await;
    let overlaps =
        handle(&cluster).overlapping_job_runs("default", |name| name.starts_with("stuck"));
    assert_eq!(overlaps.len(), 1);
    assert_eq!(
        (overlaps[0].0.name.as_str(), overlaps[0].1.name.as_str()),
        ("stuck", "stuck-b")
    );
    assert!(
        handle(&cluster)
            .overlapping_job_runs("other", |_| true)
            .is_empty()
    );
    jobs.delete("stuck", &DeleteParams::background())
        .await
        .unwrap();
    let closed = eventually("deleted run closed", || async {
        run_of(stuck.metadata.uid.clone()).filter(|r| r.finished.is_some())
    })
    .await;
    assert_eq!(closed.result, Some(JobResult::Deleted));
    assert_eq!(closed.attempts[0].exit_code, None);

    // A Job that outlives spec.activeDeadlineSeconds fails with DeadlineExceeded.
    let mut wedged = job("stuck", 0);
    wedged.metadata.name = Some("stuck".into());
    wedged.spec.as_mut().unwrap().active_deadline_seconds = Some(1);
    jobs.create(&PostParams::default(), &wedged).await.unwrap();
    let failed = eventually("deadline exceeded", || async {
        let status = json_of(&jobs.get_opt("stuck").await.unwrap()?.status);
        condition_is(&status, "Failed", "True").then_some(status)
    })
    .await;
    assert_eq!(
        condition(&failed, "Failed").unwrap()["reason"],
        "DeadlineExceeded"
    );
    cluster.shutdown().await;
}

fn cronjob(name: &str) -> CronJob {
    serde_json::from_value(json!({
        "apiVersion": "batch/v1",
        "kind": "CronJob",
        "metadata": {"name": name},
        "spec": {
            "schedule": "1 0 * * *",
            "concurrencyPolicy": "Forbid",
            "jobTemplate": {
                "metadata": {"labels": {"app.kubernetes.io/instance": "c1"}},
                "spec": {
                    "backoffLimit": 0,
                    "template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "purge", "image": "cinder:2025.2"}]}}
                }
            }
        }
    }))
    .unwrap()
}

#[tokio::test]
async fn cronjob_spawns_on_trigger_honours_forbid_and_suspend() {
    let mut config = fast_config();
    // The purge runs until the test lets it finish.
    config.jobs.rules = vec![
        JobRule::new(Regex::new("^c1-db-purge-").unwrap(), PodOutcome::success())
            .with_delay(Duration::from_secs(3600)),
    ];
    let cluster = start(config).await;
    let controllers = handle(&cluster);
    let client = cluster.client().await;
    let cronjobs: Api<CronJob> = Api::namespaced(client.clone(), "default");
    let jobs: Api<Job> = Api::namespaced(client.clone(), "default");
    let created = cronjobs
        .create(&PostParams::default(), &cronjob("c1-db-purge"))
        .await
        .unwrap();
    let firings = |count: usize| async move {
        eventually("cronjob firing", || async {
            let all = controllers.cronjob_firings();
            (all.len() >= count).then(|| all[count - 1].outcome.clone())
        })
        .await
    };

    controllers.trigger_cronjob("default", "c1-db-purge");
    assert_eq!(
        firings(1).await,
        FiringOutcome::Spawned("c1-db-purge-1".into())
    );
    let first = jobs.get("c1-db-purge-1").await.unwrap();
    assert_eq!(
        first.metadata.labels.unwrap()["app.kubernetes.io/instance"],
        "c1"
    );
    let owner = &first.metadata.owner_references.unwrap()[0];
    assert_eq!(owner.kind, "CronJob");
    assert_eq!(Some(&owner.uid), created.metadata.uid.as_ref());
    eventually("status.active lists the run", || async {
        let status = json_of(&cronjobs.get("c1-db-purge").await.unwrap().status);
        (status["active"][0]["name"] == "c1-db-purge-1" && status["lastScheduleTime"].is_string())
            .then_some(())
    })
    .await;

    // Forbid: a firing while the run is active spawns nothing.
    controllers.trigger_cronjob("default", "c1-db-purge");
    assert_eq!(firings(2).await, FiringOutcome::SkippedForbid);
    assert_eq!(
        jobs.list(&ListParams::default()).await.unwrap().items.len(),
        1
    );

    // Let the run finish; status.active empties and lastSuccessfulTime appears.
    controllers.update_config(|c| c.jobs.rules.clear());
    eventually("run finished and reported", || async {
        let status = json_of(&cronjobs.get("c1-db-purge").await.unwrap().status);
        (status.get("active").is_none_or(Value::is_null)
            && status["lastSuccessfulTime"].is_string())
        .then_some(())
    })
    .await;

    // Suspended: a firing spawns nothing.
    let suspend = |on: bool| json!({"spec": {"suspend": on}});
    cronjobs
        .patch(
            "c1-db-purge",
            &PatchParams::default(),
            &Patch::Merge(&suspend(true)),
        )
        .await
        .unwrap();
    controllers.trigger_cronjob("default", "c1-db-purge");
    assert_eq!(firings(3).await, FiringOutcome::SkippedSuspended);
    assert_eq!(
        jobs.list(&ListParams::default()).await.unwrap().items.len(),
        1
    );

    cronjobs
        .patch(
            "c1-db-purge",
            &PatchParams::default(),
            &Patch::Merge(&suspend(false)),
        )
        .await
        .unwrap();
    controllers.trigger_cronjob("default", "c1-db-purge");
    assert_eq!(
        firings(4).await,
        FiringOutcome::Spawned("c1-db-purge-2".into())
    );
    eventually("second run completes", || async {
        let status = json_of(&jobs.get("c1-db-purge-2").await.unwrap().status);
        condition_is(&status, "Complete", "True").then_some(())
    })
    .await;
    cluster.shutdown().await;
}

#[tokio::test]
async fn cronjob_fires_on_the_accelerated_schedule() {
    let mut config = fast_config();
    config.cronjobs.every = Some(Duration::from_millis(300));
    let cluster = start(config).await;
    let client = cluster.client().await;
    let cronjobs: Api<CronJob> = Api::namespaced(client.clone(), "default");
    let jobs: Api<Job> = Api::namespaced(client.clone(), "default");
    cronjobs
        .create(&PostParams::default(), &cronjob("tick"))
        .await
        .unwrap();
    eventually("two scheduled runs", || async {
        let names: Vec<String> = jobs
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .into_iter()
            .filter_map(|j| j.metadata.name)
            .collect();
        (names.contains(&"tick-1".to_owned()) && names.contains(&"tick-2".to_owned())).then_some(())
    })
    .await;
    cluster.shutdown().await;
}

#[tokio::test]
async fn mariadb_objects_and_secret_stores_become_ready_unless_configured_not_to() {
    let mut config = fast_config();
    config.mariadb.not_ready.insert("default/down");
    config.secret_stores.not_ready.insert("broken");
    let cluster = start(config).await;
    let controllers = handle(&cluster);
    let client = cluster.client().await;
    let ns = Some("default");

    dynamic_create(
        &client,
        kinds::MARIADB,
        ns,
        json!({"metadata": {"name": "db"}, "spec": {"replicas": 1}}),
    )
    .await;
    dynamic_create(
        &client,
        kinds::MARIADB,
        ns,
        json!({"metadata": {"name": "down"}, "spec": {}}),
    )
    .await;
    let reference = |mariadb: &str| json!({"name": mariadb});
    dynamic_create(&client, kinds::DATABASE, ns, json!({"metadata": {"name": "cinder"}, "spec": {"mariaDbRef": reference("db"), "characterSet": "utf8"}})).await;
    dynamic_create(&client, kinds::USER, ns, json!({"metadata": {"name": "cinder"}, "spec": {"mariaDbRef": reference("db"), "maxUserConnections": 40}})).await;
    dynamic_create(&client, kinds::GRANT, ns, json!({"metadata": {"name": "cinder"}, "spec": {"mariaDbRef": reference("db"), "privileges": ["ALL PRIVILEGES"], "database": "cinder", "username": "cinder"}})).await;
    dynamic_create(
        &client,
        kinds::DATABASE,
        ns,
        json!({"metadata": {"name": "waiting"}, "spec": {"mariaDbRef": reference("down")}}),
    )
    .await;
    dynamic_create(
        &client,
        kinds::SECRET_STORE,
        ns,
        json!({"metadata": {"name": "vault"}, "spec": {"provider": {"vault": {}}}}),
    )
    .await;
    dynamic_create(
        &client,
        kinds::SECRET_STORE,
        ns,
        json!({"metadata": {"name": "broken"}, "spec": {"provider": {"vault": {}}}}),
    )
    .await;
    dynamic_create(
        &client,
        kinds::CLUSTER_SECRET_STORE,
        None,
        json!({"metadata": {"name": "openbao-cluster-store"}, "spec": {"provider": {"vault": {}}}}),
    )
    .await;

    let ready = |kind: kinds::Kind,
                 namespace: Option<&'static str>,
                 name: &'static str,
                 want: &'static str| {
        let client = client.clone();
        async move {
            eventually(name, || async {
                let status = dynamic_status(&client, kind, namespace, name).await?;
                condition_is(&status, "Ready", want).then_some(status)
            })
            .await
        }
    };
    ready(kinds::MARIADB, ns, "db", "True").await;
    for kind in [kinds::DATABASE, kinds::USER, kinds::GRANT] {
        let status = ready(kind, ns, "cinder", "True").await;
        assert_eq!(condition(&status, "Ready").unwrap()["reason"], "Created");
    }
    ready(kinds::SECRET_STORE, ns, "vault", "True").await;
    ready(
        kinds::CLUSTER_SECRET_STORE,
        None,
        "openbao-cluster-store",
        "True",
    )
    .await;
    let refused = ready(kinds::SECRET_STORE, ns, "broken", "False").await;
    assert_eq!(
        condition(&refused, "Ready").unwrap()["reason"],
        "ValidationFailed"
    );
    ready(kinds::MARIADB, ns, "down", "False").await;
    let waiting = ready(kinds::DATABASE, ns, "waiting", "False").await;
    assert_eq!(
        condition(&waiting, "Ready").unwrap()["reason"],
        "MariaDBNotReady"
    );

    // The schema defaults of the fixtures apply.
    let users: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), "default", &kinds::GRANT.resource());
    assert_eq!(
        users.get("cinder").await.unwrap().data["spec"]["table"],
        "*"
    );

    // The outage ends: the cluster and the Database waiting on it become Ready.
    controllers.update_config(|c| {
        c.mariadb.not_ready.remove("default/down");
    });
    ready(kinds::MARIADB, ns, "down", "True").await;
    ready(kinds::DATABASE, ns, "waiting", "True").await;
    // The broken store still is.
    let still = dynamic_status(&client, kinds::SECRET_STORE, ns, "broken")
        .await
        .unwrap();
    assert!(condition_is(&still, "Ready", "False"));

    // Deletion: the operator's finalizer keeps the Database around for a while, then goes.
    let databases: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), "default", &kinds::DATABASE.resource());
    let held = databases.get("cinder").await.unwrap();
    assert!(
        held.metadata
            .finalizers
            .unwrap_or_default()
            .contains(&"database.k8s.mariadb.com/finalizer".to_owned())
    );
    let deleted = databases
        .delete("cinder", &DeleteParams::default())
        .await
        .unwrap();
    let lingering = deleted
        .left()
        .expect("a finalized object is not deleted at once");
    assert!(lingering.metadata.deletion_timestamp.is_some());
    eventually("database gone", || async {
        databases
            .get_opt("cinder")
            .await
            .unwrap()
            .is_none()
            .then_some(())
    })
    .await;
    cluster.shutdown().await;
}

fn route(name: &str, gateway: &str) -> Value {
    json!({
        "metadata": {"name": name},
        "spec": {
            "parentRefs": [{"name": gateway}],
            "hostnames": ["cinder.example.com"],
            "rules": [{"backendRefs": [{"name": "cinder-api", "port": 8776}]}]
        }
    })
}

#[tokio::test]
async fn http_routes_are_accepted_by_existing_gateways_or_refused_as_configured() {
    let mut config = fast_config();
    config.gateways.refused_routes.insert("default/refused");
    let cluster = start(config).await;
    let client = cluster.client().await;
    let ns = Some("default");
    dynamic_create(&client, kinds::GATEWAY, ns, json!({"metadata": {"name": "gw"}, "spec": {"gatewayClassName": "sim", "listeners": [{"name": "http", "port": 80, "protocol": "HTTP"}]}})).await;
    dynamic_create(&client, kinds::HTTP_ROUTE, ns, route("api", "gw")).await;
    dynamic_create(&client, kinds::HTTP_ROUTE, ns, route("refused", "gw")).await;
    dynamic_create(
        &client,
        kinds::HTTP_ROUTE,
        ns,
        route("orphan", "no-such-gateway"),
    )
    .await;

    let gateway = eventually("gateway programmed", || async {
        let status = dynamic_status(&client, kinds::GATEWAY, ns, "gw").await?;
        condition_is(&status, "Programmed", "True").then_some(status)
    })
    .await;
    assert!(condition_is(&gateway, "Accepted", "True"));

    let parent_status = |name: &'static str| {
        let client = client.clone();
        async move {
            eventually(name, || async {
                let status =
                    dynamic_status(&client, kinds::HTTP_ROUTE, Some("default"), name).await?;
                let parent = status.get("parents")?.as_array()?.first()?.clone();
                Some(parent)
            })
            .await
        }
    };
    let accepted = parent_status("api").await;
    assert_eq!(accepted["parentRef"]["name"], "gw");
    assert_eq!(
        accepted["controllerName"],
        cinder_sim::controllers::gateways::CONTROLLER_NAME
    );
    assert!(condition_is(&accepted, "Accepted", "True"));
    assert!(condition_is(&accepted, "ResolvedRefs", "True"));
    let refused = parent_status("refused").await;
    assert!(condition_is(&refused, "Accepted", "False"));
    assert_eq!(
        condition(&refused, "Accepted").unwrap()["reason"],
        "NotAllowedByListeners"
    );

    // A route to a Gateway that does not exist gets no parent status, even once the others did.
    let orphan = dynamic_status(&client, kinds::HTTP_ROUTE, ns, "orphan").await;
    let parents = orphan
        .as_ref()
        .and_then(|s| s.get("parents"))
        .and_then(Value::as_array)
        .map_or(0, Vec::len);
    assert_eq!(parents, 0);
    cluster.shutdown().await;
}

#[tokio::test]
async fn a_switched_off_controller_leaves_objects_untouched_until_switched_on() {
    let mut config = fast_config();
    config.deployments.switch = Switch::off();
    config.secret_stores.switch = Switch::off();
    let cluster = start(config).await;
    let controllers = handle(&cluster);
    let client = cluster.client().await;
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), "default");
    let jobs: Api<Job> = Api::namespaced(client.clone(), "default");
    deployments
        .create(&PostParams::default(), &deployment("idle", 1))
        .await
        .unwrap();
    dynamic_create(
        &client,
        kinds::SECRET_STORE,
        Some("default"),
        json!({"metadata": {"name": "idle"}, "spec": {}}),
    )
    .await;

    // A Job created afterwards completes: the running controllers had time to act.
    jobs.create(&PostParams::default(), &job("witness", 0))
        .await
        .unwrap();
    eventually("witness job complete", || async {
        let status = json_of(&jobs.get("witness").await.unwrap().status);
        condition_is(&status, "Complete", "True").then_some(())
    })
    .await;
    // The switched-off controllers look at their objects a few more times and leave them be.
    let passes = |name: &'static str| controllers.reconcile_passes(name);
    let (deployment_passes, store_passes) = (passes("deployments"), passes("secret-stores"));
    controllers.update_config(|c| c.resync = Duration::from_millis(100));
    eventually("two more passes", || async {
        (passes("deployments") >= deployment_passes + 2
            && passes("secret-stores") >= store_passes + 2)
            .then_some(())
    })
    .await;
    // a new Deployment reads back `status: {}`; an idle controller adds nothing to it
    assert_eq!(
        deployments.get("idle").await.unwrap().status,
        Some(Default::default())
    );
    assert!(
        dynamic_status(&client, kinds::SECRET_STORE, Some("default"), "idle")
            .await
            .is_none()
    );

    controllers.update_config(|c| {
        c.deployments.switch = Switch::on(FAST);
        c.secret_stores.switch = Switch::on(FAST);
    });
    eventually("deployment ready once switched on", || async {
        let status = json_of(&deployments.get("idle").await.unwrap().status);
        (status["readyReplicas"] == 1).then_some(())
    })
    .await;
    eventually("store ready once switched on", || async {
        let status = dynamic_status(&client, kinds::SECRET_STORE, Some("default"), "idle").await?;
        condition_is(&status, "Ready", "True").then_some(())
    })
    .await;
    cluster.shutdown().await;
}

#[tokio::test]
async fn disabled_fixtures_leave_their_crds_absent() {
    let mut config = fast_config();
    config.fixtures = FixtureSet {
        gateway_api: false,
        vpa: false,
        ..FixtureSet::ALL
    };
    let cluster = start(config).await;
    let crds: Api<CustomResourceDefinition> = Api::all(cluster.client().await);
    assert!(
        crds.get_opt(&kinds::HTTP_ROUTE.crd_name())
            .await
            .unwrap()
            .is_none()
    );
    assert!(
        crds.get_opt(&kinds::VERTICAL_POD_AUTOSCALER.crd_name())
            .await
            .unwrap()
            .is_none()
    );
    assert!(
        crds.get_opt(&kinds::MARIADB.crd_name())
            .await
            .unwrap()
            .is_some()
    );
    assert!(
        crds.get_opt(&kinds::CLUSTER_SECRET_STORE.crd_name())
            .await
            .unwrap()
            .is_some()
    );

    // Removing a fixture at runtime takes its CRD away; installing it again brings it back.
    let client = cluster.client().await;
    let vpa_only = FixtureSet {
        vpa: true,
        ..FixtureSet::NONE
    };
    cinder_sim::controllers::install_fixture_set(client.clone(), vpa_only)
        .await
        .unwrap();
    assert!(
        crds.get_opt(&kinds::VERTICAL_POD_AUTOSCALER.crd_name())
            .await
            .unwrap()
            .is_some()
    );
    let mariadb_only = FixtureSet {
        mariadb: true,
        ..FixtureSet::NONE
    };
    cinder_sim::controllers::uninstall_fixture_set(client.clone(), mariadb_only)
        .await
        .unwrap();
    eventually("mariadb CRDs removed", || async {
        crds.get_opt(&kinds::GRANT.crd_name())
            .await
            .unwrap()
            .is_none()
            .then_some(())
    })
    .await;
    assert!(
        crds.get_opt(&kinds::MARIADB.crd_name())
            .await
            .unwrap()
            .is_none()
    );
    cluster.shutdown().await;
}
