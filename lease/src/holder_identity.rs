//! Holder identities: unique per process (pod name from `POD_NAME`, else the host name, plus a
//! uuid), never a controller name, so two replicas and two restarts of one pod never share one.

use std::fmt;
use std::sync::{Arc, OnceLock};

/// The `holderIdentity` written into device Leases.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct HolderIdentity(Arc<str>);

impl HolderIdentity {
    /// The identity of this process: the same value for every call in one process.
    pub fn process() -> Self {
        static PROCESS: OnceLock<HolderIdentity> = OnceLock::new();
        PROCESS.get_or_init(Self::generate).clone()
    }

    /// A fresh identity `<pod or host>-<uuid>` (tests use it to play several replicas in one process).
    pub fn generate() -> Self {
        Self::for_pod(&pod_or_host_name())
    }

    /// A fresh identity `<pod>-<uuid>` for an explicitly named pod.
    pub fn for_pod(pod: &str) -> Self {
        let pod = if pod.trim().is_empty() {
            "cinder-operator"
        } else {
            pod.trim()
        };
        Self(format!("{pod}-{}", uuid::Uuid::new_v4()).into())
    }

    /// The identity as written to the Lease.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for HolderIdentity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// `POD_NAME` (downward API), else `HOSTNAME`, else `/etc/hostname`, else `cinder-operator`.
fn pod_or_host_name() -> String {
    let from_env = |key: &str| {
        std::env::var(key)
            .ok()
            .map(|v| v.trim().to_owned())
            .filter(|v| !v.is_empty())
    };
    from_env("POD_NAME")
        .or_else(|| from_env("HOSTNAME"))
        .or_else(|| {
            std::fs::read_to_string("/etc/hostname")
                .ok()
                .map(|v| v.trim().to_owned())
                .filter(|v| !v.is_empty())
        })
        .unwrap_or_else(|| "cinder-operator".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn process_identity_is_stable_and_generated_ones_differ() {
        assert_eq!(HolderIdentity::process(), HolderIdentity::process());
        assert_ne!(HolderIdentity::generate(), HolderIdentity::generate());
        assert_ne!(HolderIdentity::generate(), HolderIdentity::process());
    }

    #[test]
    fn pod_name_is_the_prefix() {
        let id = HolderIdentity::for_pod("cinder-operator-7d9f-abcde");
        assert!(id.as_str().starts_with("cinder-operator-7d9f-abcde-"));
        assert!(
            HolderIdentity::for_pod(" ")
                .as_str()
                .starts_with("cinder-operator-")
        );
    }
}
