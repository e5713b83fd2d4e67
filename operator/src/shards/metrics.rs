//! The shard metrics: `cinder_operator_shards_held` (a gauge: the shard Leases this replica
//! holds) and `cinder_operator_shard_takeovers_total` (shard Leases this replica took over from
//! a holder that stopped renewing).

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

/// The shard families. Cloning shares the series.
#[derive(Clone, Debug, Default)]
pub struct ShardMetrics {
    /// Shard Leases held now.
    pub held: Gauge,
    /// Shard Leases taken over from an expired holder.
    pub takeovers: Counter,
}

impl ShardMetrics {
    /// Registers both families in `registry` (the counter without `_total`: the OpenMetrics
    /// encoder appends it).
    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            "cinder_operator_shards_held",
            "Shard Leases this replica holds",
            self.held.clone(),
        );
        registry.register(
            "cinder_operator_shard_takeovers",
            "Shard Leases this replica took over from a holder that stopped renewing",
            self.takeovers.clone(),
        );
    }
}
