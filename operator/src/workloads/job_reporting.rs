//! [`JobReporting`]: what the Job-reporting workload steps share to report each terminal Job
//! once (its metrics pair and its events), across restarts through the Job's counted marker
//! ([`super::job_marker`]).

/// What the Job-reporting workload steps (DBPurge, the detach in VolumeServices) report through
/// in one run: the operator's event recorder, their metrics pair and the step actor's memory of
/// which Job UIDs were already counted (metrics and events happen once per Job UID; the Job's
/// counted marker carries that across restarts).
#[derive(Clone)]
pub(crate) struct JobReporting {
    pub recorder: kube::runtime::events::Recorder,
    pub metrics: crate::metrics::JobMetrics,
    memory: crate::pipeline::StepMemory,
}

impl JobReporting {
    /// The `kind` pair of the operator's metrics, its recorder, and the memory of `ctx`'s step.
    pub(crate) fn new(
        op: &crate::context::OperatorContext,
        ctx: &crate::pipeline::StepContext,
        kind: crate::metrics::JobKind,
    ) -> Self {
        JobReporting {
            recorder: op.recorder.clone(),
            metrics: op.metrics.job(kind).clone(),
            memory: ctx.memory(),
        }
    }

    /// The run's step memory.
    pub(crate) fn memory(&self) -> &crate::pipeline::StepMemory {
        &self.memory
    }

    /// True the first time it is asked for `key` (a Job UID, or a backend/UID tuple).
    pub(crate) async fn first_time(&self, key: &str) -> bool {
        self.memory.first_time(key).await
    }

    /// Feeds the pair once for `job` (remembered under `key` in this process, and by the
    /// Job's counted marker across processes); returns whether it counted.
    pub(crate) async fn observe_once(
        &self,
        job: &super::job_marker::CountedJob<'_>,
        key: &str,
        namespace: &str,
        cinder: &str,
        result: crate::metrics::JobResult,
        duration: std::time::Duration,
    ) -> bool {
        let first = self.first_time(key).await;
        super::job_marker::count_once(
            first,
            || job.claim(namespace, result),
            || self.memory.unsee(key),
            || self.metrics.observe(namespace, cinder, result, duration),
        )
        .await
    }
}
