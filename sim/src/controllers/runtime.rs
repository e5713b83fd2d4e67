//! The plumbing every simulated controller shares: the live config, the resync/config-change
//! trigger, the reconcile error type and retry policy, "first seen" timers for delays, waiting
//! for a CRD to exist, and running a kube-runtime `Controller` stream to completion.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Display;
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::{Duration, Instant};

use futures::{Stream, StreamExt};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::{Client, Resource};
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::config::ControllersConfig;
use super::informers::Informers;

/// What a reconcile can fail with; every failure is retried shortly.
#[derive(Debug, thiserror::Error)]
pub enum ReconcileError {
    /// The API server refused or failed a call.
    #[error("kubernetes API: {0}")]
    Kube(#[from] kube::Error),
    /// The object lacks a field the controller needs.
    #[error("object has no {0}")]
    Missing(&'static str),
    /// An object could not be converted to or from JSON.
    #[error("object encoding: {0}")]
    Encoding(#[from] serde_json::Error),
}

/// How soon a failed reconcile runs again.
pub const RETRY_AFTER: Duration = Duration::from_millis(500);

/// The retry policy of every simulated controller.
pub fn retry<K>(_object: Arc<K>, error: &ReconcileError, _ctx: Arc<impl Sized>) -> Action {
    tracing::debug!(%error, "simulated controller reconcile failed; retrying");
    Action::requeue(RETRY_AFTER)
}

/// The config shared by the handle and every controller, plus the change notifier.
pub struct Shared {
    /// The client of the cluster the controllers act on.
    pub client: Client,
    /// The live config.
    pub config: Arc<RwLock<ControllersConfig>>,
    /// Bumped by every config update made through the handle.
    pub changes: tokio::sync::watch::Sender<u64>,
    /// Reconcile passes (successful or failed) per controller name.
    pub passes: Mutex<BTreeMap<&'static str, u64>>,
    /// The watch-fed stores the controllers read instead of listing.
    pub informers: Informers,
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shared")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl Shared {
    /// Counts one reconcile pass of the controller `name`.
    pub fn count_pass(&self, name: &'static str) {
        *self
            .passes
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .entry(name)
            .or_default() += 1;
    }

    /// Reconcile passes of the controller `name` so far.
    pub fn passes(&self, name: &str) -> u64 {
        self.passes
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(name)
            .copied()
            .unwrap_or(0)
    }

    /// Reads one value out of the live config.
    pub fn read<T>(&self, f: impl FnOnce(&ControllersConfig) -> T) -> T {
        let guard = self.config.read().unwrap_or_else(PoisonError::into_inner);
        f(&guard)
    }

    /// Applies `f` to the live config and wakes every controller.
    pub fn update(&self, f: impl FnOnce(&mut ControllersConfig)) {
        {
            let mut guard = self.config.write().unwrap_or_else(PoisonError::into_inner);
            f(&mut guard);
        }
        self.changes.send_modify(|n| *n = n.wrapping_add(1));
    }

    /// A stream that fires on every config update through the handle and every resync period.
    pub fn triggers(&self) -> impl Stream<Item = ()> + Send + 'static {
        let changes = futures::stream::unfold(self.changes.subscribe(), |mut rx| async move {
            rx.changed().await.ok().map(|()| ((), rx))
        });
        let config = Arc::clone(&self.config);
        let ticks = futures::stream::unfold(config, |config| async move {
            let period = config
                .read()
                .unwrap_or_else(PoisonError::into_inner)
                .resync
                .max(Duration::from_millis(100));
            tokio::time::sleep(period).await;
            Some(((), config))
        });
        futures::stream::select(changes, ticks)
    }
}

/// Remembers when a controller first saw each (object, generation), to apply delays.
#[derive(Debug, Default)]
pub struct FirstSeen {
    seen: Mutex<HashMap<String, (i64, Instant)>>,
}

impl FirstSeen {
    /// Time left until `delay` has passed since `key` was first seen at `generation`;
    /// `None` once it has passed. A new generation restarts the timer.
    pub fn remaining(&self, key: &str, generation: i64, delay: Duration) -> Option<Duration> {
        let mut seen = self.seen.lock().unwrap_or_else(PoisonError::into_inner);
        let now = Instant::now();
        let entry = seen.entry(key.to_owned()).or_insert((generation, now));
        if entry.0 != generation {
            *entry = (generation, now);
        }
        delay
            .checked_sub(now.duration_since(entry.1))
            .filter(|left| !left.is_zero())
    }

    /// Forgets `key` (its object is gone or done).
    pub fn forget(&self, key: &str) {
        self.seen
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(key);
    }
}

/// Waits until the CRD `name` (`<plural>.<group>`) exists.
pub async fn wait_for_crd(client: Client, name: &str) {
    let crds: Api<CustomResourceDefinition> = Api::all(client);
    loop {
        match crds.get_opt(name).await {
            Ok(Some(_)) => return,
            Ok(None) => {}
            Err(error) => tracing::debug!(%error, crd = name, "waiting for CRD"),
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// Drives a controller stream until it ends, counting reconcile passes and logging failures.
pub async fn drain<T, E: Display>(
    shared: &Shared,
    name: &'static str,
    stream: impl Stream<Item = Result<T, E>>,
) {
    stream
        .for_each(|result| async move {
            shared.count_pass(name);
            if let Err(error) = result {
                tracing::debug!(controller = name, %error, "simulated controller event failed");
            }
        })
        .await;
}

/// Merge-patches `status` onto the status subresource of `name`.
pub async fn patch_status<K>(api: &Api<K>, name: &str, status: Value) -> Result<(), ReconcileError>
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug,
{
    let body = serde_json::json!({ "status": status });
    api.patch_status(name, &PatchParams::default(), &Patch::Merge(&body))
        .await?;
    Ok(())
}
