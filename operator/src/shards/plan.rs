//! The balance planner (pure): from what the shard Leases say and how many replicas are live,
//! which shards this replica takes and which it gives back. A replica holds at most
//! `ceil(shards / live replicas)`; it takes free shards (no holder, or a holder that stopped
//! renewing for a whole Lease duration) up to that quota, starting at an offset derived from its
//! identity so that replicas starting together reach for different shards first, and gives back
//! its highest-numbered shards beyond the quota (a replica that joins lowers everyone's quota;
//! the shards given back are free for it on its next round).

use super::hash::fnv1a64;

/// One shard Lease as listed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum ShardLease {
    /// No Lease yet, or one without a holder (released).
    Free,
    /// A holder that renewed within the Lease duration.
    Held(String),
    /// A holder whose renewal is older than the Lease duration: taken over.
    Expired(String),
}

/// What this replica should do this round.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct ShardPlan {
    /// Shards to acquire (free or expired), in the order to try them.
    pub take: Vec<u32>,
    /// Shards this replica holds and gives back (clears holderIdentity).
    pub give_back: Vec<u32>,
}

/// The most shards one replica holds: `ceil(shards / live)` (`live` 0 counts as 1).
pub(crate) fn quota(shards: u32, live: usize) -> u32 {
    let live = u32::try_from(live.max(1)).unwrap_or(u32::MAX);
    shards.div_ceil(live)
}

/// Plans one round for `me`. `leases[i]` is shard `i`; `held` the shards this replica holds and
/// renews (the Leases may lag behind it); `live` the live replicas, this one included.
pub(crate) fn plan(me: &str, leases: &[ShardLease], held: &[u32], live: usize) -> ShardPlan {
    let shards = u32::try_from(leases.len()).unwrap_or(u32::MAX);
    let quota = quota(shards, live) as usize;
    let mut mine: Vec<u32> = held.to_vec();
    mine.sort_unstable();
    mine.dedup();
    if mine.len() > quota {
        return ShardPlan {
            take: Vec::new(),
            give_back: mine.split_off(quota),
        };
    }
    let offset = if shards == 0 {
        0
    } else {
        u32::try_from(fnv1a64(me.as_bytes()) % u64::from(shards)).unwrap_or(0)
    };
    let free = |i: u32| match leases.get(i as usize) {
        Some(ShardLease::Free) => true,
        Some(ShardLease::Expired(_)) => true,
        Some(ShardLease::Held(h)) => h == me,
        None => false,
    };
    let take = (0..shards)
        .map(|k| (k + offset) % shards)
        .filter(|i| !mine.contains(i) && free(*i))
        .take(quota - mine.len())
        .collect();
    ShardPlan {
        take,
        give_back: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn free(n: usize) -> Vec<ShardLease> {
        vec![ShardLease::Free; n]
    }

    #[test]
    fn quota_is_the_ceiling_of_shards_over_live_replicas() {
        assert_eq!(quota(4, 1), 4);
        assert_eq!(quota(4, 2), 2);
        assert_eq!(quota(5, 2), 3);
        assert_eq!(quota(4, 3), 2);
        assert_eq!(quota(2, 4), 1);
        assert_eq!(quota(4, 0), 4);
    }

    #[test]
    fn a_lone_replica_takes_every_free_shard() {
        let p = plan("a", &free(4), &[], 1);
        let mut take = p.take.clone();
        take.sort_unstable();
        assert_eq!(take, vec![0, 1, 2, 3]);
        assert!(p.give_back.is_empty());
    }

    #[test]
    fn two_replicas_take_at_most_half_each_and_never_a_held_shard() {
        let leases = vec![
            ShardLease::Held("b".into()),
            ShardLease::Free,
            ShardLease::Free,
            ShardLease::Held("b".into()),
        ];
        let p = plan("a", &leases, &[], 2);
        let mut take = p.take.clone();
        take.sort_unstable();
        assert_eq!(take, vec![1, 2]);
        // Holding one already: takes one more.
        let p = plan("a", &leases, &[1], 2);
        assert_eq!(p.take, vec![2]);
    }

    #[test]
    fn expired_holders_are_taken_over() {
        let leases = vec![
            ShardLease::Held("a".into()),
            ShardLease::Held("a".into()),
            ShardLease::Expired("b".into()),
            ShardLease::Expired("b".into()),
        ];
        let p = plan("a", &leases, &[0, 1], 1);
        let mut take = p.take.clone();
        take.sort_unstable();
        assert_eq!(take, vec![2, 3]);
    }

    #[test]
    fn a_replica_over_its_quota_gives_back_its_highest_shards() {
        let leases = vec![ShardLease::Held("a".into()); 4];
        let p = plan("a", &leases, &[0, 1, 2, 3], 2);
        assert_eq!(p.give_back, vec![2, 3]);
        assert!(p.take.is_empty());
        // Three replicas: quota 2, still the same two go.
        assert_eq!(plan("a", &leases, &[0, 1, 2, 3], 3).give_back, vec![2, 3]);
        // At the quota: nothing moves.
        assert_eq!(plan("a", &leases, &[0, 1], 2), ShardPlan::default());
    }

    #[test]
    fn replicas_starting_together_reach_for_different_shards_first() {
        let firsts: std::collections::BTreeSet<u32> = (0..16)
            .map(|i| plan(&format!("replica-{i}"), &free(8), &[], 8).take[0])
            .collect();
        assert!(firsts.len() > 3, "{firsts:?}");
    }

    #[test]
    fn no_shards_plans_nothing() {
        assert_eq!(plan("a", &[], &[], 1), ShardPlan::default());
    }
}
