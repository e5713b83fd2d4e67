//! Lease names for device ids: a valid DNS-1123 subdomain (lowercase `[a-z0-9-.]`, labels that start
//! and end with an alphanumeric, at most 253 characters), with a hash suffix whenever the id had to
//! be changed or truncated, so two different ids never map to the same name.

use sha2::{Digest, Sha256};

/// Every device Lease name starts with this (keeps device Leases apart from leader-election Leases).
pub const LEASE_NAME_PREFIX: &str = "cinder-device-";

/// Maximum length of a Kubernetes object name (DNS-1123 subdomain).
pub const MAX_NAME_LEN: usize = 253;

/// Hex characters of the SHA-256 suffix (64 bits).
const HASH_LEN: usize = 16;

/// The Lease name of a device id.
///
/// The id is kept verbatim (after the prefix) when it is already a valid name part and does not
/// itself end like a hash suffix (`-` and 16 lowercase hex digits); otherwise it is lowercased,
/// every character outside `[a-z0-9.-]` becomes `-`, labels are trimmed to start and end with an
/// alphanumeric, the result is truncated to fit, and `-<16 hex of sha256(id)>` is appended. Verbatim
/// names never end like a hash suffix and changed names always do, so the two kinds cannot collide;
/// two changed ids collide only on a 64-bit hash collision.
pub fn lease_name(device_id: &str) -> String {
    let room = MAX_NAME_LEN - LEASE_NAME_PREFIX.len();
    if device_id.len() <= room && is_valid_subdomain(device_id) && !ends_like_hash(device_id) {
        return format!("{LEASE_NAME_PREFIX}{device_id}");
    }
    let digest = Sha256::digest(device_id.as_bytes());
    let hash = &hex::encode(digest)[..HASH_LEN];
    let mut body = sanitize(device_id);
    // Room for the body: the prefix, the body, `-`, the hash.
    let body_room = room - 1 - HASH_LEN;
    if body.len() > body_room {
        body.truncate(body_room);
        while body.ends_with(['-', '.']) {
            body.pop();
        }
    }
    if body.is_empty() {
        format!("{LEASE_NAME_PREFIX}{hash}")
    } else {
        format!("{LEASE_NAME_PREFIX}{body}-{hash}")
    }
}

/// Lowercases, replaces characters outside `[a-z0-9.-]` by `-`, and drops leading/trailing `-` of
/// each dot-separated label and empty labels. The result is ASCII.
fn sanitize(id: &str) -> String {
    let replaced: String = id
        .chars()
        .map(|c| {
            let c = c.to_ascii_lowercase();
            if c.is_ascii_lowercase() || c.is_ascii_digit() || c == '.' || c == '-' {
                c
            } else {
                '-'
            }
        })
        .collect();
    replaced
        .split('.')
        .map(|label| label.trim_matches('-'))
        .filter(|label| !label.is_empty())
        .collect::<Vec<_>>()
        .join(".")
}

/// Whether `s` is a valid DNS-1123 subdomain: non-empty, at most 253 characters, dot-separated
/// labels of `[a-z0-9-]` that start and end with an alphanumeric.
pub fn is_valid_subdomain(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= MAX_NAME_LEN
        && s.split('.').all(|label| {
            let bytes = label.as_bytes();
            match (bytes.first(), bytes.last()) {
                (Some(first), Some(last)) => {
                    is_alnum(*first)
                        && is_alnum(*last)
                        && bytes.iter().all(|&b| is_alnum(b) || b == b'-')
                }
                _ => false,
            }
        })
}

fn is_alnum(b: u8) -> bool {
    b.is_ascii_lowercase() || b.is_ascii_digit()
}

fn ends_like_hash(s: &str) -> bool {
    let bytes = s.as_bytes();
    bytes.len() > HASH_LEN
        && bytes[bytes.len() - HASH_LEN - 1] == b'-'
        && bytes[bytes.len() - HASH_LEN..]
            .iter()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(b))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn valid_ids_are_kept_verbatim() {
        assert_eq!(lease_name("db.openstack"), "cinder-device-db.openstack");
        assert_eq!(lease_name("nfs-10-0-0-1"), "cinder-device-nfs-10-0-0-1");
    }

    #[test]
    fn changed_ids_get_a_hash_suffix() {
        let upper = lease_name("DB");
        assert!(upper.starts_with("cinder-device-db-"), "{upper}");
        assert_ne!(upper, lease_name("db"));
        let rbd = lease_name("rbd:10.0.0.1:6789,10.0.0.2:6789");
        assert!(is_valid_subdomain(&rbd), "{rbd}");
        assert!(ends_like_hash(&rbd));
        assert!(is_valid_subdomain(&lease_name("")));
        assert!(is_valid_subdomain(&lease_name("!!!")));
        assert!(is_valid_subdomain(&lease_name("-a-.-b-")));
    }

    #[test]
    fn an_id_that_looks_hashed_cannot_collide_with_a_changed_one() {
        let changed = lease_name("DB");
        let body = changed.trim_start_matches(LEASE_NAME_PREFIX);
        // Someone names a device exactly like the changed name: it is hashed again.
        assert_ne!(lease_name(body), changed);
    }

    #[test]
    fn long_ids_are_truncated_and_distinct() {
        let a = "a".repeat(400);
        let b = format!("{}b", "a".repeat(399));
        let (na, nb) = (lease_name(&a), lease_name(&b));
        assert!(na.len() <= MAX_NAME_LEN && nb.len() <= MAX_NAME_LEN);
        assert!(is_valid_subdomain(&na) && is_valid_subdomain(&nb));
        assert_ne!(na, nb);
    }

    proptest! {
        #[test]
        fn every_id_maps_to_a_valid_name(id in ".{0,300}") {
            let name = lease_name(&id);
            prop_assert!(is_valid_subdomain(&name), "{name}");
        }

        #[test]
        fn different_ids_get_different_names(a in "[a-zA-Z0-9:.,_-]{0,40}", b in "[a-zA-Z0-9:.,_-]{0,40}") {
            prop_assume!(a != b);
            prop_assert_ne!(lease_name(&a), lease_name(&b));
        }
    }
}
