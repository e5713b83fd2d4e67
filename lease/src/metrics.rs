//! Device-lock metrics (prometheus-client): wait time per priority, holds, takeovers of expired
//! Leases, holders that lost their Lease, and Lease API calls per verb.

use prometheus_client::encoding::{EncodeLabelSet, EncodeLabelValue, LabelValueEncoder};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;
use std::fmt::Write;

/// The priority label of `cinder_operator_device_lock_wait_seconds`.
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq)]
pub enum PriorityLabel {
    /// High: backends, schema migrations.
    High,
    /// Default: everything else.
    Default,
    /// Baseline: periodic requeues of already reconciled resources.
    Baseline,
}

impl PriorityLabel {
    /// The label value: `high`, `default` or `baseline`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::High => "high",
            Self::Default => "default",
            Self::Baseline => "baseline",
        }
    }
}

impl EncodeLabelValue for PriorityLabel {
    fn encode(&self, encoder: &mut LabelValueEncoder) -> Result<(), std::fmt::Error> {
        encoder.write_str(self.as_str())
    }
}

/// Labels of the wait histogram.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PriorityLabels {
    /// The waiter's priority.
    pub priority: PriorityLabel,
}

/// The Lease API verbs the lock uses.
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq)]
pub enum LeaseVerb {
    /// GET of one Lease.
    Get,
    /// POST (create) of a Lease.
    Create,
    /// PUT (replace) of a Lease with its resourceVersion.
    Replace,
}

impl LeaseVerb {
    /// The label value: `get`, `create` or `replace`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Get => "get",
            Self::Create => "create",
            Self::Replace => "replace",
        }
    }
}

impl EncodeLabelValue for LeaseVerb {
    fn encode(&self, encoder: &mut LabelValueEncoder) -> Result<(), std::fmt::Error> {
        encoder.write_str(self.as_str())
    }
}

/// Labels of the Lease API call counter.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct VerbLabels {
    /// The API verb.
    pub verb: LeaseVerb,
}

fn wait_histogram() -> Histogram {
    // 1 ms .. ~65 s.
    Histogram::new(exponential_buckets(0.001, 2.0, 17))
}

/// All device-lock metrics. Cloning is cheap and clones share the same series.
#[derive(Clone, Debug)]
pub struct DeviceLockMetrics {
    /// `cinder_operator_device_lock_wait_seconds{priority}`: from the lock request to the grant.
    pub wait_seconds: Family<PriorityLabels, Histogram, fn() -> Histogram>,
    /// `cinder_operator_device_lock_holds_total`: device locks granted (in-process lock and Lease).
    pub holds: Counter,
    /// `cinder_operator_device_lock_takeovers_total`: expired Leases of another holder taken over.
    pub takeovers: Counter,
    /// `cinder_operator_device_lock_lost_total`: holders that stopped being holders because their
    /// renewal kept failing for a whole Lease duration (or another holder took the Lease).
    pub lost: Counter,
    /// `cinder_operator_lease_api_calls_total{verb}`.
    pub lease_api_calls: Family<VerbLabels, Counter>,
    /// A series every grant's wait is also observed into: the operator passes the
    /// `{kind="device",mode="write"}` series of `cinder_operator_lock_wait_seconds` (the wait for
    /// any lock, by resource kind) through [`DeviceLockMetrics::with_lock_wait`].
    pub lock_wait: Option<Histogram>,
}

impl Default for DeviceLockMetrics {
    fn default() -> Self {
        Self {
            wait_seconds: Family::new_with_constructor(wait_histogram),
            holds: Counter::default(),
            takeovers: Counter::default(),
            lost: Counter::default(),
            lease_api_calls: Family::default(),
            lock_wait: None,
        }
    }
}

impl DeviceLockMetrics {
    /// Registers every series under its full name (no registry prefix is assumed).
    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            "cinder_operator_device_lock_wait_seconds",
            "Time from a device lock request to its grant, by waiter priority",
            self.wait_seconds.clone(),
        );
        registry.register(
            "cinder_operator_device_lock_holds",
            "Device locks granted",
            self.holds.clone(),
        );
        registry.register(
            "cinder_operator_device_lock_takeovers",
            "Expired device Leases of another holder taken over",
            self.takeovers.clone(),
        );
        registry.register(
            "cinder_operator_device_lock_lost",
            "Device lock holders that lost their Lease (renewal failing for a whole duration)",
            self.lost.clone(),
        );
        registry.register(
            "cinder_operator_lease_api_calls",
            "Kubernetes Lease API calls made by device locks, by verb",
            self.lease_api_calls.clone(),
        );
    }

    /// Also observes every grant's wait into `series`.
    pub fn with_lock_wait(mut self, series: Histogram) -> Self {
        self.lock_wait = Some(series);
        self
    }

    /// Observes one grant's wait (request to grant) at `priority`.
    pub fn observe_wait(&self, priority: PriorityLabel, seconds: f64) {
        self.wait_seconds
            .get_or_create(&PriorityLabels { priority })
            .observe(seconds);
        if let Some(series) = &self.lock_wait {
            series.observe(seconds);
        }
    }

    /// Counts one Lease API call.
    pub fn count_call(&self, verb: LeaseVerb) {
        self.lease_api_calls
            .get_or_create(&VerbLabels { verb })
            .inc();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prometheus_client::encoding::text::encode;

    #[test]
    fn exposes_the_documented_names() {
        let metrics = DeviceLockMetrics::default();
        let mut registry = Registry::default();
        metrics.register(&mut registry);
        metrics.count_call(LeaseVerb::Replace);
        metrics.holds.inc();
        metrics
            .wait_seconds
            .get_or_create(&PriorityLabels {
                priority: PriorityLabel::High,
            })
            .observe(0.5);
        let mut text = String::new();
        encode(&mut text, &registry).unwrap();
        for name in [
            "cinder_operator_device_lock_wait_seconds_bucket{le=\"0.001\",priority=\"high\"}",
            "cinder_operator_device_lock_holds_total 1",
            "cinder_operator_device_lock_takeovers_total 0",
            "cinder_operator_device_lock_lost_total 0",
            "cinder_operator_lease_api_calls_total{verb=\"replace\"} 1",
        ] {
            assert!(text.contains(name), "missing {name} in\n{text}");
        }
    }
}
