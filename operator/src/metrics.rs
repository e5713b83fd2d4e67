//! The operator's Prometheus metrics (prometheus-client): the two pipeline families, the three
//! per-CR Job pairs, each Cinder's Ready and upgrade phase (for the alerts), the build's version
//! and commit (`cinder_operator_build_info`), and the actor / lock gauges the runtime feeds; plus
//! the OpenMetrics text encoder the `/metrics` endpoint serves.
//!
//! Counters are registered without `_total`; the OpenMetrics encoder appends it, so the exposed
//! names are `cinder_operator_reconcile_errors_total`, ….
//!
//! Every labelled family a dashboard panel or an alert reads has its series at zero before the
//! first event: the per-step families and the controller errors from start-up (every step of the
//! table, every phase), the per-Cinder
//! families from the Cinder's first status ([`Metrics::observe_cinder`]), and the device-lock
//! families through [`zero_device_lock_series`]. A `rate()` over them then shows 0, not "no data".

use crate::crd::{CinderStatus, UpgradePhase};
use crate::pipeline::{GROUP, LANE};
use prometheus_client::encoding::{EncodeLabelSet, EncodeLabelValue, LabelValueEncoder};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;
use std::time::Duration;

/// The crate's version, as `cinder_operator_build_info` and `--version` show it.
pub(crate) const VERSION: &str = env!("CARGO_PKG_VERSION");
/// The commit the binary was built from (the build script's `git rev-parse`, or "unknown").
pub(crate) const COMMIT: &str = env!("CINDER_OPERATOR_COMMIT");
/// `--version`'s text: `0.1.0 (commit 1a2b3c4d5e6f)`.
pub(crate) const VERSION_WITH_COMMIT: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (commit ",
    env!("CINDER_OPERATOR_COMMIT"),
    ")"
);

/// Buckets of the Job duration histograms (seconds).
pub(crate) const JOB_DURATION_BUCKETS: [f64; 8] = [1.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0];
/// Buckets of the per-step reconcile duration (seconds).
pub(crate) const RECONCILE_DURATION_BUCKETS: [f64; 11] = [
    0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0,
];
/// Buckets of lock / mailbox waits (seconds).
pub(crate) const LOCK_WAIT_BUCKETS: [f64; 10] =
    [0.0001, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 30.0];

/// `{sub_reconciler}`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct StepLabels {
    pub sub_reconciler: String,
}

/// `{sub_reconciler, condition_type}`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct StepErrorLabels {
    pub sub_reconciler: String,
    pub condition_type: String,
}

/// `{version, commit}` of `cinder_operator_build_info`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct BuildLabels {
    pub version: String,
    pub commit: String,
}

/// The terminal result of a Job run.
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq)]
pub enum JobResult {
    Succeeded,
    Failed,
}

impl JobResult {
    pub(crate) const ALL: [JobResult; 2] = [JobResult::Succeeded, JobResult::Failed];

    pub(crate) fn as_str(self) -> &'static str {
        match self {
            JobResult::Succeeded => "succeeded",
            JobResult::Failed => "failed",
        }
    }
}

/// Encodes each of these label enums as its `as_str()`.
macro_rules! label_value_as_str {
    ($($enum:ty),*) => {
        $(
            impl EncodeLabelValue for $enum {
                fn encode(
                    &self,
                    encoder: &mut LabelValueEncoder<'_>,
                ) -> Result<(), std::fmt::Error> {
                    use std::fmt::Write as _;
                    encoder.write_str(self.as_str())
                }
            }
        )*
    };
}

label_value_as_str!(JobResult, ErrorPhase);

/// `{cinder, namespace, result}`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct JobResultLabels {
    pub cinder: String,
    pub namespace: String,
    pub result: JobResult,
}

/// `{cinder, namespace}`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct CinderLabels {
    pub cinder: String,
    pub namespace: String,
}

/// `{cinder, namespace, phase}`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PhaseLabels {
    pub cinder: String,
    pub namespace: String,
    pub phase: String,
}

/// Where a reconcile failed outside the pipeline's steps (the `phase` label of
/// `cinder_operator_controller_errors_total`).
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq)]
pub enum ErrorPhase {
    /// Writing the Cinder's status.
    StatusWrite,
    /// Adding the Cinder finalizer.
    FinalizerAdd,
    /// Resolving `spec.targetClusterRef` (the registry could not be read).
    TargetResolution,
    /// The pipelines registry or the Cinder's pipeline actor did not answer.
    PipelineUnavailable,
    /// The deletion's cleanup under the finalizer.
    Finalize,
}

impl ErrorPhase {
    pub const ALL: [ErrorPhase; 5] = [
        ErrorPhase::StatusWrite,
        ErrorPhase::FinalizerAdd,
        ErrorPhase::TargetResolution,
        ErrorPhase::PipelineUnavailable,
        ErrorPhase::Finalize,
    ];

    /// The label value: `status_write`, `finalizer_add`, `target_resolution`,
    /// `pipeline_unavailable` or `finalize`.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            ErrorPhase::StatusWrite => "status_write",
            ErrorPhase::FinalizerAdd => "finalizer_add",
            ErrorPhase::TargetResolution => "target_resolution",
            ErrorPhase::PipelineUnavailable => "pipeline_unavailable",
            ErrorPhase::Finalize => "finalize",
        }
    }
}

impl std::fmt::Display for ErrorPhase {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// `{phase}`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ErrorPhaseLabels {
    pub phase: ErrorPhase,
}

/// `{kind}`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct KindLabels {
    pub kind: String,
}

/// `{kind, mode}` (mode: `read` | `write`).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct LockLabels {
    pub kind: String,
    pub mode: String,
}

type HistogramFamily<L> = Family<L, Histogram, fn() -> Histogram>;

fn job_histogram() -> Histogram {
    Histogram::new(JOB_DURATION_BUCKETS)
}
fn reconcile_histogram() -> Histogram {
    Histogram::new(RECONCILE_DURATION_BUCKETS)
}
fn lock_wait_histogram() -> Histogram {
    Histogram::new(LOCK_WAIT_BUCKETS)
}

/// The Job kinds that have a `_total` / `_duration_seconds` pair.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum JobKind {
    DbSync,
    DbPurge,
    ServiceRemove,
}

/// One `cinder_operator_{job}_total` / `_duration_seconds` pair.
#[derive(Clone)]
pub struct JobMetrics {
    pub total: Family<JobResultLabels, Counter>,
    pub duration_seconds: HistogramFamily<CinderLabels>,
}

impl JobMetrics {
    fn register(registry: &mut Registry, job: &str, what: &str) -> Self {
        let total = Family::<JobResultLabels, Counter>::default();
        let duration_seconds: HistogramFamily<CinderLabels> =
            Family::new_with_constructor(job_histogram);
        registry.register(
            format!("cinder_operator_{job}"),
            format!("Terminal {what} Jobs by result"),
            total.clone(),
        );
        registry.register(
            format!("cinder_operator_{job}_duration_seconds"),
            format!("Duration of {what} Jobs from start to completion"),
            duration_seconds.clone(),
        );
        JobMetrics {
            total,
            duration_seconds,
        }
    }

    /// Records one terminal run.
    pub fn observe(&self, namespace: &str, cinder: &str, result: JobResult, duration: Duration) {
        let (cinder, namespace) = (cinder.to_string(), namespace.to_string());
        self.total
            .get_or_create(&JobResultLabels {
                cinder: cinder.clone(),
                namespace: namespace.clone(),
                result,
            })
            .inc();
        self.duration_seconds
            .get_or_create(&CinderLabels { cinder, namespace })
            .observe(duration.as_secs_f64());
    }

    /// The labels of the Cinder's series: the counter's, one per result, and the histogram's.
    fn series(namespace: &str, cinder: &str) -> ([JobResultLabels; 2], CinderLabels) {
        let of = CinderLabels {
            cinder: cinder.to_string(),
            namespace: namespace.to_string(),
        };
        let totals = JobResult::ALL.map(|result| JobResultLabels {
            cinder: of.cinder.clone(),
            namespace: of.namespace.clone(),
            result,
        });
        (totals, of)
    }

    /// Creates the Cinder's series at zero (both results, an empty histogram).
    fn zero(&self, namespace: &str, cinder: &str) {
        let (totals, duration) = Self::series(namespace, cinder);
        for labels in &totals {
            let _ = self.total.get_or_create(labels);
        }
        let _ = self.duration_seconds.get_or_create(&duration);
    }

    fn forget(&self, namespace: &str, cinder: &str) {
        let (totals, duration) = Self::series(namespace, cinder);
        for labels in &totals {
            self.total.remove(labels);
        }
        self.duration_seconds.remove(&duration);
    }
}

/// All metric families of the operator. Cloning shares the series (handles are reference-counted).
#[derive(Clone)]
pub struct Metrics {
    /// `cinder_operator_reconcile_duration_seconds{sub_reconciler}`.
    pub reconcile_duration_seconds: HistogramFamily<StepLabels>,
    /// `cinder_operator_reconcile_errors_total{sub_reconciler,condition_type}`.
    pub reconcile_errors: Family<StepErrorLabels, Counter>,
    /// `cinder_operator_controller_errors_total{phase}`: reconciles that failed outside the
    /// steps (status write, finalizer add, target resolution, pipeline unavailable, finalize).
    pub controller_errors: Family<ErrorPhaseLabels, Counter>,
    /// `cinder_operator_db_sync_total` / `_duration_seconds`.
    pub db_sync: JobMetrics,
    /// `cinder_operator_db_purge_total` / `_duration_seconds`.
    pub db_purge: JobMetrics,
    /// `cinder_operator_service_remove_total` / `_duration_seconds`.
    pub service_remove: JobMetrics,
    /// `cinder_operator_cinder_ready{cinder,namespace}`: 1 while the Cinder's Ready is True.
    pub cinder_ready: Family<CinderLabels, Gauge>,
    /// `cinder_operator_upgrade_phase{cinder,namespace,phase}`: 1 for the phase an upgrade is
    /// in, 0 for the others.
    pub upgrade_phase: Family<PhaseLabels, Gauge>,
    /// `cinder_operator_mailbox_depth{kind}`: messages queued in actor mailboxes, by actor kind.
    pub mailbox_depth: Family<KindLabels, Gauge>,
    /// `cinder_operator_lock_wait_seconds{kind,mode}`: time from asking for a lock to its grant.
    pub lock_wait_seconds: HistogramFamily<LockLabels>,
    /// `cinder_operator_transactions_in_flight`: lock-coordinator transactions holding locks.
    pub transactions_in_flight: Gauge,
    /// `cinder_operator_reconciles_running`: reconcile slots taken or granted.
    pub reconciles_running: Gauge,
    /// `cinder_operator_reconciles_queued`: Cinders waiting for a reconcile slot.
    pub reconciles_queued: Gauge,
    /// `cinder_operator_build_info{version,commit}`: 1, for the build this process runs.
    pub build_info: Family<BuildLabels, Gauge>,
}

/// Registers `metric` as `name` with `help` and returns it (a family or gauge is a handle:
/// the registered clone and the returned one share their series).
fn registered<M>(registry: &mut Registry, name: &str, help: &str, metric: M) -> M
where
    M: prometheus_client::registry::Metric + Clone,
{
    registry.register(name, help, metric.clone());
    metric
}

impl Metrics {
    /// Creates every family and registers it in `registry`.
    pub(crate) fn register(registry: &mut Registry) -> Self {
        let reconcile_duration_seconds: HistogramFamily<StepLabels> = registered(
            registry,
            "cinder_operator_reconcile_duration_seconds",
            "Duration of one pipeline step (sub-reconciler) run",
            Family::new_with_constructor(reconcile_histogram),
        );
        let reconcile_errors = registered(
            registry,
            "cinder_operator_reconcile_errors",
            "Pipeline step runs that returned an error, by step and the condition it reports",
            Family::<StepErrorLabels, Counter>::default(),
        );
        let controller_errors = registered(
            registry,
            "cinder_operator_controller_errors",
            "Reconciles that failed outside the pipeline's steps, by where they failed",
            Family::<ErrorPhaseLabels, Counter>::default(),
        );
        let db_sync = JobMetrics::register(
            registry,
            "db_sync",
            "schema migration (db sync, expand, migrate, contract)",
        );
        let db_purge = JobMetrics::register(registry, "db_purge", "database purge");
        let service_remove =
            JobMetrics::register(registry, "service_remove", "backend detach service-remove");
        let cinder_ready = registered(
            registry,
            "cinder_operator_cinder_ready",
            "1 while the Cinder's Ready condition is True, else 0",
            Family::<CinderLabels, Gauge>::default(),
        );
        let upgrade_phase = registered(
            registry,
            "cinder_operator_upgrade_phase",
            "1 for the database upgrade phase the Cinder is in, 0 for the other phases",
            Family::<PhaseLabels, Gauge>::default(),
        );
        let mailbox_depth = registered(
            registry,
            "cinder_operator_mailbox_depth",
            "Messages queued in actor mailboxes by actor kind",
            Family::<KindLabels, Gauge>::default(),
        );
        let lock_wait_seconds: HistogramFamily<LockLabels> = registered(
            registry,
            "cinder_operator_lock_wait_seconds",
            "Time from requesting a lock to its grant, by resource kind and mode",
            Family::new_with_constructor(lock_wait_histogram),
        );
        let transactions_in_flight = registered(
            registry,
            "cinder_operator_transactions_in_flight",
            "Lock-coordinator transactions currently holding or acquiring locks",
            Gauge::default(),
        );
        let reconciles_running = registered(
            registry,
            "cinder_operator_reconciles_running",
            "Cinder reconciles holding a slot of --max-concurrent-reconciles (taken or granted)",
            Gauge::default(),
        );
        let reconciles_queued = registered(
            registry,
            "cinder_operator_reconciles_queued",
            "Cinders waiting for a slot of --max-concurrent-reconciles",
            Gauge::default(),
        );
        let build_info = registered(
            registry,
            "cinder_operator_build_info",
            "1 for the version and commit this operator process was built from",
            Family::<BuildLabels, Gauge>::default(),
        );
        build_info
            .get_or_create(&BuildLabels {
                version: VERSION.to_string(),
                commit: COMMIT.to_string(),
            })
            .set(1);
        let metrics = Metrics {
            reconcile_duration_seconds,
            reconcile_errors,
            controller_errors,
            db_sync,
            db_purge,
            service_remove,
            cinder_ready,
            upgrade_phase,
            mailbox_depth,
            lock_wait_seconds,
            transactions_in_flight,
            reconciles_running,
            reconciles_queued,
            build_info,
        };
        metrics.zero_step_series();
        metrics
    }

    /// Every step's duration and error series at zero (one error series per step and the
    /// condition it reports through), and the controller error series of every phase.
    fn zero_step_series(&self) {
        for phase in ErrorPhase::ALL {
            let _ = self
                .controller_errors
                .get_or_create(&ErrorPhaseLabels { phase });
        }
        for step in LANE.iter().chain(GROUP.iter()) {
            let _ = self.reconcile_duration_seconds.get_or_create(&StepLabels {
                sub_reconciler: step.as_str().to_string(),
            });
            let _ = self.reconcile_errors.get_or_create(&StepErrorLabels {
                sub_reconciler: step.as_str().to_string(),
                condition_type: step.condition_type().to_string(),
            });
        }
    }

    /// Records a Cinder's status after a pass: its Ready and upgrade phase gauges, and its Job
    /// series at zero the first time.
    pub fn observe_cinder(&self, namespace: &str, cinder: &str, status: &CinderStatus) {
        let ready = status
            .conditions
            .iter()
            .any(|c| c.type_ == crate::conditions::kind::READY && c.status == "True");
        self.cinder_ready
            .get_or_create(&CinderLabels {
                cinder: cinder.to_string(),
                namespace: namespace.to_string(),
            })
            .set(i64::from(ready));
        for phase in UpgradePhase::ALL {
            self.upgrade_phase
                .get_or_create(&PhaseLabels {
                    cinder: cinder.to_string(),
                    namespace: namespace.to_string(),
                    phase: phase.as_str().to_string(),
                })
                .set(i64::from(status.upgrade_phase == Some(phase)));
        }
        for jm in [&self.db_sync, &self.db_purge, &self.service_remove] {
            jm.zero(namespace, cinder);
        }
    }

    /// A fresh registry holding only these metrics.
    pub fn new_registry() -> (Registry, Metrics) {
        let mut registry = Registry::default();
        let metrics = Metrics::register(&mut registry);
        (registry, metrics)
    }

    /// Times one step run.
    pub fn observe_step(&self, sub_reconciler: &str, elapsed: Duration) {
        self.reconcile_duration_seconds
            .get_or_create(&StepLabels {
                sub_reconciler: sub_reconciler.to_string(),
            })
            .observe(elapsed.as_secs_f64());
    }

    /// Counts one step error.
    pub fn count_step_error(&self, sub_reconciler: &str, condition_type: &str) {
        self.reconcile_errors
            .get_or_create(&StepErrorLabels {
                sub_reconciler: sub_reconciler.to_string(),
                condition_type: condition_type.to_string(),
            })
            .inc();
    }

    /// Counts one reconcile that failed at `phase`.
    pub(crate) fn count_controller_error(&self, phase: ErrorPhase) {
        self.controller_errors
            .get_or_create(&ErrorPhaseLabels { phase })
            .inc();
    }

    /// The pair of a Job kind.
    pub fn job(&self, kind: JobKind) -> &JobMetrics {
        match kind {
            JobKind::DbSync => &self.db_sync,
            JobKind::DbPurge => &self.db_purge,
            JobKind::ServiceRemove => &self.service_remove,
        }
    }

    /// Drops every per-CR series of one Cinder (on deletion).
    pub fn forget_cinder(&self, namespace: &str, cinder: &str) {
        for jm in [&self.db_sync, &self.db_purge, &self.service_remove] {
            jm.forget(namespace, cinder);
        }
        let labels = CinderLabels {
            cinder: cinder.to_string(),
            namespace: namespace.to_string(),
        };
        self.cinder_ready.remove(&labels);
        for phase in UpgradePhase::ALL {
            self.upgrade_phase.remove(&PhaseLabels {
                cinder: cinder.to_string(),
                namespace: namespace.to_string(),
                phase: phase.as_str().to_string(),
            });
        }
    }
}

/// The device-lock families, each grant's wait also observed into the
/// `{kind="device",mode="write"}` series of `cinder_operator_lock_wait_seconds` (a device lock
/// is exclusive: a write).
pub fn device_lock_metrics(metrics: &Metrics) -> cinder_lease::DeviceLockMetrics {
    let series = metrics
        .lock_wait_seconds
        .get_or_create(&LockLabels {
            kind: "device".to_string(),
            mode: "write".to_string(),
        })
        .clone();
    cinder_lease::DeviceLockMetrics::default().with_lock_wait(series)
}

/// The device-lock families' labelled series at zero: the wait histogram for every priority and
/// the Lease API call counter for every verb.
pub fn zero_device_lock_series(device: &cinder_lease::DeviceLockMetrics) {
    use cinder_lease::metrics::{LeaseVerb, PriorityLabel, PriorityLabels, VerbLabels};
    for priority in [
        PriorityLabel::High,
        PriorityLabel::Default,
        PriorityLabel::Baseline,
    ] {
        let _ = device
            .wait_seconds
            .get_or_create(&PriorityLabels { priority });
    }
    for verb in [LeaseVerb::Get, LeaseVerb::Create, LeaseVerb::Replace] {
        let _ = device.lease_api_calls.get_or_create(&VerbLabels { verb });
    }
}

/// Registers `cinder_operator_leader` (with `--leader-elect`): 1 while this replica holds the
/// leader Lease and reconciles, 0 while it stands by.
pub fn register_leader_gauge(registry: &mut Registry) -> Gauge {
    registered(
        registry,
        "cinder_operator_leader",
        "1 while this replica holds the leader Lease (and reconciles), 0 while it stands by",
        Gauge::default(),
    )
}

/// The registry as OpenMetrics text (ends with `# EOF`).
pub fn encode_openmetrics(registry: &Registry) -> Result<String, std::fmt::Error> {
    let mut out = String::new();
    prometheus_client::encoding::text::encode(&mut out, registry)?;
    Ok(out)
}

/// The `Content-Type` of [`encode_openmetrics`]'s output.
pub const OPENMETRICS_CONTENT_TYPE: &str =
    "application/openmetrics-text; version=1.0.0; charset=utf-8";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn build_info_names_this_build_once() {
        let (registry, _metrics) = Metrics::new_registry();
        let text = encode_openmetrics(&registry).unwrap();
        let lines: Vec<&str> = text
            .lines()
            .filter(|l| l.starts_with("cinder_operator_build_info{"))
            .collect();
        assert_eq!(lines.len(), 1, "{text}");
        assert!(
            lines[0].contains(&format!("version=\"{VERSION}\"")),
            "{}",
            lines[0]
        );
        assert!(
            lines[0].contains(&format!("commit=\"{COMMIT}\"")),
            "{}",
            lines[0]
        );
        assert!(lines[0].ends_with(" 1"), "{}", lines[0]);
        assert!(!COMMIT.is_empty());
        assert!(VERSION_WITH_COMMIT.starts_with(VERSION));
    }

    #[test]
    fn every_controller_error_phase_is_at_zero_from_start_up_and_counts() {
        let (registry, metrics) = Metrics::new_registry();
        let text = encode_openmetrics(&registry).unwrap();
        for phase in ErrorPhase::ALL {
            let line = format!("cinder_operator_controller_errors_total{{phase=\"{phase}\"}} 0");
            assert!(text.contains(&line), "{line} missing");
        }
        metrics.count_controller_error(ErrorPhase::StatusWrite);
        let text = encode_openmetrics(&registry).unwrap();
        assert!(text.contains("cinder_operator_controller_errors_total{phase=\"status_write\"} 1"));
        assert!(text.contains("cinder_operator_controller_errors_total{phase=\"finalize\"} 0"));
    }
}
