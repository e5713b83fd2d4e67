//! The operator's own spec checks (what the schema says but a CEL-less API server may admit),
//! and the defaults the types fill in.

use cinder_operator::crd::validation::{is_release, validate_cinder, validate_satellite};
use cinder_operator::crd::{BackendType, CinderBackendSpec, CinderSpec};

const MINIMAL: &str = r#"
openStackRelease: "2026.1"
image: {repository: registry.example/cinder, tag: "2026.1"}
database: {clusterRef: {name: mariadb}, secretRef: {name: cinder-db}}
messaging: {clusterRef: {name: rabbitmq}}
serviceUser: {secretRef: {name: cinder-keystone}}
keystoneEndpoint: https://keystone.example:5000/v3
"#;

fn minimal() -> CinderSpec {
    serde_norway::from_str(MINIMAL).unwrap()
}

#[test]
fn minimal_spec_gets_the_documented_defaults() {
    let s = minimal();
    assert_eq!(s.api.replicas, 3);
    assert_eq!((s.api.uwsgi.processes, s.api.uwsgi.threads), (2, 1));
    assert_eq!(s.scheduler.replicas, 1);
    assert_eq!(s.db_purge.retention_days, 30);
    assert_eq!(s.db_purge.schedule, "1 0 * * *");
    assert!(!s.db_purge.suspend);
    assert_eq!(s.secret_store_ref.name, "openbao-cluster-store");
    assert_eq!(s.secret_store_ref.kind.as_str(), "ClusterSecretStore");
    assert_eq!(s.database.database, "cinder");
    assert_eq!(s.service_user.username, "cinder");
    assert!(validate_cinder("cinder", &s).is_ok());
}

#[test]
fn name_longer_than_43_is_refused() {
    let s = minimal();
    assert!(validate_cinder(&"a".repeat(43), &s).is_ok());
    let err = validate_cinder(&"a".repeat(44), &s).unwrap_err();
    assert!(err.to_string().contains("43"), "{err}");
}

#[test]
fn the_service_user_secret_cannot_be_the_one_the_operator_writes() {
    let mut s = minimal();
    s.service_user.secret_ref.name = "cinder-service-user".into();
    let err = validate_cinder("cinder", &s).unwrap_err();
    assert!(
        err.to_string()
            .contains("spec.serviceUser.secretRef.name \"cinder-service-user\""),
        "{err}"
    );
    // Another Cinder's derived Secret name is not this one's.
    assert!(validate_cinder("other", &s).is_ok());
    // On a target cluster the operator writes its Secret there, not beside the credential one.
    s.target_cluster_ref = Some(serde_norway::from_str("{name: edge}").unwrap());
    assert!(validate_cinder("cinder", &s).is_ok());
}

#[test]
fn the_credential_secrets_cannot_be_the_ones_the_operator_derives() {
    let mut s = minimal();
    s.database.secret_ref.name = "cinder-db-connection".into();
    let err = validate_cinder("cinder", &s).unwrap_err().to_string();
    assert!(
        err.contains("spec.database.secretRef.name \"cinder-db-connection\""),
        "{err}"
    );
    assert!(validate_cinder("other", &s).is_ok());
    let mut s = minimal();
    s.messaging.cluster_ref = None;
    s.messaging.secret_ref = Some(serde_norway::from_str("{name: cinder-transport-url}").unwrap());
    let err = validate_cinder("cinder", &s).unwrap_err().to_string();
    assert!(
        err.contains("spec.messaging.secretRef.name \"cinder-transport-url\""),
        "{err}"
    );
    // On a target cluster the operator writes the derived Secrets there.
    s.target_cluster_ref = Some(serde_norway::from_str("{name: edge}").unwrap());
    assert!(validate_cinder("cinder", &s).is_ok());
}

#[test]
fn image_needs_exactly_one_of_tag_and_digest() {
    let mut s = minimal();
    s.image.digest = Some(format!("sha256:{}", "a".repeat(64)));
    assert!(
        validate_cinder("c", &s)
            .unwrap_err()
            .to_string()
            .contains("not both")
    );
    s.image.tag = None;
    assert!(validate_cinder("c", &s).is_ok());
    s.image.digest = None;
    assert!(validate_cinder("c", &s).is_err());
}

#[test]
fn release_pattern_database_and_messaging_choices() {
    for (r, ok) in [
        ("2026.1", true),
        ("2026.2", true),
        ("2026.3", false),
        ("26.1", false),
        ("2026.1-p1", false),
    ] {
        assert_eq!(is_release(r), ok, "{r}");
    }
    let mut s = minimal();
    s.open_stack_release = "2026.3".into();
    s.database.host = Some("db.example".into());
    s.messaging.cluster_ref = None;
    let err = validate_cinder("c", &s).unwrap_err();
    assert_eq!(err.problems.len(), 3, "{err}");
}

#[test]
fn satellite_needs_exactly_the_block_matching_its_type() {
    let nfs: CinderBackendSpec = serde_norway::from_str(
        "{cinderRef: {name: c}, type: NFS, nfs: {server: nfs.example, path: /export}}",
    )
    .unwrap();
    assert!(validate_satellite(&nfs.satellite).is_ok());
    let mut wrong = nfs.clone();
    wrong.satellite.backend_type = BackendType::Rbd;
    assert!(validate_satellite(&wrong.satellite).is_err());
    let both: CinderBackendSpec = serde_norway::from_str(
        "{cinderRef: {name: c}, type: NFS, nfs: {server: s, path: /e}, rbd: {pool: p, user: u, monitors: [m], keySecretRef: {name: k}}}",
    )
    .unwrap();
    assert!(validate_satellite(&both.satellite).is_err());
    let rbd: CinderBackendSpec =
        serde_norway::from_str("{cinderRef: {name: c}, type: RBD, rbd: {pool: p, user: u, monitors: [m], keySecretRef: {name: k}}}").unwrap();
    assert!(validate_satellite(&rbd.satellite).is_ok());
    assert_eq!(rbd.satellite.rbd.unwrap().cluster_name, "ceph");
}

#[test]
fn unknown_type_is_rejected_when_parsing() {
    let r: Result<CinderBackendSpec, _> =
        serde_norway::from_str("{cinderRef: {name: c}, type: ISCSI}");
    assert!(r.is_err());
}
