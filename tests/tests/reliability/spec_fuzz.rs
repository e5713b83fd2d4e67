//! Specs the CRD schema admits, driven through the steps: proptest generates Cinder specs (and
//! a CinderBackend for each) with odd but valid values (empty strings where the schema allows
//! them, zero and the largest replica counts, releases nobody ships, `extraConfig` sections and
//! keys with spaces, brackets, `=` and non-ASCII, missing optional sections, references to
//! objects that do not exist), creates them (in batches) on an embedded cluster with the
//! operator running, and checks for each once its passes settle: no panic anywhere in the
//! process, a status whose every condition has a reason (none left `Unknown` without one), no
//! hot loop (after settling, no object gets more than five requests within a second), and a
//! deletion that completes.
//!
//! CI runs a few cases (`PROPTEST_CASES`, 4 by default); a longer run is
//! `PROPTEST_CASES=64 cargo test -p cinder-e2e --test reliability spec_fuzz`, and
//! `CINDER_FUZZ_SEED=N` repeats a failed run's specs (its seed is in the failure).

use cinder_e2e::database_helpers::database_environment;
use cinder_e2e::operator_process::{count_from_env, seed_from_env};
use cinder_e2e::request_checks::*;
use cinder_e2e::*;
use cinder_operator::crd::{Cinder, CinderBackend};
use kube::ResourceExt as _;
use proptest::prelude::*;
use proptest::strategy::ValueTree;
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};
use serde_json::{Value, json};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

const AGENT: &str = "cinder-operator-fuzz";
/// No object gets more requests than this within one second once the passes settled.
const HOT_LOOP_LIMIT: usize = 5;
/// The passes have settled when the operator wrote nothing for this long (longer than the
/// Deployment polling interval, 10 s with its jitter).
const QUIET: Duration = Duration::from_secs(12);
/// The window after settling that the hot-loop check reads.
const WINDOW: Duration = Duration::from_secs(5);
/// Cinders on the cluster at once: the cases run in batches of this many, each batch created,
/// settled, checked and deleted before the next.
const BATCH: usize = 8;

fn odd_string(max: usize) -> impl Strategy<Value = String> {
    prop_oneof![
        Just(String::new()),
        "[a-z]{1,8}",
        "[ -~]{1,24}",
        "\\PC{1,12}",
        Just("x".repeat(max)),
        Just("a = b [c] ; #d %(e)s".to_string()),
    ]
}

fn non_empty(max: usize) -> impl Strategy<Value = String> {
    odd_string(max).prop_map(|s| if s.is_empty() { "x".to_string() } else { s })
}

fn release() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("2025.2".to_string()),
        Just("2026.1".to_string()),
        "[0-9]{4}\\.[12]",
    ]
}

fn image() -> impl Strategy<Value = Value> {
    prop_oneof![
        (non_empty(512), non_empty(128))
            .prop_map(|(repository, tag)| json!({"repository": repository, "tag": tag})),
        (non_empty(512), "[a-f0-9]{32,64}").prop_map(
            |(repository, hex)| json!({"repository": repository, "digest": format!("sha256:{hex}")})
        ),
    ]
}

fn database() -> impl Strategy<Value = Value> {
    let schema = prop_oneof![Just("cinder".to_string()), "[A-Za-z0-9_]{1,64}"];
    prop_oneof![
        schema.clone().prop_map(|db| json!({
            "clusterRef": {"name": "mariadb"}, "database": db, "secretRef": {"name": "cinder-db"}
        })),
        (schema, non_empty(253), proptest::option::of(1..=65535i32)).prop_map(
            |(db, host, port)| {
                let mut d =
                    json!({"host": host, "database": db, "secretRef": {"name": "cinder-db"}});
                if let Some(port) = port {
                    d["port"] = json!(port);
                }
                d
            }
        ),
        Just(
            json!({"clusterRef": {"name": "no-such-mariadb"}, "secretRef": {"name": "no-such-secret"}})
        ),
    ]
}

fn messaging() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(json!({"secretRef": {"name": "cinder-rabbit"}})),
        Just(json!({"clusterRef": {"name": "rabbit"}})),
        Just(json!({"secretRef": {"name": "no-such-secret"}})),
    ]
}

fn extra_config() -> impl Strategy<Value = Value> {
    let section = prop_oneof![
        Just("DEFAULT".to_string()),
        Just("policy".to_string()),
        Just("database".to_string()),
        odd_string(64),
    ];
    let keys = proptest::collection::btree_map(odd_string(64), odd_string(256), 0..4);
    proptest::collection::btree_map(section, keys, 0..4).prop_map(|m| json!(m))
}

fn optional_sections() -> impl Strategy<Value = Vec<(&'static str, Value)>> {
    let api = (0..=100i32, 1..=64i32, 1..=64i32).prop_map(
        |(replicas, p, t)| json!({"replicas": replicas, "uwsgi": {"processes": p, "threads": t}}),
    );
    let scheduler =
        prop_oneof![Just(0), Just(100), 0..=100i32].prop_map(|r| json!({"replicas": r}));
    let purge = (
        prop_oneof![Just(1), Just(36500), 1..=36500i32],
        prop_oneof![
            Just("1 0 * * *".to_string()),
            Just("* * * * *".to_string()),
            Just("61 25 32 13 8".to_string()),
            Just("@ @ @ @ @".to_string()),
        ],
        any::<bool>(),
    )
        .prop_map(|(days, schedule, suspend)| {
            json!({"retentionDays": days, "schedule": schedule, "suspend": suspend})
        });
    let autoscaling = (1..=100i32, 0..=99i32, 1..=100i32).prop_map(|(min, extra, cpu)| {
        json!({"minReplicas": min, "maxReplicas": (min + extra).min(100), "targetCPUUtilization": cpu})
    });
    let gateway = (non_empty(253), prop_oneof![Just("/".to_string()), "/[ -~]{0,20}"])
        .prop_map(|(host, path)| json!({"parentRef": {"name": "no-such-gateway"}, "hostname": host, "path": path}));
    let store = prop_oneof![
        Just(json!({"kind": "ClusterSecretStore", "name": "openbao-cluster-store"})),
        Just(json!({"kind": "SecretStore", "name": "no-such-store"})),
    ];
    let region = non_empty(255);
    (
        proptest::option::of(api),
        proptest::option::of(scheduler),
        proptest::option::of(purge),
        proptest::option::of(autoscaling),
        proptest::option::of(gateway),
        proptest::option::of(store),
        proptest::option::of(region),
        proptest::option::weighted(0.1, Just(json!({"name": "nowhere"}))),
    )
        .prop_map(|(api, sched, purge, hpa, gw, store, region, target)| {
            [
                ("api", api),
                ("scheduler", sched),
                ("dbPurge", purge),
                ("autoscaling", hpa),
                ("gateway", gw),
                ("secretStoreRef", store),
                ("region", region.map(Value::String)),
                ("targetClusterRef", target),
            ]
            .into_iter()
            .filter_map(|(k, v)| Some((k, v?)))
            .collect()
        })
}

/// A Cinder spec the schema admits.
fn cinder_spec() -> impl Strategy<Value = Value> {
    (
        release(),
        image(),
        database(),
        messaging(),
        prop_oneof![
            Just("http://keystone:5000".to_string()),
            "https?://[ -~]{1,40}"
        ],
        extra_config(),
        optional_sections(),
    )
        .prop_map(|(release, image, db, msg, keystone, extra, optional)| {
            let mut spec = json!({
                "openStackRelease": release, "image": image, "database": db, "messaging": msg,
                "serviceUser": {"secretRef": {"name": "cinder-keystone"}},
                "keystoneEndpoint": keystone,
            });
            if extra.as_object().is_some_and(|m| !m.is_empty()) {
                spec["extraConfig"] = extra;
            }
            for (k, v) in optional {
                spec[k] = v;
            }
            spec
        })
}

/// A CinderBackend spec (NFS or RBD) of Cinder `parent`.
fn backend_spec(parent: String) -> impl Strategy<Value = Value> {
    let options = proptest::collection::vec(odd_string(64), 0..3);
    let extra = proptest::collection::btree_map(odd_string(64), odd_string(128), 0..3);
    let nfs = (
        non_empty(253),
        odd_string(1024),
        proptest::option::of(options),
    )
        .prop_map(|(server, path, options)| {
            let mut nfs = json!({"server": server, "path": format!("/{path}")});
            if let Some(o) = options {
                nfs["mountOptions"] = json!(o);
            }
            json!({"type": "NFS", "nfs": nfs})
        });
    let rbd = (
        non_empty(64),
        non_empty(64),
        proptest::collection::vec(non_empty(64), 1..3),
    )
        .prop_map(|(pool, user, monitors)| {
            json!({"type": "RBD", "rbd": {"pool": pool, "user": user, "monitors": monitors,
                   "keySecretRef": {"name": "no-such-key"}}})
        });
    (prop_oneof![nfs, rbd], proptest::option::of(extra)).prop_map(move |(mut spec, extra)| {
        spec["cinderRef"] = json!({"name": parent.clone()});
        if let Some(extra) = extra {
            spec["extraOptions"] = json!(extra);
        }
        spec
    })
}

/// Panics seen on threads other than the test threads (the operator's tasks and actors).
static OPERATOR_PANICS: Mutex<Vec<String>> = Mutex::new(Vec::new());
static HOOKED: AtomicUsize = AtomicUsize::new(0);

fn count_operator_panics() {
    if HOOKED.fetch_add(1, Ordering::SeqCst) > 0 {
        return;
    }
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let thread = std::thread::current();
        let name = thread.name().unwrap_or("");
        // Test threads carry the test's path; everything else runs operator code.
        if !name.contains("::") && name != "main" {
            let mut panics = OPERATOR_PANICS
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            panics.push(format!("{name}: {info}"));
        }
        previous(info);
    }));
}

/// The specs of one run: `(cinder spec, backend spec)` per case.
fn generate(cases: usize, seed: u64) -> Vec<(Value, Value)> {
    let mut seed_bytes = [0u8; 32];
    seed_bytes[..8].copy_from_slice(&seed.to_le_bytes());
    let mut runner = TestRunner::new_with_rng(
        Config::default(),
        TestRng::from_seed(RngAlgorithm::ChaCha, &seed_bytes),
    );
    (0..cases)
        .map(|i| {
            let strategy = (cinder_spec(), backend_spec(format!("fuzz-{i}")));
            strategy
                .new_tree(&mut runner)
                .map(|t| t.current())
                .unwrap_or_else(|e| panic!("generating case {i}: {e}"))
        })
        .collect()
}

/// What is wrong with Cinder `name` once settled, if anything.
async fn check_conditions(h: &Harness, name: &str) -> Option<String> {
    let cinder = match h.api::<Cinder>().get(name).await {
        Ok(c) => c,
        Err(e) => return Some(format!("reading it: {e}")),
    };
    let conditions = cinder.status.map(|s| s.conditions).unwrap_or_default();
    if conditions.is_empty() {
        return Some("no condition in its status".to_string());
    }
    let bare: Vec<String> = conditions
        .iter()
        .filter(|c| c.reason.trim().is_empty())
        .map(|c| format!("{}={} without a reason", c.type_, c.status))
        .collect();
    (!bare.is_empty()).then(|| bare.join(", "))
}

/// Creates the Cinders (and backends) of `batch` (`(index, (cinder spec, backend spec))`);
/// returns the admitted ones: `(name, cinder spec, backend spec)`.
async fn create_batch(
    h: &Harness,
    seed: u64,
    batch: &[(usize, &(Value, Value))],
) -> Vec<(String, Value, Value)> {
    let mut admitted = Vec::new();
    for (i, (spec, backend)) in batch {
        let name = format!("fuzz-{i}");
        let body = json!({
            "apiVersion": "cinder.openstack.c5c3.io/v1alpha1", "kind": "Cinder",
            "metadata": {"name": name, "namespace": NS}, "spec": spec,
        });
        match create_raw::<Cinder>(&h.client, body).await {
            Ok(_) => {}
            Err(kube::Error::Api(e)) if e.code == 422 => {
                eprintln!("spec fuzz: case {i} not admitted ({}): {spec}", e.message);
                continue;
            }
            Err(e) => panic!("seed {seed}: creating case {i}: {e}: {spec}"),
        }
        let body = json!({
            "apiVersion": "cinder.openstack.c5c3.io/v1alpha1", "kind": "CinderBackend",
            "metadata": {"name": format!("{name}-b"), "namespace": NS}, "spec": backend,
        });
        if let Err(e) = create_raw::<CinderBackend>(&h.client, body).await {
            panic!("seed {seed}: case {i}'s backend was not admitted ({e}): {backend}");
        }
        admitted.push((name, spec.clone(), backend.clone()));
    }
    admitted
}

/// Waits until the operator wrote nothing (Events and Lease renewals aside) for [`QUIET`];
/// false when it still writes after a minute.
async fn settle(h: &Harness) -> bool {
    let quiet = chrono::Duration::from_std(QUIET).unwrap_or_default();
    let give_up = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        let requests = h.cluster.requests();
        let last_write = of_agent(&requests, AGENT)
            .into_iter()
            .filter(|r| is_write(r) && !matches!(r.resource.as_str(), "events" | "leases"))
            .map(|r| r.time)
            .max();
        if last_write.is_none_or(|t| chrono::Utc::now() - t > quiet) {
            return true;
        }
        if std::time::Instant::now() > give_up {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// Deletes the batch's Cinders and backends and waits until they are gone (finalizers
/// released); what is still there after a minute is returned.
async fn delete_batch(h: &Harness, admitted: &[(String, Value, Value)]) -> Vec<String> {
    for (name, _, _) in admitted {
        let _ = h
            .api::<CinderBackend>()
            .delete(&format!("{name}-b"), &Default::default())
            .await;
        let _ = h.api::<Cinder>().delete(name, &Default::default()).await;
    }
    let gone = eventually("the batch is deleted", || async {
        let left = h.api::<Cinder>().list(&Default::default()).await.ok()?;
        let backends = h
            .api::<CinderBackend>()
            .list(&Default::default())
            .await
            .ok()?;
        (left.items.is_empty() && backends.items.is_empty()).then_some(())
    })
    .await;
    match gone {
        Ok(()) => Vec::new(),
        Err(_) => {
            let mut left: Vec<String> = Vec::new();
            if let Ok(l) = h.api::<Cinder>().list(&Default::default()).await {
                left.extend(l.items.iter().map(|c| format!("Cinder {}", c.name_any())));
            }
            if let Ok(l) = h.api::<CinderBackend>().list(&Default::default()).await {
                left.extend(
                    l.items
                        .iter()
                        .map(|b| format!("CinderBackend {}", b.name_any())),
                );
            }
            left
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn specs_the_schema_admits_settle_with_reasons_and_without_loops() {
    count_operator_panics();
    let seed = seed_from_env("CINDER_FUZZ_SEED");
    let cases = count_from_env("PROPTEST_CASES", 4);
    eprintln!("spec fuzz: seed {seed}, {cases} cases (CINDER_FUZZ_SEED={seed} repeats them)");
    let specs = generate(cases, seed);
    let h = Harness::start_with(HarnessConfig {
        operator_user_agent: Some(AGENT.to_string()),
        ..Default::default()
    })
    .await
    .unwrap();
    database_environment(&h.client, "fuzz").await.unwrap();
    let mut failures = Vec::new();
    let mut admitted_total = 0;
    let numbered: Vec<(usize, &(Value, Value))> = specs.iter().enumerate().collect();
    for batch in numbered.chunks(BATCH) {
        let admitted = create_batch(&h, seed, batch).await;
        admitted_total += admitted.len();
        if !settle(&h).await {
            // Slow writes are no loop (the window below judges the rate); said for the record.
            eprintln!(
                "spec fuzz: the operator still wrote something every {QUIET:?} after a minute"
            );
        }
        // After settling, a window of requests: no object asked for more than the limit.
        let from = chrono::Utc::now();
        tokio::time::sleep(WINDOW).await;
        let requests = h.cluster.requests();
        let window: Vec<_> = of_agent(&requests, AGENT)
            .into_iter()
            .filter(|r| r.time >= from && r.verb != "watch")
            .collect();
        for hot in hot_loops(&window, HOT_LOOP_LIMIT) {
            failures.push(format!("hot loop after settling: {hot:?}"));
        }
        for (name, spec, backend) in &admitted {
            let not_true: Vec<String> = cinder_conditions(&h.client, name)
                .await
                .iter()
                .filter(|c| c.status != "True")
                .map(|c| format!("{}={} ({})", c.type_, c.status, c.reason))
                .collect();
            eprintln!("spec fuzz: {name} settled with {not_true:?}");
            if let Some(problem) = check_conditions(&h, name).await {
                failures.push(format!("{name}: {problem}; spec {spec}; backend {backend}"));
            }
        }
        for left in delete_batch(&h, &admitted).await {
            failures.push(format!("{left} still there a minute after its deletion"));
        }
    }
    assert!(
        admitted_total * 2 >= specs.len(),
        "seed {seed}: the schema refused most generated specs; the generator is off"
    );
    let panics = OPERATOR_PANICS
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .clone();
    failures.extend(panics.into_iter().map(|p| format!("panic: {p}")));
    h.stop().await.unwrap();
    assert!(
        failures.is_empty(),
        "seed {seed} (CINDER_FUZZ_SEED={seed} repeats it):\n{}",
        failures.join("\n")
    );
}
