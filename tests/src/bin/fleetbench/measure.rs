//! The figures taken from the simulators' request records (the operator's requests are the ones
//! carrying its user agent) and from the replicas' pass records.

use chrono::{DateTime, Utc};
use cinder_sim::RequestRecord;
use std::collections::BTreeSet;

/// The operator's requests of one window, over every cluster.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Requests {
    pub total: u64,
    /// Mutating requests the API server carried out (2xx).
    pub writes: u64,
    pub throttled: u64,
}

/// How the operator's user agent starts (`cinder-operator/<version> (<replica identity>)`).
pub const OPERATOR_USER_AGENT: &str = "cinder-operator/";

/// Whether `r` is the operator's.
pub fn by_operator(r: &RequestRecord) -> bool {
    r.user_agent.starts_with(OPERATOR_USER_AGENT)
}

/// Whether `r` is a mutation the API server carried out (2xx).
pub fn is_write(r: &RequestRecord) -> bool {
    cinder_sim::writes::is_mutating(&r.verb) && (200..300).contains(&r.status)
}

/// The operator's requests in `[from, to)` of every cluster's record.
pub fn requests_between(
    records: &[Vec<RequestRecord>],
    from: DateTime<Utc>,
    to: DateTime<Utc>,
) -> Requests {
    let mut out = Requests::default();
    for r in records.iter().flatten() {
        if !by_operator(r) || r.time < from || r.time >= to {
            continue;
        }
        out.total += 1;
        if is_write(r) {
            out.writes += 1;
        }
        if r.status == 429 {
            out.throttled += 1;
        }
    }
    out
}

/// The watch streams the operator opened: one per (cluster, group, resource, namespace).
pub fn watches_opened(records: &[Vec<RequestRecord>]) -> usize {
    let mut streams = BTreeSet::new();
    for (cluster, log) in records.iter().enumerate() {
        for r in log {
            if by_operator(r) && r.verb == "watch" && r.status == 200 {
                streams.insert((
                    cluster,
                    r.group.clone(),
                    r.resource.clone(),
                    r.namespace.clone(),
                ));
            }
        }
    }
    streams.len()
}

/// The `q` quantile (0..=1) of `values` by the nearest-rank method; 0 for none.
pub fn quantile(values: &mut [u64], q: f64) -> u64 {
    if values.is_empty() {
        return 0;
    }
    values.sort_unstable();
    let rank = ((q * values.len() as f64).ceil() as usize).clamp(1, values.len());
    values[rank - 1]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_quantiles() {
        let mut v: Vec<u64> = (1..=100).collect();
        assert_eq!(quantile(&mut v, 0.5), 50);
        assert_eq!(quantile(&mut v, 0.99), 99);
        assert_eq!(quantile(&mut [7], 0.99), 7);
        assert_eq!(quantile(&mut [], 0.5), 0);
    }
}
