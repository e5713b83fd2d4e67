//! Digests: sha256 hex of a value (the rollout annotations) and of a map of files (the
//! content hash of content-addressed children).

use sha2::{Digest, Sha256};
use std::collections::BTreeMap;

/// sha256 hex of `value`.
pub fn sha256_hex(value: impl AsRef<[u8]>) -> String {
    hex::encode(Sha256::digest(value.as_ref()))
}

/// sha256 hex over `files` in key order, each key and value length-prefixed (no ambiguity).
pub fn content_hash(files: &BTreeMap<String, Vec<u8>>) -> String {
    let mut h = Sha256::new();
    for (k, v) in files {
        h.update((k.len() as u64).to_be_bytes());
        h.update(k.as_bytes());
        h.update((v.len() as u64).to_be_bytes());
        h.update(v);
    }
    hex::encode(h.finalize())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_hash_depends_on_keys_and_values() {
        let a: BTreeMap<String, Vec<u8>> = [("a".to_string(), b"bc".to_vec())].into();
        let b: BTreeMap<String, Vec<u8>> = [("ab".to_string(), b"c".to_vec())].into();
        assert_ne!(content_hash(&a), content_hash(&b));
        assert_eq!(content_hash(&a), content_hash(&a.clone()));
        assert_eq!(sha256_hex("x").len(), 64);
    }
}
