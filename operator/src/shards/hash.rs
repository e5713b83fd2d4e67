//! Which shard a Cinder belongs to: FNV-1a (64 bit) of `namespace/name`, mixed by MurmurHash3's
//! 64-bit finalizer (`fmix64`: FNV's low bits follow the last byte's low bits, so without it
//! `cinder-0`, `cinder-1`, … would cycle through a power-of-two shard count), modulo the shard
//! count.
//! The function is written out here (not taken from a hashing crate whose output may change
//! between versions) so that every replica, of any version, puts a Cinder in the same shard; the
//! pinned values in the tests guard it.

/// FNV-1a 64-bit offset basis.
const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
/// FNV-1a 64-bit prime.
const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;

/// FNV-1a (64 bit) of `bytes`.
pub(crate) fn fnv1a64(bytes: &[u8]) -> u64 {
    bytes.iter().fold(FNV_OFFSET, |hash, b| {
        (hash ^ u64::from(*b)).wrapping_mul(FNV_PRIME)
    })
}

/// MurmurHash3's 64-bit finalizer: every input bit reaches every output bit.
pub(crate) fn fmix64(mut h: u64) -> u64 {
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    h ^= h >> 33;
    h
}

/// The shard (in `0..shards`) of the object `namespace/name`; `shards` 0 counts as 1.
pub fn shard_of(namespace: &str, name: &str, shards: u32) -> u32 {
    let key = format!("{namespace}/{name}");
    let shard = fmix64(fnv1a64(key.as_bytes())) % u64::from(shards.max(1));
    // The remainder is below `shards`, a u32.
    u32::try_from(shard).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fnv1a64_matches_the_reference_vectors() {
        // From the FNV reference (draft-eastlake-fnv): "", "a", "foobar".
        assert_eq!(fnv1a64(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a64(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(fnv1a64(b"foobar"), 0x8594_4171_f739_67e8);
    }

    #[test]
    fn fmix64_mixes_and_keeps_zero() {
        assert_eq!(fmix64(0), 0);
        assert_ne!(fmix64(1) & 3, fmix64(2) & 3);
    }

    #[test]
    fn shards_are_pinned_across_versions() {
        // Changing these moves Cinders between shards during a rolling upgrade: never change them.
        let pinned: Vec<u32> = (0..8)
            .map(|i| shard_of("fleet", &format!("cinder-{i}"), 4))
            .collect();
        assert_eq!(pinned, PINNED);
    }

    /// `shard_of("fleet", "cinder-<i>", 4)` for i in 0..8.
    const PINNED: [u32; 8] = [0, 0, 0, 1, 1, 1, 1, 3];

    #[test]
    fn one_shard_holds_everything_and_zero_counts_as_one() {
        assert_eq!(shard_of("a", "b", 1), 0);
        assert_eq!(shard_of("a", "b", 0), 0);
    }

    #[test]
    fn a_fleet_spreads_over_the_shards() {
        let shards = 4;
        let mut counts = [0u32; 4];
        for i in 0..1000 {
            counts[shard_of("fleet", &format!("cinder-{i}"), shards) as usize] += 1;
        }
        for c in counts {
            assert!((200..=300).contains(&c), "{counts:?}");
        }
        // The namespace is part of the key.
        let moved = (0..100)
            .filter(|i| {
                let n = format!("cinder-{i}");
                shard_of("a", &n, 16) != shard_of("b", &n, 16)
            })
            .count();
        assert!(moved > 50, "{moved}");
    }
}
