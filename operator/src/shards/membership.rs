//! How a replica learns how many replicas are live: each holds a membership Lease
//! `cinder-operator-member-<hash of its identity>` (in the operator's namespace, renewed like
//! every other Lease and released on SIGTERM); the live replicas are the member Leases whose
//! holder renewed within the Lease duration. One list of the namespace's Leases per round gives
//! both the members and the shard Leases.

use super::hash::fnv1a64;
use super::plan::ShardLease;
use cinder_lease::lease_lock::is_expired;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::jiff::Timestamp;

/// The name prefix of the membership Leases.
pub(crate) const MEMBER_LEASE_PREFIX: &str = "cinder-operator-member-";
/// The name prefix of the shard Leases (`cinder-operator-shard-<i>`).
pub(crate) const SHARD_LEASE_PREFIX: &str = "cinder-operator-shard-";

/// The membership Lease of the replica `identity` (a valid Lease name whatever the identity).
pub fn member_lease_name(identity: &str) -> String {
    format!("{MEMBER_LEASE_PREFIX}{:016x}", fnv1a64(identity.as_bytes()))
}

/// The Lease of shard `i`.
pub(crate) fn shard_lease_name(i: u32) -> String {
    format!("{SHARD_LEASE_PREFIX}{i}")
}

/// What one list of the namespace's Leases says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Observed {
    /// Shard `i`'s Lease at index `i`.
    pub shards: Vec<ShardLease>,
    /// Member Leases with a holder that renewed within the duration.
    pub live_members: usize,
}

/// Reads the shard Leases (`0..count`) and the live members out of `leases` at `now`;
/// `default_secs` is the duration of a Lease that names none.
pub(crate) fn observe(leases: &[Lease], count: u32, now: Timestamp, default_secs: i32) -> Observed {
    let mut shards = vec![ShardLease::Free; count as usize];
    let mut live_members = 0;
    for lease in leases {
        let Some(name) = lease.metadata.name.as_deref() else {
            continue;
        };
        let spec = lease.spec.clone().unwrap_or_default();
        let holder = spec.holder_identity.clone().filter(|h| !h.is_empty());
        let expired = is_expired(&spec, now, default_secs);
        if name.starts_with(MEMBER_LEASE_PREFIX) {
            if holder.is_some() && !expired {
                live_members += 1;
            }
        } else if let Some(i) = name
            .strip_prefix(SHARD_LEASE_PREFIX)
            .and_then(|i| i.parse::<usize>().ok())
            && let Some(slot) = shards.get_mut(i)
        {
            *slot = match holder {
                None => ShardLease::Free,
                Some(h) if expired => ShardLease::Expired(h),
                Some(h) => ShardLease::Held(h),
            };
        }
    }
    Observed {
        shards,
        live_members,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::coordination::v1::LeaseSpec;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
    use k8s_openapi::jiff::SignedDuration;

    fn lease(name: &str, holder: Option<&str>, renewed_ago: i64, now: Timestamp) -> Lease {
        Lease {
            metadata: ObjectMeta {
                name: Some(name.to_string()),
                ..ObjectMeta::default()
            },
            spec: Some(LeaseSpec {
                holder_identity: holder.map(str::to_string),
                renew_time: Some(MicroTime(now - SignedDuration::from_secs(renewed_ago))),
                lease_duration_seconds: Some(10),
                ..LeaseSpec::default()
            }),
        }
    }

    #[test]
    fn member_names_are_lease_names_for_any_identity() {
        let n = member_lease_name("Pod_Name-With.Odd/Chars");
        assert!(n.starts_with(MEMBER_LEASE_PREFIX));
        assert_eq!(n.len(), MEMBER_LEASE_PREFIX.len() + 16);
        assert_ne!(n, member_lease_name("another"));
        assert_eq!(shard_lease_name(3), "cinder-operator-shard-3");
    }

    #[test]
    fn shards_and_live_members_are_read_from_one_list() {
        let now = Timestamp::now();
        let leases = vec![
            lease(&member_lease_name("a"), Some("a"), 1, now),
            lease(&member_lease_name("b"), Some("b"), 30, now),
            lease(&member_lease_name("c"), None, 1, now),
            lease("cinder-operator-shard-0", Some("a"), 1, now),
            lease("cinder-operator-shard-1", Some("b"), 30, now),
            lease("cinder-operator-shard-2", None, 1, now),
            lease("cinder-operator-shard-9", Some("a"), 1, now),
            lease("cinder-operator-leader", Some("a"), 1, now),
        ];
        let o = observe(&leases, 4, now, 15);
        assert_eq!(o.live_members, 1);
        assert_eq!(
            o.shards,
            vec![
                ShardLease::Held("a".into()),
                ShardLease::Expired("b".into()),
                ShardLease::Free,
                ShardLease::Free,
            ]
        );
    }
}
