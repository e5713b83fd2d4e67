//! The devices the operator locks and at which priority: the Cinder database (schema and
//! maintenance Jobs run one at a time per database) and each backend's storage endpoint (an RBD
//! cluster by its monitors, an NFS server by host) for backend-level changes.

use cinder_actors::Priority;

/// The device id of a Cinder database (`db:<namespace>/<database name>`).
pub fn database(namespace: &str, name: &str) -> String {
    format!("db:{namespace}/{name}")
}

/// The device id of an RBD (Ceph) cluster, by its monitors. Order, case, surrounding blanks and
/// duplicates of the monitor list do not change the id.
pub fn rbd_cluster<S: AsRef<str>>(monitors: &[S]) -> String {
    let mut mons: Vec<String> = monitors
        .iter()
        .map(|m| m.as_ref().trim().to_ascii_lowercase())
        .filter(|m| !m.is_empty())
        .collect();
    mons.sort();
    mons.dedup();
    format!("rbd:{}", mons.join(","))
}

/// The device id of an NFS server, by host (case and surrounding blanks ignored).
pub fn nfs_server(host: &str) -> String {
    format!("nfs:{}", host.trim().to_ascii_lowercase())
}

/// The database Jobs that take the database device lock, one at a time per database.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DatabaseJob {
    /// `cinder-manage db sync`.
    DbSync,
    /// Rolling-upgrade schema expand.
    Expand,
    /// Rolling-upgrade data migration.
    Migrate,
    /// Rolling-upgrade schema contract.
    Contract,
    /// `cinder-manage service remove` of a stale service.
    ServiceRemove,
}

impl DatabaseJob {
    /// High for schema Jobs (they unblock everything else), Default for service removal.
    pub fn priority(self) -> Priority {
        match self {
            Self::DbSync | Self::Expand | Self::Migrate | Self::Contract => Priority::High,
            Self::ServiceRemove => Priority::Default,
        }
    }
}

/// Backend-level changes (a volume service's roll-out or removal, a backend's detach) take the
/// backend's storage-endpoint lock at High priority: backends are foundational, volumes depend
/// on them.
pub const BACKEND_CHANGE_PRIORITY: Priority = Priority::High;

/// The priority a request retried after a `DeviceBusy` answer (another replica held the Lease)
/// asks at: one level above its first wait's (High stays High), so a requester that was turned
/// away is served before the requests of its first priority that arrived meanwhile.
pub fn retry_priority(first: Priority) -> Priority {
    match first {
        Priority::Baseline => Priority::Default,
        Priority::Default | Priority::High => Priority::High,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lease_name::{is_valid_subdomain, lease_name};

    #[test]
    fn monitor_order_and_case_do_not_matter() {
        assert_eq!(
            rbd_cluster(&["10.0.0.2:6789", "10.0.0.1:6789"]),
            rbd_cluster(&[" 10.0.0.1:6789", "10.0.0.2:6789", "10.0.0.1:6789"])
        );
        assert_ne!(rbd_cluster(&["a"]), rbd_cluster(&["b"]));
        assert_eq!(
            nfs_server("NFS1.example.org "),
            nfs_server("nfs1.example.org")
        );
    }

    #[test]
    fn every_device_id_has_a_valid_lease_name() {
        for id in [
            database("openstack", "cinder"),
            rbd_cluster(&["[2001:db8::1]:6789", "10.0.0.1:6789"]),
            nfs_server("nfs1.example.org"),
        ] {
            assert!(is_valid_subdomain(&lease_name(&id)), "{id}");
        }
    }

    #[test]
    fn a_retry_after_device_busy_asks_one_level_higher() {
        assert_eq!(retry_priority(Priority::Baseline), Priority::Default);
        assert_eq!(retry_priority(Priority::Default), Priority::High);
        assert_eq!(retry_priority(Priority::High), Priority::High);
        assert_eq!(
            retry_priority(DatabaseJob::ServiceRemove.priority()),
            Priority::High
        );
    }

    #[test]
    fn schema_jobs_are_high_and_service_remove_default() {
        assert_eq!(DatabaseJob::DbSync.priority(), Priority::High);
        assert_eq!(DatabaseJob::Contract.priority(), Priority::High);
        assert_eq!(DatabaseJob::ServiceRemove.priority(), Priority::Default);
    }
}
