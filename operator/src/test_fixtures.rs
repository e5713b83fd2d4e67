//! Fixtures of the crate's unit tests.

use crate::crd::Cinder;

/// A minimal valid Cinder `namespace/name` (release and image tag 2026.1, a managed MariaDB and
/// RabbitMQ), without UID or resourceVersion.
pub fn cinder_named(namespace: &str, name: &str) -> Cinder {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "cinder.openstack.c5c3.io/v1alpha1",
        "kind": "Cinder",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"openStackRelease": "2026.1", "image": {"repository": "r", "tag": "2026.1"},
            "database": {"clusterRef": {"name": "m"}, "secretRef": {"name": "d"}},
            "messaging": {"clusterRef": {"name": "q"}}, "serviceUser": {"secretRef": {"name": "s"}},
            "keystoneEndpoint": "https://k:5000/v3"}
    }))
    .expect("the fixture is a valid Cinder")
}

/// [`cinder_named`] `ns/c` with UID `u` (so children get an ownerReference).
pub fn cinder() -> Cinder {
    let mut c = cinder_named("ns", "c");
    c.metadata.uid = Some("u".to_string());
    c
}
