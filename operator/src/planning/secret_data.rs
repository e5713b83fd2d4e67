//! [`SecretData`]: the string data of a Secret, as read from a credential Secret or rendered for
//! a projection Secret. Its `Debug` prints the keys only, so a value never reaches a log line or
//! an error message.

use super::digest::map_digest;
use std::collections::BTreeMap;

/// The string data of one Secret, by key. `Debug` prints the keys only.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct SecretData(BTreeMap<String, String>);

impl SecretData {
    /// The value of `key`.
    pub(crate) fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).map(String::as_str)
    }

    /// The keys, sorted.
    #[cfg(test)]
    pub(crate) fn keys(&self) -> impl Iterator<Item = &str> {
        self.0.keys().map(String::as_str)
    }

    #[cfg(test)]
    pub(crate) fn contains_key(&self, key: &str) -> bool {
        self.0.contains_key(key)
    }

    /// Sets `key` to `value`.
    pub(crate) fn insert(&mut self, key: impl Into<String>, value: String) {
        self.0.insert(key.into(), value);
    }

    /// sha256 over the sorted entries: it changes exactly when some key or value does.
    pub(crate) fn digest(&self) -> String {
        map_digest(&self.0)
    }

    /// The data as a Secret's bytes.
    pub(crate) fn into_bytes(self) -> BTreeMap<String, Vec<u8>> {
        self.0
            .into_iter()
            .map(|(k, v)| (k, v.into_bytes()))
            .collect()
    }
}

impl From<BTreeMap<String, String>> for SecretData {
    fn from(data: BTreeMap<String, String>) -> Self {
        SecretData(data)
    }
}

impl std::ops::Index<&str> for SecretData {
    type Output = String;

    /// The value of `key`; panics when it is absent (as a map does).
    fn index(&self, key: &str) -> &String {
        &self.0[key]
    }
}

impl std::fmt::Debug for SecretData {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_set().entries(self.0.keys()).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_shows_keys_never_values() {
        let v = SecretData::from(BTreeMap::from([(
            "password".to_string(),
            "hunter2".to_string(),
        )]));
        let shown = format!("{v:?}");
        assert!(shown.contains("password"));
        assert!(!shown.contains("hunter2"));
    }
}
