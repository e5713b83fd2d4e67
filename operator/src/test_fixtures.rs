//! Fixtures of the crate's unit tests.

use crate::crd::Cinder;
use crate::pipeline::Artefacts;

/// A minimal valid Cinder `namespace/name` (release and image tag 2026.1, a managed MariaDB and
/// RabbitMQ), without UID or resourceVersion.
pub(crate) fn cinder_named(namespace: &str, name: &str) -> Cinder {
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
pub(crate) fn cinder() -> Cinder {
    let mut c = cinder_named("ns", "c");
    c.metadata.uid = Some("u".to_string());
    c
}

/// The artefacts of a pass whose credential steps ran: the authtoken, database connection and
/// transport URL digests `a1`, `d1` and `t1`.
pub(crate) fn artefacts() -> Artefacts {
    Artefacts {
        authtoken_hash: Some("a1".into()),
        db_connection_hash: Some("d1".into()),
        transport_url_hash: Some("t1".into()),
        ..Default::default()
    }
}

/// A scratch directory holding a stand-in `program` that exits with `code`, removed on drop.
/// [`StubProgram::path`] is a `PATH` that finds the stand-in first.
pub(crate) struct StubProgram {
    pub dir: std::path::PathBuf,
}

impl StubProgram {
    /// The stand-in `program` exiting with `code`, in a directory named after `tag` and `code`.
    pub(crate) fn exiting(tag: &str, program: &str, code: i32) -> Self {
        use std::os::unix::fs::PermissionsExt;
        let dir = std::env::temp_dir().join(format!("cinder-{tag}-{}-{code}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("a scratch directory");
        let bin = dir.join(program);
        std::fs::write(&bin, format!("#!/bin/sh\nexit {code}\n")).expect("the stand-in");
        std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755))
            .expect("an executable stand-in");
        StubProgram { dir }
    }

    /// `PATH` with the stand-in's directory first.
    pub(crate) fn path(&self) -> String {
        format!(
            "{}:{}",
            self.dir.display(),
            std::env::var("PATH").unwrap_or_default()
        )
    }
}

impl Drop for StubProgram {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
