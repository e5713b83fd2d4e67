//! What one run of the Database step works with beyond the Kubernetes client: the operator's
//! device locks (the database is one device), the db_sync metrics pair, the event recorder, and
//! the step actor's memory of which Job UIDs were already counted / reported (so the metrics and the
//! upgrade-check event happen once per Job UID).

use crate::metrics::{JobMetrics, JobResult};
use crate::pipeline::StepMemory;
use crate::workloads::job_marker::{CountedJob, count_once};
use cinder_lease::DeviceLocks;
use kube::runtime::events::Recorder;
use std::time::Duration;

/// The services of the Database step (cheap to clone; clones share everything).
#[derive(Clone)]
pub struct DatabaseServices {
    locks: DeviceLocks,
    db_sync: JobMetrics,
    recorder: Recorder,
    memory: StepMemory,
}

impl DatabaseServices {
    /// The operator context's device locks, db_sync pair and recorder, and the memory of the
    /// running step.
    pub fn new(op: &crate::context::OperatorContext, memory: StepMemory) -> Self {
        DatabaseServices {
            locks: op.device_locks.clone(),
            db_sync: op.metrics.db_sync.clone(),
            recorder: op.recorder.clone(),
            memory,
        }
    }

    /// The lock service for the database device.
    pub(crate) fn device_locks(&self) -> &DeviceLocks {
        &self.locks
    }

    /// The run's step memory (refused device locks, counted Jobs).
    pub(crate) fn memory(&self) -> &StepMemory {
        &self.memory
    }

    /// The event recorder.
    pub(crate) fn recorder(&self) -> &Recorder {
        &self.recorder
    }

    /// Feeds the db_sync pair for `job`, once per UID (across processes through the Job's
    /// counted marker); returns whether it counted.
    pub(crate) async fn observe_job_once(
        &self,
        job: &CountedJob<'_>,
        namespace: &str,
        cinder: &str,
        result: JobResult,
        duration: Duration,
    ) -> bool {
        let key = format!("counted/{}", job.uid);
        let first = self.memory.first_time(&key).await;
        count_once(
            first,
            || job.claim(namespace, result),
            || self.memory.unsee(&key),
            || self.db_sync.observe(namespace, cinder, result, duration),
        )
        .await
    }

    /// True the first time it is asked for `uid` (the upgrade-check event is emitted once per
    /// migrate Job UID).
    pub(crate) async fn first_report(&self, uid: &str) -> bool {
        self.memory.first_time(&format!("reported/{uid}")).await
    }

    /// Gives a report back (the event could not be published; try again after a pause).
    pub(crate) fn unreport(&self, uid: &str) {
        self.memory.unsee(&format!("reported/{uid}"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::context::OperatorContext;
    use crate::pipeline::StepName;
    use crate::pipeline::step::testing::idle_step_memory;

    /// Services whose client and locks are never used: metrics and memory only (call it inside
    /// an actix System, where the lock coordinator starts).
    fn services() -> (DatabaseServices, crate::metrics::Metrics) {
        let (_r, metrics) = crate::metrics::Metrics::new_registry();
        let config = kube::Config::new("http://127.0.0.1:9".parse().unwrap());
        let client = kube::Client::try_from(config).unwrap();
        let locks = DeviceLocks::new(
            cinder_actors::CoordinatorHandle::start_standard(),
            client.clone(),
            cinder_lease::DeviceLocksConfig::new("ns"),
            cinder_lease::DeviceLockMetrics::default(),
        )
        .unwrap();
        let services = DatabaseServices {
            locks,
            db_sync: metrics.db_sync.clone(),
            recorder: crate::events::recorder(client, Some("t".into())),
            memory: idle_step_memory::<OperatorContext>(StepName::Database),
        };
        (services, metrics)
    }

    #[actix::test]
    async fn each_report_is_made_once_and_retried_after_a_pause() {
        let (s, _metrics) = services();
        assert!(s.first_report("m1").await);
        assert!(!s.first_report("m1").await);
        s.unreport("m1");
        // Given back, it is new again after about a second (`Memory`'s own tests), not at once.
        assert!(!s.first_report("m1").await);
        assert!(s.first_report("m2").await);
    }
}
