//! sha256 digests (hex) of secret values and of rendered content: what annotations and
//! content-addressed names carry instead of the values themselves.

use sha2::{Digest, Sha256};
use std::collections::BTreeMap;

/// sha256 of `value`, lowercase hex.
pub(crate) fn sha256_hex(value: &[u8]) -> String {
    hex::encode(Sha256::digest(value))
}

/// sha256 over a map's sorted entries (`key NUL value NUL`…), so the digest changes exactly
/// when some key or value does.
pub(crate) fn map_digest(data: &BTreeMap<String, String>) -> String {
    let mut h = Sha256::new();
    for (k, v) in data {
        h.update(k.as_bytes());
        h.update([0]);
        h.update(v.as_bytes());
        h.update([0]);
    }
    hex::encode(h.finalize())
}

/// A value that must never be printed: `Debug` shows only its digest prefix.
#[derive(Clone, PartialEq, Eq)]
pub struct Sensitive(String);

impl Sensitive {
    pub(crate) fn new(value: String) -> Self {
        Sensitive(value)
    }
    /// The value, for the one place it belongs (a Secret's data).
    pub fn expose(&self) -> &str {
        &self.0
    }
    /// sha256 hex of the value (what annotations carry).
    pub(crate) fn digest(&self) -> String {
        sha256_hex(self.0.as_bytes())
    }
}

impl std::fmt::Debug for Sensitive {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Sensitive(sha256:{}…)", &self.digest()[..12])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_digest_and_map_digest_sensitivity() {
        assert_eq!(
            sha256_hex(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        let mut a = BTreeMap::new();
        a.insert("k".to_string(), "v".to_string());
        let mut b = BTreeMap::new();
        b.insert("kv".to_string(), String::new());
        assert_ne!(
            map_digest(&a),
            map_digest(&b),
            "entry boundaries are part of the digest"
        );
    }

    #[test]
    fn sensitive_debug_never_shows_the_value() {
        let s = Sensitive::new("hunter2".into());
        let shown = format!("{s:?}");
        assert!(!shown.contains("hunter2"));
        assert!(shown.starts_with("Sensitive(sha256:"));
    }
}
