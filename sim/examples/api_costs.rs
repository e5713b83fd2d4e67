//! The embedded API server's per-request costs at fleet scale, in CPU time of one thread (the
//! machine is shared, so wall time would measure the neighbours):
//!
//! - a list with a label selector returning 10 of 10 000 ConfigMaps, a page of 100 of them, a
//!   get, and the whole list (the reference: what a list costs that returns everything);
//! - an RBAC decision with 400 ClusterRoles and ClusterRoleBindings and 100 Roles and
//!   RoleBindings in the namespace, against the same decision with every request allowed;
//! - watch fan-out: 200 modifications seen by 1 and by 40 watches of the kind (the cost of one
//!   more watch per event);
//! - a Service proxy request (the health probe) in a namespace of 4 000 Deployments, answered
//!   200 (the selected Deployment is the last) and 503 (the Service selects none).
//!
//! `cargo run -p cinder-sim --example api_costs` prints one line per figure.

use cinder_sim::api::AppState;
use cinder_sim::api::proxy;
use cinder_sim::api::watch::{self, WatchParams};
use cinder_sim::auth::rbac::{Attributes, ResourceAttributes};
use cinder_sim::auth::user::UserInfo;
use cinder_sim::auth::{Auth, AuthorizationMode};
use cinder_sim::faults::{FaultConfig, FaultHandle};
use cinder_sim::objects::{Engine, ListOptions, Target};
use cinder_sim::requests::RequestLog;
use cinder_sim::store::ObjKey;
use cinder_sim::store::selectors::{FieldSelector, LabelSelector};
use cinder_sim::writes::WriteLog;
use futures::StreamExt;
use serde_json::{Value, json};
use std::time::Duration;

const NAMESPACE: &str = "fleet";
const OBJECTS: usize = 10_000;
const SELECTED: usize = 10;

/// CPU time of the calling thread.
fn thread_cpu() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes into the timespec it is given and reads nothing else.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    Duration::new(
        u64::try_from(ts.tv_sec).unwrap_or(0),
        u32::try_from(ts.tv_nsec).unwrap_or(0),
    )
}

/// Mean CPU time of `f` over `reps` runs, in microseconds.
fn per_op(reps: usize, mut f: impl FnMut()) -> f64 {
    let start = thread_cpu();
    for _ in 0..reps {
        f();
    }
    (thread_cpu() - start).as_secs_f64() * 1e6 / reps as f64
}

fn config_map(i: usize) -> Value {
    let app = if i.is_multiple_of(OBJECTS / SELECTED) {
        "wanted"
    } else {
        "other"
    };
    json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": format!("cm-{i:05}"), "namespace": NAMESPACE,
                     "uid": format!("uid-{i}"), "labels": {"app": app, "index": i.to_string()},
                     "annotations": {"note": "x".repeat(200)}},
        "data": {"config": "y".repeat(400), "more": "z".repeat(200)}
    })
}

fn pod(i: usize) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": format!("pod-{i:05}"), "namespace": NAMESPACE, "labels": {"app": "pod"}},
        "spec": {"containers": [{"name": "c", "image": "busybox", "args": ["x".repeat(300)]}]}
    })
}

fn target(engine: &Engine, resource: &str) -> Target {
    let info = engine
        .registry
        .find("", "v1", resource)
        .unwrap_or_else(|| panic!("v1 {resource} is a built-in resource"));
    Target {
        info,
        version: "v1".into(),
        namespace: NAMESPACE.into(),
        name: String::new(),
        subresource: String::new(),
    }
}

fn lists(engine: &Engine) {
    let cms = target(engine, "configmaps");
    let selected = ListOptions {
        labels: LabelSelector::parse("app=wanted").unwrap_or_default(),
        ..ListOptions::default()
    };
    let page = ListOptions {
        limit: Some(100),
        continue_token: Some(format!("{}:5000", engine.store.resource_version())),
        ..ListOptions::default()
    };
    let all = ListOptions::default();
    let count = |opts: &ListOptions| engine.list(&cms, opts).map(|l| l.0.len()).unwrap_or(0);
    assert_eq!(count(&selected), SELECTED);
    assert_eq!(count(&page), 100);
    assert_eq!(count(&all), OBJECTS);
    let one = Target {
        name: "cm-00042".into(),
        ..cms.clone()
    };
    let get = per_op(200, || {
        let _ = engine.get(&one);
    });
    let with_selector = per_op(20, || {
        count(&selected);
    });
    let a_page = per_op(20, || {
        count(&page);
    });
    let everything = per_op(5, || {
        count(&all);
    });
    println!("get one ConfigMap                        {get:>10.1} us");
    println!(
        "list, selector returning {SELECTED} of {OBJECTS}      {with_selector:>10.1} us  ({:.3} of the whole list)",
        with_selector / everything
    );
    println!(
        "list, a page of 100 at offset 5000       {a_page:>10.1} us  ({:.3} of the whole list)",
        a_page / everything
    );
    println!("list, all {OBJECTS} (reference)             {everything:>10.1} us");
}

fn rbac_object(kind: &str, name: &str, namespace: Option<&str>, body: Value) -> (ObjKey, Value) {
    let resource = match kind {
        "ClusterRole" => "clusterroles",
        "ClusterRoleBinding" => "clusterrolebindings",
        "Role" => "roles",
        _ => "rolebindings",
    };
    let mut obj = json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": kind,
        "metadata": {"name": name},
    });
    if let Some(ns) = namespace {
        obj["metadata"]["namespace"] = json!(ns);
    }
    if let (Some(o), Some(b)) = (obj.as_object_mut(), body.as_object()) {
        o.extend(b.clone());
    }
    (
        ObjKey::new(
            "rbac.authorization.k8s.io",
            resource,
            namespace.unwrap_or(""),
            name,
        ),
        obj,
    )
}

fn rbac(engine: &Engine) {
    let rule = json!({"rules": [{"apiGroups": [""], "resources": ["configmaps", "secrets"], "verbs": ["get", "list"]}]});
    let mut objects = Vec::new();
    for i in 0..200 {
        let name = format!("role-{i}");
        objects.push(rbac_object("ClusterRole", &name, None, rule.clone()));
        objects.push(rbac_object(
            "ClusterRoleBinding",
            &name,
            None,
            json!({"roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
                   "subjects": [{"kind": "ServiceAccount", "name": format!("sa-{i}"), "namespace": NAMESPACE}]}),
        ));
    }
    for i in 0..50 {
        let name = format!("local-{i}");
        objects.push(rbac_object("Role", &name, Some(NAMESPACE), rule.clone()));
        objects.push(rbac_object(
            "RoleBinding",
            &name,
            Some(NAMESPACE),
            json!({"roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
                   "subjects": [{"kind": "ServiceAccount", "name": format!("local-sa-{i}"), "namespace": NAMESPACE}]}),
        ));
    }
    engine.store.transact(|txn| {
        for (key, obj) in objects {
            txn.put(key, obj);
        }
    });
    let user = UserInfo::service_account(NAMESPACE, "local-sa-49", "uid");
    let attrs = Attributes::Resource(ResourceAttributes {
        verb: "get".into(),
        group: String::new(),
        resource: "configmaps".into(),
        subresource: String::new(),
        namespace: NAMESPACE.into(),
        name: "cm-00042".into(),
    });
    let enforced = Auth::new(AuthorizationMode::Rbac);
    let open = Auth::new(AuthorizationMode::AlwaysAllow);
    assert!(enforced.decide(&engine.store, &user, &attrs).allowed);
    let decided = per_op(50, || {
        let _ = enforced.decide(&engine.store, &user, &attrs);
    });
    let allowed = per_op(50, || {
        let _ = open.decide(&engine.store, &user, &attrs);
    });
    println!(
        "RBAC decision, 500 RBAC objects          {decided:>10.1} us  ({:.1} us with every request allowed)",
        allowed
    );
}

/// CPU time per event of `writes` modifications seen by `watchers` watches of ConfigMaps.
fn fan_out(engine: &Engine, watchers: usize, writes: usize) -> f64 {
    let runtime = current_thread_runtime();
    runtime.block_on(async {
        let (app, _stop) = app_state(engine);
        let cms = target(engine, "configmaps");
        let since = engine.store.resource_version();
        let mut tasks = Vec::new();
        for _ in 0..watchers {
            let params = WatchParams {
                since: Some(since),
                send_initial_events: false,
                bookmarks: false,
                timeout: Duration::from_secs(600),
                labels: LabelSelector::default(),
                fields: FieldSelector::default(),
                table: None,
                metadata_only: false,
            };
            let mut events = Box::pin(watch::stream(app.clone(), cms.clone(), params));
            tasks.push(tokio::spawn(async move {
                let mut seen = 0;
                while seen < writes {
                    match events.next().await {
                        Some(Ok(_)) => seen += 1,
                        _ => break,
                    }
                }
                seen
            }));
        }
        tokio::task::yield_now().await;
        let start = thread_cpu();
        for w in 0..writes {
            let i = (w * 37) % OBJECTS;
            let mut obj = config_map(i);
            obj["data"]["round"] = json!(w.to_string());
            engine.store.transact(|txn| {
                txn.put(
                    ObjKey::new("", "configmaps", NAMESPACE, &format!("cm-{i:05}")),
                    obj,
                )
            });
        }
        for t in tasks {
            assert_eq!(t.await.unwrap_or(0), writes);
        }
        (thread_cpu() - start).as_secs_f64() * 1e6 / writes as f64
    })
}

fn watches(engine: &Engine) {
    let one = fan_out(engine, 1, 200);
    let many = fan_out(engine, 40, 200);
    println!("watch event, 1 watcher                   {one:>10.1} us per write");
    println!(
        "watch event, 40 watchers                 {many:>10.1} us per write  ({:.1} us per extra watcher)",
        (many - one) / 39.0
    );
}

const DEPLOYMENTS: usize = 4_000;

fn deployment(i: usize) -> Value {
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": format!("deploy-{i:05}"), "namespace": NAMESPACE,
                     "uid": format!("deploy-uid-{i}"), "labels": {"app": format!("app-{i}")}},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": format!("app-{i}")}},
                 "template": {"metadata": {"labels": {"app": format!("app-{i}"), "tier": "api"}},
                              "spec": {"containers": [{"name": "c", "image": "cinder", "args": ["x".repeat(300)]}]}}},
        "status": {"replicas": 1, "readyReplicas": 1, "availableReplicas": 1}
    })
}

fn service(name: &str, app: &str) -> (ObjKey, Value) {
    (
        ObjKey::new("", "services", NAMESPACE, name),
        json!({
            "apiVersion": "v1", "kind": "Service",
            "metadata": {"name": name, "namespace": NAMESPACE},
            "spec": {"selector": {"app": app}, "ports": [{"port": 8776}]}
        }),
    )
}

/// An API server state over `engine` (no listener: handlers are called directly), and the
/// sender whose drop ends its watches.
fn app_state(engine: &Engine) -> (AppState, tokio::sync::watch::Sender<bool>) {
    let (stop_tx, stop) = tokio::sync::watch::channel(false);
    let app = AppState {
        engine: engine.clone(),
        faults: FaultHandle::new(FaultConfig::default()),
        log: RequestLog::new(16, None),
        writes: WriteLog::new(false, 16),
        stop,
        address: String::new(),
        auth: Auth::default(),
    };
    (app, stop_tx)
}

fn current_thread_runtime() -> tokio::runtime::Runtime {
    match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => panic!("a tokio runtime: {e}"),
    }
}

fn service_proxy(engine: &Engine) {
    engine.store.transact(|txn| {
        for i in 0..DEPLOYMENTS {
            txn.put(
                ObjKey::new("apps", "deployments", NAMESPACE, &format!("deploy-{i:05}")),
                deployment(i),
            );
        }
        for (name, app) in [
            ("api", format!("app-{}", DEPLOYMENTS - 1)),
            ("gone", "none".into()),
        ] {
            let (key, obj) = service(name, &app);
            txn.put(key, obj);
        }
    });
    let runtime = current_thread_runtime();
    let (app, _stop) = app_state(engine);
    let request = actix_web::test::TestRequest::default().to_http_request();
    let probe = |service: &str| {
        runtime
            .block_on(proxy::answer(
                &request,
                &[],
                &app,
                NAMESPACE,
                &format!("{service}:8776"),
                "healthcheck",
            ))
            .map(|r| r.status().as_u16())
            .unwrap_or(0)
    };
    assert_eq!(probe("api"), 200);
    assert_eq!(probe("gone"), 503);
    let ready = per_op(50, || {
        probe("api");
    });
    let unavailable = per_op(50, || {
        probe("gone");
    });
    println!("service proxy, {DEPLOYMENTS} Deployments, 200    {ready:>10.1} us");
    println!("service proxy, {DEPLOYMENTS} Deployments, 503    {unavailable:>10.1} us");
}

fn main() {
    let engine = Engine::new(50_000);
    engine.store.transact(|txn| {
        for i in 0..OBJECTS {
            txn.put(
                ObjKey::new("", "configmaps", NAMESPACE, &format!("cm-{i:05}")),
                config_map(i),
            );
            txn.put(
                ObjKey::new("", "pods", NAMESPACE, &format!("pod-{i:05}")),
                pod(i),
            );
        }
    });
    lists(&engine);
    rbac(&engine);
    watches(&engine);
    service_proxy(&engine);
}
