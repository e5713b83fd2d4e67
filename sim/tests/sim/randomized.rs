//! 10 000 randomized operations (create / replace / merge patch / apply / delete, label flips)
//! from several concurrent clients over a few hundred objects; afterwards every watcher's
//! reconstructed view — a plain one, one with a label selector, and one that was dropped
//! repeatedly mid-run — equals a fresh list.

use cinder_sim::controllers::ControllersConfig;
use cinder_sim::{ClusterConfig, EmbeddedCluster};
use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::json;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

const CLIENTS: u64 = 5;
const OPS_PER_CLIENT: usize = 2_000;
const OBJECTS: usize = 300;

type View = Arc<Mutex<BTreeMap<String, String>>>;

/// Follows a watcher; the view maps name → resourceVersion.
fn follow(api: Api<ConfigMap>, config: watcher::Config) -> (View, tokio::task::JoinHandle<()>) {
    let view: View = Arc::default();
    let v = view.clone();
    let task = tokio::spawn(async move {
        let mut relist: Option<BTreeMap<String, String>> = None;
        let stream = watcher::watcher(api, config).default_backoff();
        let mut stream = std::pin::pin!(stream);
        while let Some(ev) = stream.next().await {
            let Ok(ev) = ev else { continue };
            match ev {
                Event::Init => relist = Some(BTreeMap::new()),
                Event::InitApply(o) => {
                    if let Some(r) = relist.as_mut() {
                        r.insert(o.name_any(), o.resource_version().unwrap_or_default());
                    }
                }
                Event::InitDone => *v.lock().unwrap() = relist.take().unwrap_or_default(),
                Event::Apply(o) => {
                    v.lock()
                        .unwrap()
                        .insert(o.name_any(), o.resource_version().unwrap_or_default());
                }
                Event::Delete(o) => {
                    v.lock().unwrap().remove(&o.name_any());
                }
            }
        }
    });
    (view, task)
}

async fn operate(api: Api<ConfigMap>, seed: u64) -> usize {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut done = 0;
    for i in 0..OPS_PER_CLIENT {
        let name = format!("obj-{}", rng.random_range(0..OBJECTS));
        let even = rng.random_bool(0.5);
        let parity = if even { "even" } else { "odd" };
        let result = match rng.random_range(0..6) {
            0 | 1 => {
                let cm: ConfigMap = serde_json::from_value(json!({"metadata": {"name": name, "labels": {"parity": parity}}, "data": {"i": i.to_string()}})).unwrap();
                api.create(&PostParams::default(), &cm).await.map(|_| ())
            }
            2 => match api.get_opt(&name).await {
                Ok(Some(mut cm)) => {
                    cm.data = Some([("i".to_string(), format!("replaced-{i}"))].into());
                    cm.labels_mut().insert("parity".into(), parity.into());
                    api.replace(&name, &PostParams::default(), &cm).await.map(|_| ())
                }
                Ok(None) => Ok(()),
                Err(e) => Err(e),
            },
            3 => api.patch(&name, &PatchParams::default(), &Patch::Merge(json!({"metadata": {"labels": {"parity": parity}}, "data": {"p": i.to_string()}}))).await.map(|_| ()),
            4 => {
                let applied = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "labels": {"parity": parity}}, "data": {"applied": seed.to_string()}});
                api.patch(&name, &PatchParams::apply(&format!("client-{seed}")).force(), &Patch::Apply(&applied)).await.map(|_| ())
            }
            _ => api.delete(&name, &DeleteParams::default()).await.map(|_| ()),
        };
        match result {
            Ok(()) => done += 1,
            // losing a race with another client is part of the game
            Err(kube::Error::Api(s)) if s.code == 404 || s.code == 409 => {}
            Err(e) => panic!("unexpected error: {e:?}"),
        }
    }
    done
}

async fn converged(view: &View, api: &Api<ConfigMap>, lp: &ListParams) -> bool {
    let fresh: BTreeMap<String, String> = api
        .list(lp)
        .await
        .unwrap()
        .items
        .iter()
        .map(|o| (o.name_any(), o.resource_version().unwrap_or_default()))
        .collect();
    *view.lock().unwrap() == fresh
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_thousand_random_operations_keep_every_watcher_exact() {
    let c = EmbeddedCluster::start(ClusterConfig {
        controllers: ControllersConfig::all_off(),
        ..ClusterConfig::default()
    })
    .await
    .unwrap();
    let client = c.client().await;
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let all: Api<ConfigMap> = Api::all(client.clone());
    let (plain, t1) = follow(all.clone(), watcher::Config::default());
    let (even, t2) = follow(
        api.clone(),
        watcher::Config::default().labels("parity=even"),
    );
    let (dropped, t3) = follow(api.clone(), watcher::Config::default());
    // wait until the three watchers have listed
    for _ in 0..600 {
        if c.requests().iter().filter(|r| r.verb == "watch").count() >= 3 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    let faults = c.faults();
    let dropper = tokio::spawn(async move {
        for _ in 0..10 {
            tokio::time::sleep(Duration::from_millis(300)).await;
            faults.drop_watches();
        }
    });
    let mut workers = Vec::new();
    for seed in 0..CLIENTS {
        workers.push(tokio::spawn(operate(api.clone(), seed)));
    }
    let mut succeeded = 0;
    for w in workers {
        succeeded += w.await.unwrap();
    }
    dropper.await.unwrap();
    assert!(
        succeeded > 1_000,
        "most operations did something ({succeeded})"
    );

    let lp_all = ListParams::default();
    let lp_even = ListParams::default().labels("parity=even");
    for _ in 0..1200 {
        if converged(&plain, &all, &lp_all).await
            && converged(&even, &api, &lp_even).await
            && converged(&dropped, &api, &lp_all).await
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    for (name, view, lp) in [
        ("plain", &plain, &lp_all),
        ("selector", &even, &lp_even),
        ("dropped", &dropped, &lp_all),
    ] {
        let fresh: BTreeMap<String, String> = api
            .list(lp)
            .await
            .unwrap()
            .items
            .iter()
            .map(|o| (o.name_any(), o.resource_version().unwrap_or_default()))
            .collect();
        assert_eq!(*view.lock().unwrap(), fresh, "{name} watcher's view");
    }
    let ops = c
        .requests()
        .iter()
        .filter(|r| matches!(r.verb.as_str(), "create" | "update" | "patch" | "delete"))
        .count();
    assert!(ops >= (CLIENTS as usize) * OPS_PER_CLIENT / 2);
    for t in [t1, t2, t3] {
        t.abort();
    }
    c.shutdown().await;
}
