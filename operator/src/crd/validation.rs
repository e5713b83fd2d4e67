//! The checks the operator applies to a spec itself, as a second line behind the CRD schema and
//! its CEL rules: an API server that does not evaluate CEL, or an object stored before a rule
//! existed, may hold what the schema forbids. A failure is reported as
//! `Ready=False` with reason [`crate::conditions::reason::INVALID_SPEC`] and nothing is created.

use super::cinder::CinderSpec;
use super::common::{BackendType, NfsSpec, RbdSpec};
use super::satellite::SatelliteSpec;
use crate::names::{
    MAX_CINDER_NAME_LEN, db_connection_secret, service_user_secret, transport_url_secret,
};

/// Everything wrong with one spec, one line per problem.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("invalid spec: {}", .problems.join("; "))]
pub struct SpecError {
    pub problems: Vec<String>,
}

fn finish(problems: Vec<String>) -> Result<(), SpecError> {
    if problems.is_empty() {
        Ok(())
    } else {
        Err(SpecError { problems })
    }
}

/// True when `s` is `YYYY.1` or `YYYY.2`.
pub fn is_release(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() == 6
        && b[..4].iter().all(u8::is_ascii_digit)
        && b[4] == b'.'
        && (b[5] == b'1' || b[5] == b'2')
}

/// Validates a Cinder's name and spec.
pub fn validate_cinder(name: &str, spec: &CinderSpec) -> Result<(), SpecError> {
    let mut p = Vec::new();
    if name.len() > MAX_CINDER_NAME_LEN {
        p.push(format!(
            "metadata.name must be at most {MAX_CINDER_NAME_LEN} characters (has {})",
            name.len()
        ));
    }
    if !is_release(&spec.open_stack_release) {
        p.push(format!(
            "spec.openStackRelease {:?} must match ^\\d{{4}}\\.[12]$",
            spec.open_stack_release
        ));
    }
    match (&spec.image.tag, &spec.image.digest) {
        (Some(_), Some(_)) => {
            p.push("spec.image must set exactly one of tag and digest, not both".into())
        }
        (None, None) => p.push("spec.image must set exactly one of tag and digest".into()),
        _ => {}
    }
    if spec.image.repository.is_empty() {
        p.push("spec.image.repository must not be empty".into());
    }
    match (&spec.database.cluster_ref, &spec.database.host) {
        (Some(_), Some(_)) => {
            p.push("spec.database must set exactly one of clusterRef and host, not both".into())
        }
        (None, None) => p.push("spec.database must set exactly one of clusterRef and host".into()),
        _ => {}
    }
    if let Some(port) = spec.database.port
        && !(1..=65535).contains(&port)
    {
        p.push(format!("spec.database.port {port} is out of range 1-65535"));
    }
    match (&spec.messaging.cluster_ref, &spec.messaging.secret_ref) {
        (Some(_), Some(_)) => p.push(
            "spec.messaging must set exactly one of clusterRef and secretRef, not both".into(),
        ),
        (None, None) => {
            p.push("spec.messaging must set exactly one of clusterRef and secretRef".into())
        }
        _ => {}
    }
    // The operator writes `{name}-service-user` beside the workloads: on this cluster, that Secret
    // and the credential Secret would be one, and the operator's copy would overwrite the user's.
    let derived = service_user_secret(name);
    if spec.target_cluster_ref.is_none() && spec.service_user.secret_ref.name == derived {
        p.push(format!(
            "spec.serviceUser.secretRef.name {derived:?} names the Secret the operator writes for \
             this Cinder; name the Secret that holds the service user's password"
        ));
    }
    // `{name}-db-connection` and `{name}-transport-url` are written beside the workloads: on this
    // cluster, where the database and messaging credential Secrets are read, naming one of them
    // as the credential Secret would have the operator overwrite the user's credentials.
    let same_cluster = spec.target_cluster_ref.is_none();
    for (field, given, derived) in [
        (
            "spec.database.secretRef.name",
            Some(spec.database.secret_ref.name.as_str()),
            db_connection_secret(name),
        ),
        (
            "spec.messaging.secretRef.name",
            spec.messaging.secret_ref.as_ref().map(|r| r.name.as_str()),
            transport_url_secret(name),
        ),
    ] {
        if same_cluster && given == Some(derived.as_str()) {
            p.push(format!(
                "{field} {derived:?} names the Secret the operator writes for this Cinder; name \
                 the Secret that holds the credentials"
            ));
        }
    }
    if spec.api.replicas < 0 || spec.scheduler.replicas < 0 {
        p.push("replica counts must not be negative".into());
    }
    if spec.api.uwsgi.processes < 1 || spec.api.uwsgi.threads < 1 {
        p.push("spec.api.uwsgi processes and threads must be at least 1".into());
    }
    if spec.db_purge.retention_days < 1 {
        p.push("spec.dbPurge.retentionDays must be at least 1".into());
    }
    if spec.db_purge.schedule.split_whitespace().count() != 5 {
        p.push(format!(
            "spec.dbPurge.schedule {:?} must have five fields",
            spec.db_purge.schedule
        ));
    }
    if let Some(a) = &spec.autoscaling {
        if a.min_replicas < 1 || a.max_replicas < a.min_replicas {
            p.push("spec.autoscaling needs 1 <= minReplicas <= maxReplicas".into());
        }
        if !(1..=100).contains(&a.target_cpu_utilization) {
            p.push("spec.autoscaling.targetCPUUtilization must be within 1-100".into());
        }
    }
    finish(p)
}

fn validate_storage(
    backend_type: BackendType,
    nfs: Option<&NfsSpec>,
    rbd: Option<&RbdSpec>,
    p: &mut Vec<String>,
) {
    match (backend_type, nfs, rbd) {
        (BackendType::Nfs, Some(n), None) => {
            if n.server.is_empty() || !n.path.starts_with('/') {
                p.push("spec.nfs needs a server and an absolute path".into());
            }
        }
        (BackendType::Rbd, None, Some(r)) => {
            if r.pool.is_empty() || r.user.is_empty() || r.monitors.is_empty() {
                p.push("spec.rbd needs pool, user and at least one monitor".into());
            }
        }
        (t, _, _) => p.push(format!(
            "type {} requires exactly the {} block",
            t.as_str(),
            t.as_str().to_lowercase()
        )),
    }
}

/// Validates the parent and storage fields of a CinderBackend or CinderBackupBackend spec.
pub fn validate_satellite(spec: &SatelliteSpec) -> Result<(), SpecError> {
    let mut p = Vec::new();
    validate_storage(
        spec.backend_type,
        spec.nfs.as_ref(),
        spec.rbd.as_ref(),
        &mut p,
    );
    finish(p)
}
