//! What the Database step needs beyond the Kubernetes client: the device locks of the database
//! (one lock service per Lease namespace, sharing one lock coordinator), the db_sync metrics
//! pair, the event recorder, and the memory of which Job UIDs were already counted / reported
//! (so the metrics and the upgrade-check event happen once per Job UID).
//!
//! The step table only hands steps a [`StepEnv`] (client and watched namespace). Until the
//! context's `device_locks` and `metrics` travel in it, [`DatabaseServices::for_env`] builds the
//! lock service on the actor thread the step runs on, shared through a thread-local by every
//! step of that operator context (one actor thread per context): the Leases exclude other
//! operator processes and other contexts, and the in-process queue orders this context's own
//! requests. [`DatabaseServices::new`] takes the context's own services when they are wired.

use super::super::StepEnv;
use crate::metrics::{JobMetrics, JobResult, Metrics};
use cinder_actors::CoordinatorHandle;
use cinder_lease::{DeviceLockMetrics, DeviceLocks, DeviceLocksConfig, HolderIdentity, LeaseError};
use kube::runtime::events::{Recorder, Reporter};
use std::cell::RefCell;
use std::collections::{BTreeMap, HashSet};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

/// Where the device locks come from.
#[derive(Clone)]
enum LockSource {
    /// The operator context's lock service (Leases in its lease namespace).
    Given(DeviceLocks),
    /// Built on the step's actor thread, one per Lease namespace (the Cinder's namespace).
    PerThread { client: kube::Client },
}

/// One actor thread's coordinator, holder identity and lock services by Lease namespace.
struct ThreadLocks {
    coordinator: CoordinatorHandle,
    identity: HolderIdentity,
    by_namespace: BTreeMap<String, DeviceLocks>,
}

thread_local! {
    static THREAD_LOCKS: RefCell<Option<ThreadLocks>> = const { RefCell::new(None) };
}

/// The lock service of the current actor thread for Leases in `namespace` (built on first use;
/// must be called on an actix arbiter thread, which is where steps run).
pub fn thread_device_locks(
    client: &kube::Client,
    namespace: &str,
) -> Result<DeviceLocks, LeaseError> {
    THREAD_LOCKS.with(|cell| {
        let mut slot = cell.borrow_mut();
        let t = slot.get_or_insert_with(|| ThreadLocks {
            coordinator: CoordinatorHandle::start_standard(),
            identity: HolderIdentity::generate(),
            by_namespace: BTreeMap::new(),
        });
        if let Some(locks) = t.by_namespace.get(namespace) {
            return Ok(locks.clone());
        }
        let mut config = DeviceLocksConfig::new(namespace.to_string());
        config.identity = t.identity.clone();
        let locks = DeviceLocks::new(
            t.coordinator.clone(),
            client.clone(),
            config,
            DeviceLockMetrics::default(),
        )?;
        t.by_namespace.insert(namespace.to_string(), locks.clone());
        Ok(locks)
    })
}

/// The lock service the steps use for devices of a Cinder in `namespace`: the operator context's
/// when `env` carries it, else the actor thread's (see [`thread_device_locks`]).
pub fn env_device_locks(env: &StepEnv, namespace: &str) -> Result<DeviceLocks, LeaseError> {
    match &env.services {
        Some(s) => Ok(s.device_locks.clone()),
        None => thread_device_locks(&env.client, namespace),
    }
}

/// The services of the Database step (cheap to clone; clones share everything).
#[derive(Clone)]
pub struct DatabaseServices {
    locks: LockSource,
    db_sync: JobMetrics,
    recorder: Recorder,
    counted: Arc<Mutex<HashSet<String>>>,
    reported: Arc<Mutex<HashSet<String>>>,
}

fn reporter(instance: String) -> Reporter {
    Reporter {
        controller: "cinder-operator".to_string(),
        instance: Some(instance),
    }
}

impl DatabaseServices {
    /// With the operator context's device locks and metrics.
    pub fn new(client: kube::Client, device_locks: DeviceLocks, metrics: &Metrics) -> Self {
        let identity = device_locks.identity().as_str().to_string();
        DatabaseServices {
            locks: LockSource::Given(device_locks),
            db_sync: metrics.db_sync.clone(),
            recorder: Recorder::new(client, reporter(identity)),
            counted: Arc::default(),
            reported: Arc::default(),
        }
    }

    /// From a [`StepEnv`] alone: per-thread device locks (Leases in the Cinder's namespace) and
    /// a db_sync pair of the step's own (not registered in the served registry).
    pub fn for_env(env: &StepEnv) -> Self {
        let (_registry, metrics) = Metrics::new_registry();
        DatabaseServices {
            locks: LockSource::PerThread {
                client: env.client.clone(),
            },
            db_sync: metrics.db_sync,
            recorder: Recorder::new(env.client.clone(), reporter("cinder-operator".to_string())),
            counted: Arc::default(),
            reported: Arc::default(),
        }
    }

    /// The lock service for a database device of a Cinder in `namespace`.
    pub fn device_locks(&self, namespace: &str) -> Result<DeviceLocks, LeaseError> {
        match &self.locks {
            LockSource::Given(locks) => Ok(locks.clone()),
            LockSource::PerThread { client } => thread_device_locks(client, namespace),
        }
    }

    /// The event recorder.
    pub fn recorder(&self) -> &Recorder {
        &self.recorder
    }

    /// The db_sync pair.
    pub fn db_sync_metrics(&self) -> &JobMetrics {
        &self.db_sync
    }

    /// Feeds the db_sync pair for Job `uid`, once per UID; returns whether it counted.
    pub fn observe_job_once(
        &self,
        uid: &str,
        namespace: &str,
        cinder: &str,
        result: JobResult,
        duration: Duration,
    ) -> bool {
        let first = self
            .counted
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(uid.to_string());
        if first {
            self.db_sync.observe(namespace, cinder, result, duration);
        }
        first
    }

    /// True the first time it is asked for `uid` (the upgrade-check event is emitted once per
    /// migrate Job UID).
    pub fn first_report(&self, uid: &str) -> bool {
        self.reported
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(uid.to_string())
    }

    /// Forgets a report (the event could not be published; try again on a later pass).
    pub fn unreport(&self, uid: &str) {
        self.reported
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(uid);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::JobResultLabels;

    fn services() -> (DatabaseServices, Metrics) {
        let (_r, metrics) = Metrics::new_registry();
        // A client that is never used: metrics and memory only.
        let config = kube::Config::new("http://127.0.0.1:9".parse().unwrap());
        let client = kube::Client::try_from(config).unwrap();
        let services = DatabaseServices {
            locks: LockSource::PerThread {
                client: client.clone(),
            },
            db_sync: metrics.db_sync.clone(),
            recorder: Recorder::new(client, reporter("t".into())),
            counted: Arc::default(),
            reported: Arc::default(),
        };
        (services, metrics)
    }

    #[tokio::test]
    async fn each_job_uid_is_counted_once() {
        let (s, metrics) = services();
        assert!(s.observe_job_once(
            "u1",
            "ns",
            "c",
            JobResult::Succeeded,
            Duration::from_secs(3)
        ));
        assert!(!s.observe_job_once(
            "u1",
            "ns",
            "c",
            JobResult::Succeeded,
            Duration::from_secs(3)
        ));
        assert!(s.observe_job_once("u2", "ns", "c", JobResult::Failed, Duration::from_secs(1)));
        let get = |result| {
            metrics
                .db_sync
                .total
                .get_or_create(&JobResultLabels {
                    cinder: "c".into(),
                    namespace: "ns".into(),
                    result,
                })
                .get()
        };
        assert_eq!(get(JobResult::Succeeded), 1);
        assert_eq!(get(JobResult::Failed), 1);
        assert!(s.first_report("m1"));
        assert!(!s.first_report("m1"));
        s.unreport("m1");
        assert!(s.first_report("m1"));
    }
}
