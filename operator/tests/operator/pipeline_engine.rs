//! The pipeline engine with fake steps: lane short-circuit, group merge, shortest requeue,
//! error counting, unchanged status → no write, concurrency across Cinders, serialization per
//! Cinder, the registry's view, and the product table's checks.

use actix::Actor;
use cinder_operator::conditions::{Cond, kind, reason};
use cinder_operator::crd::Cinder;
use cinder_operator::kube_ext::reader::ClusterStores;
use cinder_operator::metrics::{Metrics, encode_openmetrics};
use cinder_operator::pipeline::*;
use futures::FutureExt;
use futures::future::BoxFuture;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

type Behaviour = Arc<dyn Fn(StepContext) -> BoxFuture<'static, StepReport> + Send + Sync>;

struct Fake {
    name: StepName,
    calls: Arc<Mutex<Vec<String>>>,
    behaviour: Behaviour,
}

impl Step<Engine> for Fake {
    fn name(&self) -> StepName {
        self.name
    }
    fn run(&self, _op: Arc<Engine>, ctx: StepContext) -> BoxFuture<'static, StepReport> {
        self.calls
            .lock()
            .unwrap()
            .push(format!("{}:{}", ctx.name(), self.name.as_str()));
        (self.behaviour)(ctx)
    }
}

fn fake(
    name: StepName,
    calls: &Arc<Mutex<Vec<String>>>,
    f: impl Fn(StepContext) -> BoxFuture<'static, StepReport> + Send + Sync + 'static,
) -> Arc<dyn Step<Engine>> {
    Arc::new(Fake {
        name,
        calls: calls.clone(),
        behaviour: Arc::new(f),
    })
}

/// The long-lived context of the fake steps: the registry their step metrics go to, and empty
/// watch stores.
struct Engine {
    metrics: Metrics,
    reads: ClusterStores,
}

impl EngineContext for Engine {
    fn metrics(&self) -> &Metrics {
        &self.metrics
    }
    fn reads(&self) -> &ClusterStores {
        &self.reads
    }
}

fn engine(metrics: &Metrics) -> Arc<Engine> {
    Arc::new(Engine {
        metrics: metrics.clone(),
        reads: ClusterStores::default(),
    })
}

/// A step that sets its condition True and continues.
fn ok(name: StepName, calls: &Arc<Mutex<Vec<String>>>) -> Arc<dyn Step<Engine>> {
    fake(name, calls, move |mut ctx| {
        async move {
            let result = ctx.proceed(Cond::true_(name.condition_type(), "Fine", ""));
            ctx.into_report(result)
        }
        .boxed()
    })
}

/// A step that fails with `message`.
fn failing(
    name: StepName,
    calls: &Arc<Mutex<Vec<String>>>,
    message: &'static str,
) -> Arc<dyn Step<Engine>> {
    fake(name, calls, move |ctx| {
        async move { ctx.into_report(Err(message.into())) }.boxed()
    })
}

/// The Secrets step's report: its condition True, the lane goes on.
fn secrets_ready(mut ctx: StepContext) -> StepReport {
    let result = ctx.proceed(Cond::true_(
        kind::SECRETS_READY,
        reason::SECRETS_AVAILABLE,
        "",
    ));
    ctx.into_report(result)
}

fn cinder(name: &str) -> Arc<Cinder> {
    let yaml = format!(
        r#"
apiVersion: cinder.openstack.c5c3.io/v1alpha1
kind: Cinder
metadata: {{name: {name}, namespace: ns, generation: 4}}
spec:
  openStackRelease: "2026.1"
  image: {{repository: registry.example/cinder, tag: "2026.1"}}
  database: {{clusterRef: {{name: mariadb}}, secretRef: {{name: cinder-db}}}}
  messaging: {{clusterRef: {{name: rabbitmq}}}}
  serviceUser: {{secretRef: {{name: cinder-keystone}}}}
  keystoneEndpoint: https://keystone.example:5000/v3
"#
    );
    Arc::new(serde_norway::from_str(&yaml).unwrap())
}

fn calls() -> Arc<Mutex<Vec<String>>> {
    Arc::new(Mutex::new(Vec::new()))
}

/// Nine lane steps covering the lane's sub-conditions, all True.
fn healthy_lane(calls: &Arc<Mutex<Vec<String>>>) -> Vec<Arc<dyn Step<Engine>>> {
    [
        StepName::Secrets,
        StepName::Backends,
        StepName::BackupBackend,
        StepName::Database,
        StepName::Scheduler,
        StepName::VolumeServices,
        StepName::BackupService,
        StepName::Deployment,
        StepName::DBPurge,
    ]
    .into_iter()
    .map(|name| ok(name, calls))
    .collect()
}

fn healthy_group(calls: &Arc<Mutex<Vec<String>>>) -> Vec<Arc<dyn Step<Engine>>> {
    GROUP.into_iter().map(|name| ok(name, calls)).collect()
}

#[actix::test]
async fn first_requeue_ends_the_lane_and_the_group_does_not_run() {
    let c = calls();
    let lane = vec![
        ok(StepName::Secrets, &c),
        fake(StepName::Database, &c, |mut ctx| {
            async move {
                let result = ctx.requeue(
                    Cond::false_(kind::DATABASE_READY, reason::WAITING_FOR_DATABASE, "gate"),
                    Duration::from_secs(30),
                );
                ctx.into_report(result)
            }
            .boxed()
        }),
        ok(StepName::Scheduler, &c),
    ];
    let table = PipelineTable::custom(lane, vec![ok(StepName::HPA, &c)]);
    let (_r, metrics) = Metrics::new_registry();
    let op = engine(&metrics);
    let report = run_pass(&table, &op, cinder("c1"), None, &mut ()).await;
    assert_eq!(*c.lock().unwrap(), ["c1:Secrets", "c1:Database"]);
    assert_eq!(report.end, PassEnd::ShortCircuited { step: "Database" });
    assert_eq!(report.requeue, Some(Duration::from_secs(30)));
    let st = &report.status;
    let db = st
        .conditions
        .iter()
        .find(|x| x.type_ == "DatabaseReady")
        .unwrap();
    assert_eq!(
        (db.status.as_str(), db.reason.as_str()),
        ("False", "WaitingForDatabase")
    );
    assert_eq!(db.observed_generation, Some(4));
    let ready = st.conditions.iter().find(|x| x.type_ == "Ready").unwrap();
    assert_eq!(
        (ready.status.as_str(), ready.reason.as_str()),
        ("False", "NotAllReady")
    );
    assert_eq!(st.observed_generation, Some(4));
    assert!(report.status_changed, "a fresh CR gets its first status");
}

#[actix::test]
async fn lane_error_is_counted_and_becomes_the_step_condition() {
    let c = calls();
    let lane = vec![
        ok(StepName::Secrets, &c),
        failing(StepName::Scheduler, &c, "api said 500"),
        ok(StepName::Deployment, &c),
    ];
    let table = PipelineTable::custom(lane, vec![]);
    let (registry, metrics) = Metrics::new_registry();
    let op = engine(&metrics);
    let report = run_pass(&table, &op, cinder("c1"), None, &mut ()).await;
    assert_eq!(report.end, PassEnd::ShortCircuited { step: "Scheduler" });
    assert_eq!(report.requeue, None);
    assert_eq!(
        report.errors,
        [StepFailure {
            step: "Scheduler",
            condition_type: "SchedulerReady",
            message: "api said 500".into()
        }]
    );
    let sched = report
        .status
        .conditions
        .iter()
        .find(|x| x.type_ == "SchedulerReady")
        .unwrap();
    assert_eq!(
        (sched.status.as_str(), sched.message.as_str()),
        ("False", "api said 500")
    );
    let text = encode_openmetrics(&registry).unwrap();
    assert!(text.contains(r#"cinder_operator_reconcile_errors_total{sub_reconciler="Scheduler",condition_type="SchedulerReady"} 1"#));
    assert!(text.contains(
        r#"cinder_operator_reconcile_duration_seconds_count{sub_reconciler="Secrets"} 1"#
    ));
    assert!(
        text.contains(
            r#"cinder_operator_reconcile_duration_seconds_count{sub_reconciler="Deployment"} 0"#
        ),
        "Deployment never ran"
    );
}

#[actix::test]
async fn artefacts_and_status_fields_flow_down_the_lane() {
    let c = calls();
    let seen = Arc::new(Mutex::new(None));
    let seen2 = seen.clone();
    let lane = vec![
        fake(StepName::Secrets, &c, |mut ctx| {
            async move {
                ctx.artefacts.broker_port = Some(5672);
                ctx.artefacts.config_map_name = Some("c1-config-abc".into());
                ctx.status.endpoint = Some("http://c1-api.ns.svc:8776".into());
                let result = ctx.proceed(Cond::true_(
                    kind::SECRETS_READY,
                    reason::SECRETS_AVAILABLE,
                    "",
                ));
                ctx.into_report(result)
            }
            .boxed()
        }),
        fake(StepName::Database, &c, move |mut ctx| {
            *seen2.lock().unwrap() = Some((ctx.artefacts.clone(), ctx.status.endpoint.clone()));
            async move {
                let result = ctx.proceed(Cond::true_(
                    kind::DATABASE_READY,
                    reason::DATABASE_SYNCED,
                    "",
                ));
                ctx.into_report(result)
            }
            .boxed()
        }),
    ];
    let table = PipelineTable::custom(lane, vec![]);
    let (_r, metrics) = Metrics::new_registry();
    let op = engine(&metrics);
    let report = run_pass(&table, &op, cinder("c1"), None, &mut ()).await;
    let (artefacts, endpoint) = seen.lock().unwrap().clone().unwrap();
    assert_eq!(artefacts.broker_port, Some(5672));
    assert_eq!(artefacts.config_map_name.as_deref(), Some("c1-config-abc"));
    assert_eq!(endpoint.as_deref(), Some("http://c1-api.ns.svc:8776"));
    assert_eq!(
        report.status.endpoint.as_deref(),
        Some("http://c1-api.ns.svc:8776")
    );
    assert_eq!(report.end, PassEnd::Completed);
}

#[actix::test]
async fn group_runs_all_members_merges_one_condition_each_and_shortest_requeue_wins() {
    let c = calls();
    let group = vec![
        fake(StepName::HTTPRoute, &c, |mut ctx| {
            async move {
                // A member's own copy: a second condition and a status field never reach the CR.
                ctx.status.endpoint = Some("leaked".into());
                ctx.set(Cond::false_(
                    kind::SECRETS_READY,
                    reason::CONFIG_ERROR,
                    "must be ignored",
                ));
                let result = ctx.requeue(
                    Cond::true_(kind::HTTP_ROUTE_READY, reason::HTTP_ROUTE_NOT_REQUIRED, ""),
                    Duration::from_secs(30),
                );
                ctx.into_report(result)
            }
            .boxed()
        }),
        fake(StepName::HealthCheck, &c, |mut ctx| {
            async move {
                let result = ctx.requeue(
                    Cond::false_(kind::CINDER_API_READY, reason::API_UNHEALTHY, "503"),
                    Duration::from_secs(10),
                );
                ctx.into_report(result)
            }
            .boxed()
        }),
        failing(StepName::HPA, &c, "hpa conflict"),
        ok(StepName::VPA, &c),
        failing(StepName::NetworkPolicy, &c, "empty ingress"),
    ];
    let table = PipelineTable::custom(healthy_lane(&c), group);
    let (registry, metrics) = Metrics::new_registry();
    let op = engine(&metrics);
    let report = run_pass(&table, &op, cinder("c1"), None, &mut ()).await;
    let called = c.lock().unwrap().clone();
    for m in ["HTTPRoute", "HealthCheck", "HPA", "VPA", "NetworkPolicy"] {
        assert!(called.contains(&format!("c1:{m}")), "{m} must run");
    }
    assert_eq!(report.end, PassEnd::Completed);
    assert_eq!(report.requeue, Some(Duration::from_secs(10)));
    let mut failed: Vec<_> = report.errors.iter().map(|e| e.step).collect();
    failed.sort();
    assert_eq!(failed, ["HPA", "NetworkPolicy"]);
    let cond = |t: &str| {
        report
            .status
            .conditions
            .iter()
            .find(|x| x.type_ == t)
            .unwrap()
            .clone()
    };
    assert_eq!(
        cond("SecretsReady").status,
        "True",
        "a member's foreign condition is not merged"
    );
    assert_eq!(cond("HTTPRouteReady").reason, "HTTPRouteNotRequired");
    assert_eq!(cond("CinderAPIReady").reason, "APIUnhealthy");
    assert_eq!(cond("HPAReady").status, "False");
    assert_eq!(cond("NetworkPolicyReady").message, "empty ingress");
    assert_eq!(cond("VPAReady").status, "True");
    assert_eq!(
        report.status.endpoint, None,
        "members work on their own copy"
    );
    let text = encode_openmetrics(&registry).unwrap();
    assert!(text.contains(r#"cinder_operator_reconcile_errors_total{sub_reconciler="HPA",condition_type="HPAReady"} 1"#));
    assert!(text.contains(r#"cinder_operator_reconcile_errors_total{sub_reconciler="NetworkPolicy",condition_type="NetworkPolicyReady"} 1"#));
}

#[actix::test]
async fn all_fourteen_true_is_ready_and_an_unchanged_pass_requests_no_write() {
    let c = calls();
    let table = PipelineTable::custom(healthy_lane(&c), healthy_group(&c));
    let (_r, metrics) = Metrics::new_registry();
    let op = engine(&metrics);
    let first = run_pass(&table, &op, cinder("c1"), None, &mut ()).await;
    assert!(first.status_write().is_some());
    let ready = first
        .status
        .conditions
        .iter()
        .find(|x| x.type_ == "Ready")
        .unwrap();
    assert_eq!(
        (ready.status.as_str(), ready.reason.as_str()),
        ("True", "AllReady")
    );
    assert_eq!(first.status.conditions.len(), SUB_CONDITIONS.len() + 1);

    let mut again = (*cinder("c1")).clone();
    again.status = Some(first.status.clone());
    let second = run_pass(&table, &op, Arc::new(again), None, &mut ()).await;
    assert!(
        !second.status_changed,
        "same conditions, same generation: no status write"
    );
    assert!(second.status_write().is_none());
    assert_eq!(second.status, first.status);
}

#[actix::test]
async fn invalid_spec_runs_no_step_and_says_why() {
    let c = calls();
    let table = PipelineTable::custom(healthy_lane(&c), healthy_group(&c));
    let (_r, metrics) = Metrics::new_registry();
    let op = engine(&metrics);
    let mut bad = (*cinder("c1")).clone();
    bad.spec.image.digest = Some(format!("sha256:{}", "a".repeat(64)));
    let report = run_pass(&table, &op, Arc::new(bad), None, &mut ()).await;
    assert_eq!(report.end, PassEnd::InvalidSpec);
    assert!(c.lock().unwrap().is_empty());
    let ready = report
        .status
        .conditions
        .iter()
        .find(|x| x.type_ == "Ready")
        .unwrap();
    assert_eq!(
        (ready.status.as_str(), ready.reason.as_str()),
        ("False", "InvalidSpec")
    );
    assert!(ready.message.contains("tag and digest"));
}

#[actix::test]
async fn a_service_user_secret_named_like_the_operators_own_is_refused_before_any_step() {
    let c = calls();
    let table = PipelineTable::custom(healthy_lane(&c), healthy_group(&c));
    let (_r, metrics) = Metrics::new_registry();
    let op = engine(&metrics);
    let mut bad = (*cinder("c1")).clone();
    bad.spec.service_user.secret_ref.name = "c1-service-user".into();
    let report = run_pass(&table, &op, Arc::new(bad), None, &mut ()).await;
    assert_eq!(report.end, PassEnd::InvalidSpec);
    assert!(
        c.lock().unwrap().is_empty(),
        "no step ran, so the Secrets step wrote nothing over the credential Secret"
    );
    let ready = report
        .status
        .conditions
        .iter()
        .find(|x| x.type_ == "Ready")
        .unwrap();
    assert_eq!(
        (ready.status.as_str(), ready.reason.as_str()),
        ("False", "InvalidSpec")
    );
    assert!(
        ready
            .message
            .contains("spec.serviceUser.secretRef.name \"c1-service-user\""),
        "{}",
        ready.message
    );
}

#[actix::test]
async fn different_cinders_run_concurrently() {
    // Cinder "a" waits inside its step until cinder "b" has run its step: only possible when
    // the two pipelines are not serialized against each other.
    let c = calls();
    let b_ran = Arc::new(tokio::sync::Notify::new());
    let b_ran2 = b_ran.clone();
    let lane = vec![fake(StepName::Secrets, &c, move |ctx| {
        let b_ran = b_ran2.clone();
        async move {
            if ctx.name() == "a" {
                b_ran.notified().await;
            } else {
                b_ran.notify_one();
            }
            secrets_ready(ctx)
        }
        .boxed()
    })];
    let (_r, metrics) = Metrics::new_registry();
    let op = engine(&metrics);
    let pipelines = Pipelines::new(PipelineTable::custom(lane, vec![]), metrics).start();
    let a = pipelines.send(Reconcile(PassRequest {
        op: op.clone(),
        cinder: cinder("a"),
        target: None,
        span: tracing::Span::none(),
    }));
    let b = pipelines.send(Reconcile(PassRequest {
        op: op.clone(),
        cinder: cinder("b"),
        target: None,
        span: tracing::Span::none(),
    }));
    let both = tokio::time::timeout(Duration::from_secs(60), futures::future::join(a, b)).await;
    let (ra, rb) = both.expect("the passes of two Cinders must not wait for each other");
    assert_eq!(ra.unwrap().unwrap().end, PassEnd::Completed);
    assert_eq!(rb.unwrap().unwrap().end, PassEnd::Completed);
    drop(b_ran);
}

/// Asks the registry for the turn of `name` (rank `rank`, generation 1, not being deleted).
async fn admit(
    pipelines: &actix::Addr<Pipelines<Engine>>,
    name: &str,
    rank: AdmissionRank,
) -> Turn {
    pipelines
        .send(Admit {
            key: key(name),
            rank,
            generation: Some(1),
            deleting: false,
        })
        .await
        .unwrap()
}

/// Runs one pass of `name` as the Cinder controller does: asks for its turn (waiting as told,
/// queued turns asked again), then sends the pass with the slot held.
async fn pass_when_admitted(
    pipelines: &actix::Addr<Pipelines<Engine>>,
    op: &Arc<Engine>,
    name: &str,
) {
    loop {
        match admit(pipelines, name, 1).await {
            Turn::Run(_slot) => {
                let report = pipelines
                    .send(Reconcile(PassRequest {
                        op: op.clone(),
                        cinder: cinder(name),
                        target: None,
                        span: tracing::Span::none(),
                    }))
                    .await
                    .unwrap()
                    .unwrap();
                assert_eq!(report.end, PassEnd::Completed);
                return;
            }
            Turn::Wait(wait) => tokio::time::sleep(wait).await,
            Turn::Queued => tokio::time::sleep(Duration::from_millis(10)).await,
        }
    }
}

#[actix::test]
async fn passes_of_one_cinder_start_at_least_the_gap_apart_and_a_quiet_one_at_once() {
    let c = calls();
    let starts: Arc<Mutex<Vec<(String, std::time::Instant)>>> = Arc::new(Mutex::new(Vec::new()));
    let s = starts.clone();
    let lane = vec![fake(StepName::Secrets, &c, move |ctx| {
        s.lock()
            .unwrap()
            .push((ctx.name().to_string(), std::time::Instant::now()));
        async move { secrets_ready(ctx) }.boxed()
    })];
    let (_r, metrics) = Metrics::new_registry();
    let op = engine(&metrics);
    let pipelines = Pipelines::new(PipelineTable::custom(lane, vec![]), metrics).start();
    let asked = std::time::Instant::now();
    // Five passes of x back to back (each asked for as soon as the last ended), and one of y
    // beside them.
    let x_passes = {
        let (pipelines, op) = (pipelines.clone(), op.clone());
        async move {
            for _ in 0..5 {
                pass_when_admitted(&pipelines, &op, "x").await;
            }
        }
    };
    let both = futures::future::join(x_passes, pass_when_admitted(&pipelines, &op, "y"));
    tokio::time::timeout(Duration::from_secs(60), both)
        .await
        .unwrap();
    let starts = starts.lock().unwrap().clone();
    let of = |name: &str| -> Vec<std::time::Instant> {
        starts
            .iter()
            .filter(|(n, _)| n == name)
            .map(|(_, at)| *at)
            .collect()
    };
    let x = of("x");
    assert_eq!(x.len(), 5);
    // The registry admits passes at least the gap apart; the step records its own start after
    // the registry's forward, by a hand-over latency that differs between passes
    // (sub-millisecond on a quiet machine, a few milliseconds on a loaded one), so the gap seen
    // here may fall short of the registry's by that difference.
    let hand_over = Duration::from_millis(10);
    for pair in x.windows(2) {
        let gap = pair[1] - pair[0];
        assert!(
            gap + hand_over >= MIN_PASS_GAP,
            "two passes of x started {gap:?} apart"
        );
    }
    // The first pass of each Cinder, and y's beside x's burst, start at once.
    let slack = Duration::from_millis(150);
    assert!(
        x[0] - asked < slack,
        "x's first pass waited {:?}",
        x[0] - asked
    );
    assert!(of("y")[0] - asked < slack, "y waited for x's gap");
}

#[actix::test]
async fn a_failed_cinder_waits_for_its_retry_unless_its_spec_changed_or_it_is_deleted() {
    let (_r, metrics) = Metrics::new_registry();
    let pipelines =
        Pipelines::new(PipelineTable::<Engine>::custom(vec![], vec![]), metrics).start();
    let turn = |generation, deleting| Admit {
        key: key("f"),
        rank: 1,
        generation: Some(generation),
        deleting,
    };
    assert!(matches!(
        pipelines.send(turn(1, false)).await.unwrap(),
        Turn::Run(_)
    ));
    let fail = || async {
        pipelines
            .send(PassFailed {
                key: key("f"),
                generation: Some(1),
            })
            .await
            .unwrap()
    };
    let mut last = None;
    for failures in 1..=3 {
        let retry = fail().await;
        assert_eq!(retry.failures, failures);
        last = Some(retry.after);
    }
    // The third failure in a row: 4 s, jittered.
    let after = last.unwrap();
    assert!(
        after >= Duration::from_millis(3600) && after <= Duration::from_millis(4400),
        "{after:?}"
    );
    match pipelines.send(turn(1, false)).await.unwrap() {
        Turn::Wait(wait) => assert!(wait <= after && wait > Duration::from_secs(3), "{wait:?}"),
        _ => panic!("an event before the retry must wait for it"),
    }
    assert!(
        matches!(pipelines.send(turn(2, false)).await.unwrap(), Turn::Run(_)),
        "a spec edit is acted on at once"
    );
    assert!(
        matches!(pipelines.send(turn(1, true)).await.unwrap(), Turn::Run(_)),
        "a deletion does not wait for the retry"
    );
    pipelines.send(PassSucceeded(key("f"))).await.unwrap();
    assert!(
        matches!(pipelines.send(turn(1, false)).await.unwrap(), Turn::Run(_)),
        "a success resets the count"
    );
    let retry = fail().await;
    assert_eq!(retry.failures, 1, "counting starts again after a success");
    pipelines.send(Forget(key("f"))).await.unwrap();
    assert!(
        matches!(pipelines.send(turn(1, false)).await.unwrap(), Turn::Run(_)),
        "a forgotten Cinder's count is gone"
    );
}

#[actix::test]
async fn passes_of_one_cinder_are_serialized() {
    let c = calls();
    let in_flight: Arc<Mutex<HashMap<String, (usize, usize)>>> =
        Arc::new(Mutex::new(HashMap::new()));
    let f = in_flight.clone();
    let lane = vec![fake(StepName::Secrets, &c, move |ctx| {
        let f = f.clone();
        async move {
            let key = ctx.name().to_string();
            {
                let mut m = f.lock().unwrap();
                let e = m.entry(key.clone()).or_default();
                e.0 += 1;
                e.1 = e.1.max(e.0);
            }
            for _ in 0..20 {
                tokio::task::yield_now().await;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
            f.lock().unwrap().get_mut(&key).unwrap().0 -= 1;
            secrets_ready(ctx)
        }
        .boxed()
    })];
    let (_r, metrics) = Metrics::new_registry();
    let op = engine(&metrics);
    let pipelines = Pipelines::new(PipelineTable::custom(lane, vec![]), metrics).start();
    let sends: Vec<_> = ["x", "x", "x", "x", "y", "y"]
        .iter()
        .map(|n| {
            pipelines.send(Reconcile(PassRequest {
                op: op.clone(),
                cinder: cinder(n),
                target: None,
                span: tracing::Span::none(),
            }))
        })
        .collect();
    let results = tokio::time::timeout(Duration::from_secs(60), futures::future::join_all(sends))
        .await
        .unwrap();
    assert!(results.iter().all(|r| matches!(r, Ok(Ok(_)))));
    let (x_max, y_max) = {
        let m = in_flight.lock().unwrap();
        (m["x"].1, m["y"].1)
    };
    assert_eq!(x_max, 1, "two passes of Cinder x overlapped");
    assert_eq!(y_max, 1);
    assert_eq!(
        c.lock()
            .unwrap()
            .iter()
            .filter(|s| s.starts_with("x:"))
            .count(),
        4
    );

    let views = pipelines.send(Inspect).await.unwrap();
    let x = views.iter().find(|v| v.name == "x").unwrap();
    assert_eq!(x.passes, 4);
    assert_eq!(x.last_outcome.as_deref(), Some("completed"));
    assert_eq!(x.current_step, None);
    pipelines
        .send(Forget(CinderKey {
            namespace: "ns".into(),
            name: "x".into(),
        }))
        .await
        .unwrap();
    let views = pipelines.send(Inspect).await.unwrap();
    assert_eq!(
        views.iter().map(|v| v.name.as_str()).collect::<Vec<_>>(),
        ["y"]
    );
}

fn key(name: &str) -> CinderKey {
    CinderKey {
        namespace: "ns".into(),
        name: name.into(),
    }
}

#[actix::test]
async fn a_cinder_without_a_slot_is_queued_and_woken_when_one_is_granted_oldest_first() {
    use futures::StreamExt;
    let (_r, metrics) = Metrics::new_registry();
    let pipelines = Pipelines::new(
        PipelineTable::<Engine>::custom(vec![], vec![]),
        metrics.clone(),
    )
    .with_concurrency(1)
    .start();
    let (wake, mut woken) = futures::channel::mpsc::unbounded();
    pipelines.send(WakeOnGrant(wake)).await.unwrap();
    let gauges = || {
        (
            metrics.reconciles_running.get(),
            metrics.reconciles_queued.get(),
        )
    };

    let running = admit(&pipelines, "a", 50).await;
    assert!(
        matches!(running, Turn::Run(_)),
        "a free slot is taken at once"
    );
    for (name, created) in [("young", 300), ("old", 100), ("middle", 200)] {
        let queued = admit(&pipelines, name, created).await;
        assert!(
            matches!(queued, Turn::Queued),
            "{name} must wait: the one slot is taken"
        );
    }
    // Asking again keeps the Cinder's place; it is not queued twice.
    assert!(matches!(admit(&pipelines, "old", 100).await, Turn::Queued));
    assert_eq!(gauges(), (1, 3), "one running, three queued");
    // A deleted Cinder leaves the queue.
    pipelines.send(Forget(key("middle"))).await.unwrap();
    assert_eq!(gauges(), (1, 2));

    drop(running);
    let next = tokio::time::timeout(Duration::from_secs(10), woken.next()).await;
    assert_eq!(
        next.unwrap(),
        Some(key("old")),
        "the oldest queued is granted first"
    );
    let old = admit(&pipelines, "old", 100).await;
    assert!(
        matches!(old, Turn::Run(_)),
        "the woken Cinder takes its grant"
    );
    assert_eq!(gauges(), (1, 1), "the granted slot counts as running");
    drop(old);
    let next = tokio::time::timeout(Duration::from_secs(10), woken.next()).await;
    assert_eq!(next.unwrap(), Some(key("young")), "middle was forgotten");
    assert!(woken.try_recv().is_err(), "nobody else is queued");
    assert_eq!(gauges(), (1, 0));
}

#[actix::test]
async fn a_slot_granted_to_a_cinder_of_a_shard_not_held_goes_to_the_next() {
    use cinder_operator::shards::view::{HeldShards, ShardView};
    let (_r, metrics) = Metrics::new_registry();
    // Sharded, holding no shard: no queued Cinder is this replica's any more.
    let (_held, view) = tokio::sync::watch::channel(HeldShards::default());
    let pipelines = Pipelines::new(PipelineTable::<Engine>::custom(vec![], vec![]), metrics)
        .with_shards(ShardView::new(4, view))
        .with_concurrency(1)
        .start();
    let (wake, mut woken) = futures::channel::mpsc::unbounded();
    pipelines.send(WakeOnGrant(wake)).await.unwrap();
    let running = admit(&pipelines, "a", 1).await;
    assert!(matches!(running, Turn::Run(_)));
    for name in ["b", "c"] {
        assert!(matches!(admit(&pipelines, name, 2).await, Turn::Queued));
    }
    drop(running);
    // The slot is not kept for b or c: the next Cinder to ask takes it at once.
    let mut next = Turn::Queued;
    for _ in 0..100 {
        next = admit(&pipelines, "d", 3).await;
        if matches!(next, Turn::Run(_)) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(matches!(next, Turn::Run(_)), "the slot went to nobody");
    assert!(
        woken.try_recv().is_err(),
        "no Cinder of another shard is woken"
    );
}

#[actix::test]
async fn product_table_orders_pipeline_steps_and_refuses_duplicates() {
    let c = calls();
    let table = PipelineTable::product(vec![
        ok(StepName::HPA, &c),
        ok(StepName::Database, &c),
        ok(StepName::Secrets, &c),
        ok(StepName::Config, &c),
    ])
    .unwrap();
    assert_eq!(table.names(), ["Secrets", "Config", "Database", "HPA"]);
    assert_eq!(table.group.len(), 1);
    assert!(matches!(
        PipelineTable::product(vec![ok(StepName::HPA, &c), ok(StepName::HPA, &c)]),
        Err(TableError::Duplicate("HPA"))
    ));
    assert_eq!(LANE.len() + GROUP.len(), 17);
    assert_eq!(StepName::Config.condition_type(), "SecretsReady");
    assert_eq!(StepName::HealthCheck.condition_type(), "CinderAPIReady");
}
