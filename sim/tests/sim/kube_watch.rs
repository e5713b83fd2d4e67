//! kube-runtime against the embedded cluster: a watcher sees every change in order and recovers
//! through a 410 Gone and relist; a reflector store converges; a Controller reconciles an object
//! and is woken again by a change to a child it owns.

use cinder_sim::controllers::ControllersConfig;
use cinder_sim::{ClusterConfig, EmbeddedCluster, ErrorRule};
use futures::StreamExt;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::watcher::{self, Event};
use kube::runtime::{WatchStreamExt, reflector};
use kube::{Resource, ResourceExt};
use serde_json::json;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

async fn cluster(history: usize) -> EmbeddedCluster {
    let config = ClusterConfig {
        controllers: ControllersConfig::all_off(),
        history_window: history,
        ..ClusterConfig::default()
    };
    EmbeddedCluster::start(config).await.unwrap()
}

fn cm(name: &str, value: &str) -> ConfigMap {
    serde_json::from_value(
        json!({"metadata": {"name": name, "labels": {"watched": "yes"}}, "data": {"v": value}}),
    )
    .unwrap()
}

/// Polls `cond` every 50 ms for up to 60 s.
async fn eventually(what: &str, mut cond: impl FnMut() -> bool) {
    for _ in 0..1200 {
        if cond() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("not reached within 60 s: {what}");
}

#[derive(Default)]
struct View {
    objects: BTreeMap<String, String>,
    relist: Option<BTreeMap<String, String>>,
    inits: usize,
    /// values of "seq" in the order the watcher delivered them
    seq: Vec<u64>,
}

fn value(c: &ConfigMap) -> String {
    c.data
        .as_ref()
        .and_then(|d| d.get("v"))
        .cloned()
        .unwrap_or_default()
}

#[tokio::test]
async fn watcher_sees_changes_in_order_and_relists_after_gone() {
    let c = cluster(32).await;
    let api: Api<ConfigMap> = Api::namespaced(c.client().await, "default");
    let view = Arc::new(Mutex::new(View::default()));
    let v2 = view.clone();
    let stream = watcher::watcher(
        api.clone(),
        watcher::Config::default().labels("watched=yes"),
    )
    .default_backoff();
    let task = tokio::spawn(async move {
        let mut stream = std::pin::pin!(stream);
        while let Some(ev) = stream.next().await {
            let Ok(ev) = ev else { continue };
            let mut v = v2.lock().unwrap();
            match ev {
                Event::Init => {
                    v.inits += 1;
                    v.relist = Some(BTreeMap::new());
                }
                Event::InitApply(o) => {
                    if let Some(r) = v.relist.as_mut() {
                        r.insert(o.name_any(), value(&o));
                    }
                }
                Event::InitDone => {
                    let r = v.relist.take().unwrap_or_default();
                    v.objects = r;
                }
                Event::Apply(o) => {
                    if o.name_any() == "seq" {
                        let n = value(&o).parse().unwrap();
                        v.seq.push(n);
                    }
                    v.objects.insert(o.name_any(), value(&o));
                }
                Event::Delete(o) => {
                    v.objects.remove(&o.name_any());
                }
            }
        }
    });
    eventually("first list", || view.lock().unwrap().inits == 1).await;
    for i in 0..5 {
        api.create(&PostParams::default(), &cm(&format!("w-{i}"), "0"))
            .await
            .unwrap();
    }
    api.create(&PostParams::default(), &cm("seq", "0"))
        .await
        .unwrap();
    for n in 1..=20u64 {
        api.patch(
            "seq",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"v": n.to_string()}})),
        )
        .await
        .unwrap();
    }
    api.delete("w-0", &DeleteParams::default()).await.unwrap();
    eventually("live events", || {
        let v = view.lock().unwrap();
        v.objects.get("seq").map(String::as_str) == Some("20") && !v.objects.contains_key("w-0")
    })
    .await;
    {
        let v = view.lock().unwrap();
        // every update arrived, in order
        assert_eq!(v.seq, (0..=20).collect::<Vec<_>>());
        assert_eq!(v.objects.len(), 5);
    }

    // the watch breaks and cannot come back while more changes than the window happen
    let faults = c.faults();
    faults.add_error_rule(ErrorRule::always(Some("watch"), Some("configmaps"), 500));
    faults.drop_watches();
    for n in 21..=120u64 {
        api.patch(
            "seq",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"v": n.to_string()}})),
        )
        .await
        .unwrap();
    }
    api.delete("w-1", &DeleteParams::default()).await.unwrap();
    api.create(&PostParams::default(), &cm("w-new", "1"))
        .await
        .unwrap();
    faults.clear();

    eventually("relist after 410 Gone", || {
        let v = view.lock().unwrap();
        v.inits >= 2 && v.objects.get("seq").map(String::as_str) == Some("120")
    })
    .await;
    let fresh: BTreeMap<String, String> = api
        .list(&Default::default())
        .await
        .unwrap()
        .items
        .iter()
        .map(|o| (o.name_any(), value(o)))
        .collect();
    assert_eq!(view.lock().unwrap().objects, fresh);
    // the delivered values of "seq" never went backwards
    let seq = view.lock().unwrap().seq.clone();
    assert!(seq.windows(2).all(|w| w[0] < w[1]), "{seq:?}");
    let lists = c
        .requests()
        .iter()
        .filter(|r| r.verb == "list" && r.resource == "configmaps")
        .count();
    assert!(lists >= 2, "the watcher relisted ({lists} lists)");

    // and it keeps following live changes afterwards
    api.patch(
        "seq",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"v": "121"}})),
    )
    .await
    .unwrap();
    eventually("live after relist", || {
        view.lock().unwrap().objects.get("seq").map(String::as_str) == Some("121")
    })
    .await;
    task.abort();
    c.shutdown().await;
}

#[tokio::test]
async fn reflector_store_converges() {
    let c = cluster(50_000).await;
    let api: Api<ConfigMap> = Api::namespaced(c.client().await, "default");
    let (reader, writer) = reflector::store();
    let stream = reflector(
        writer,
        watcher::watcher(api.clone(), watcher::Config::default()),
    )
    .default_backoff()
    .applied_objects();
    let task = tokio::spawn(async move {
        let mut stream = std::pin::pin!(stream);
        while stream.next().await.is_some() {}
    });
    for i in 0..40 {
        api.create(&PostParams::default(), &cm(&format!("r-{i}"), "0"))
            .await
            .unwrap();
    }
    for i in (0..40).step_by(3) {
        api.patch(
            &format!("r-{i}"),
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"v": "x"}})),
        )
        .await
        .unwrap();
    }
    for i in (0..40).step_by(4) {
        api.delete(&format!("r-{i}"), &DeleteParams::default())
            .await
            .unwrap();
    }
    let expected: BTreeMap<String, String> = api
        .list(&Default::default())
        .await
        .unwrap()
        .items
        .iter()
        .map(|o| (o.name_any(), value(o)))
        .collect();
    eventually("reflector matches the list", || {
        let got: BTreeMap<String, String> = reader
            .state()
            .iter()
            .map(|o| (o.name_any(), value(o)))
            .collect();
        got == expected
    })
    .await;
    task.abort();
    c.shutdown().await;
}

struct Ctx {
    client: kube::Client,
    reconciles: Mutex<BTreeMap<String, usize>>,
    /// Set by a reconcile that found the child carrying the label the test adds to it.
    saw_touched_child: Mutex<bool>,
}

#[derive(Debug, thiserror::Error)]
#[error(transparent)]
struct ReconcileError(#[from] kube::Error);

async fn reconcile(parent: Arc<ConfigMap>, ctx: Arc<Ctx>) -> Result<Action, ReconcileError> {
    *ctx.reconciles
        .lock()
        .unwrap()
        .entry(parent.name_any())
        .or_default() += 1;
    let ns = parent.namespace().unwrap_or_default();
    let secrets: Api<Secret> = Api::namespaced(ctx.client.clone(), &ns);
    let owner = parent.controller_owner_ref(&()).unwrap();
    let child = json!({"apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": format!("{}-child", parent.name_any()), "ownerReferences": [owner]},
        "stringData": {"from": parent.name_any()}});
    let child = secrets
        .patch(
            &format!("{}-child", parent.name_any()),
            &PatchParams::apply("test-controller").force(),
            &Patch::Apply(&child),
        )
        .await?;
    if child.labels().get("touched").map(String::as_str) == Some("yes") {
        *ctx.saw_touched_child.lock().unwrap() = true;
    }
    Ok(Action::await_change())
}

fn error_policy(_: Arc<ConfigMap>, _: &ReconcileError, _: Arc<Ctx>) -> Action {
    Action::requeue(Duration::from_millis(200))
}

#[tokio::test]
async fn controller_is_woken_by_its_owned_child() {
    let c = cluster(50_000).await;
    let client = c.client().await;
    let parents: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let secrets: Api<Secret> = Api::namespaced(client.clone(), "default");
    let ctx = Arc::new(Ctx {
        client: client.clone(),
        reconciles: Mutex::new(BTreeMap::new()),
        saw_touched_child: Mutex::new(false),
    });
    let controller = Controller::new(
        parents.clone(),
        watcher::Config::default().labels("watched=yes"),
    )
    .owns(secrets.clone(), watcher::Config::default())
    .run(reconcile, error_policy, ctx.clone())
    .for_each(|_| async {});
    let task = tokio::spawn(controller);
    parents
        .create(&PostParams::default(), &cm("parent", "1"))
        .await
        .unwrap();
    let count = |ctx: &Ctx| {
        ctx.reconciles
            .lock()
            .unwrap()
            .get("parent")
            .copied()
            .unwrap_or(0)
    };
    eventually("first reconcile", || count(&ctx) >= 1).await;
    let mut child = None;
    for _ in 0..600 {
        child = secrets.get_opt("parent-child").await.unwrap();
        if child.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let child = child.expect("the controller created its child");
    let refs = child.owner_references().to_vec();
    assert_eq!(refs[0].name, "parent");
    assert_eq!(child.data.unwrap()["from"].0, b"parent");
    // change only the child: the parent is reconciled again (and sees the changed child)
    let before = count(&ctx);
    secrets
        .patch(
            "parent-child",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"touched": "yes"}}})),
        )
        .await
        .unwrap();
    eventually("woken by the child", || {
        count(&ctx) > before && *ctx.saw_touched_child.lock().unwrap()
    })
    .await;
    // the owner's uid in the child is the parent's
    let parent = parents.get("parent").await.unwrap();
    assert_eq!(Some(refs[0].uid.clone()), parent.meta().uid.clone());
    task.abort();
    c.shutdown().await;
}
