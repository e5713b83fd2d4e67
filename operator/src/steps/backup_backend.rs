//! The BackupBackend step: renders the single attached, credential-ready CinderBackupBackend
//! (through [`crate::planning::backend_projection::project_backup_backend`]) into a
//! content-hashed Secret (`{name}-backup-backend-{hash}`) and sweeps the rest (keeping what a
//! live Deployment mounts), under the same never-short-circuit contract as Backends.
//!
//! BackupBackendReady reasons: BackupBackendProjected, NoBackupBackend; WaitingForBackupBackend,
//! MultipleBackupBackends.

use crate::children::projection::{
    PROJECTION_BACKUP, PROJECTION_LABEL, attached, credentials_for, sweep_projections,
};
use crate::children::{ensure_secret, secret};
use crate::conditions::{Cond, kind, reason};
use crate::context::OperatorContext;
use crate::crd::validation::validate_satellite;
use crate::crd::{Cinder, CinderBackupBackend};
use crate::names;
use crate::pipeline::{Doing, ProjectedBackend, StepContext, StepResult};
use crate::planning::backend_projection::{ProjectionError, project_backup_backend};
use k8s_openapi::api::core::v1::Secret;
use kube::{Client, ResourceExt};
use std::sync::Arc;

/// Projects the one attached target: `Ok(Ok(summary))`, `Ok(Err(why it waits))`, or an API error.
async fn project_one(
    management: &Client,
    ctx: &StepContext,
    b: &CinderBackupBackend,
) -> Result<Result<ProjectedBackend, String>, kube::Error> {
    let ns = ctx.namespace();
    if let Err(e) = validate_satellite(&b.spec.satellite) {
        return Ok(Err(e.to_string()));
    }
    let key = match credentials_for(
        management,
        ctx.management_reads(),
        ns,
        b.spec.satellite.backend_type,
        b.spec.satellite.rbd.as_ref(),
    )
    .await?
    {
        Ok(k) => k,
        Err(why) => return Ok(Err(why)),
    };
    let (desired, summary) = match projection_of(&ctx.cinder, b, key.as_ref().map(|k| k.expose())) {
        Ok(p) => p,
        Err(e) => return Ok(Err(e.to_string())),
    };
    ensure_secret(&ctx.children(management), ctx.children_reads(), desired).await?;
    Ok(Ok(summary))
}

/// The projection Secret of the attached backup target `b` of `cinder` (`key`: its cephx key,
/// for RBD) and the summary later steps use, marked deleting while the CinderBackupBackend is.
fn projection_of(
    cinder: &Cinder,
    b: &CinderBackupBackend,
    key: Option<&str>,
) -> Result<(Secret, ProjectedBackend), ProjectionError> {
    let cinder_name = cinder.metadata.name.as_deref().unwrap_or_default();
    let bname = b.name_any();
    let projection = project_backup_backend(cinder_name, &bname, &b.spec, key)?;
    let labels = [
        (names::LABEL_BACKEND, bname.as_str()),
        (PROJECTION_LABEL, PROJECTION_BACKUP),
    ];
    let desired = secret(
        cinder,
        &projection.secret_name,
        &labels,
        projection.data.into_bytes(),
        true,
    );
    let mut summary = projection.summary;
    summary.deleting = b.metadata.deletion_timestamp.is_some();
    Ok((desired, summary))
}

/// BackupBackendReady with no target attached.
fn none_attached() -> Cond {
    Cond::true_(
        kind::BACKUP_BACKEND_READY,
        reason::NO_BACKUP_BACKEND,
        "no CinderBackupBackend is attached",
    )
}

/// BackupBackendReady while the one attached target `name` waits (`why`).
fn waiting_for(name: &str, why: &str) -> Cond {
    Cond::false_(
        kind::BACKUP_BACKEND_READY,
        reason::WAITING_FOR_BACKUP_BACKEND,
        format!("waiting for {name}: {why}"),
    )
}

/// BackupBackendReady once the target is projected as `summary` says.
fn projected_as(summary: &ProjectedBackend) -> Cond {
    Cond::true_(
        kind::BACKUP_BACKEND_READY,
        reason::BACKUP_BACKEND_PROJECTED,
        format!(
            "{} projected into Secret {}",
            summary.name, summary.secret_name
        ),
    )
}

/// BackupBackendReady with more than one target attached (`names`, in order): none is projected.
fn more_than_one(names: &[String]) -> Cond {
    Cond::false_(
        kind::BACKUP_BACKEND_READY,
        reason::MULTIPLE_BACKUP_BACKENDS,
        format!(
            "at most one CinderBackupBackend may be attached; found {}",
            names.join(", ")
        ),
    )
}

/// Runs the step once for one Cinder.
pub(crate) async fn run(op: Arc<OperatorContext>, ctx: &mut StepContext) -> StepResult {
    let children = ctx.children(&op.client);
    let ns = ctx.namespace().to_string();
    let cinder_name = ctx.name().to_string();
    let attached: Vec<CinderBackupBackend> =
        attached(&op.client, ctx.management_reads(), &ns, &cinder_name)
            .await
            .doing("listing CinderBackupBackends")?;

    let (condition, projected) = match attached.as_slice() {
        [] => (none_attached(), None),
        [b] => match project_one(&op.client, ctx, b)
            .await
            .doing(format_args!("projecting {}", b.name_any()))?
        {
            Err(why) => (waiting_for(&b.name_any(), &why), None),
            Ok(summary) => (projected_as(&summary), Some(summary)),
        },
        many => {
            let names: Vec<String> = many.iter().map(|b| b.name_any()).collect();
            (more_than_one(&names), None)
        }
    };

    let keep = projected.iter().map(|p| p.secret_name.clone()).collect();
    let swept = sweep_projections(
        &children,
        ctx.children_reads(),
        &ns,
        &cinder_name,
        PROJECTION_BACKUP,
        keep,
    );
    swept.await.doing("sweeping backup Secrets")?;
    if projected.is_none() {
        ctx.artefacts.backup_backend_held = attached.iter().map(|b| b.name_any()).collect();
    }
    ctx.artefacts.backup_backend = projected;
    ctx.proceed(condition)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::planning::backend_projection::BACKUP_CONF_KEY;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    const NFS: &str = "{cinderRef: {name: c}, type: NFS, nfs: {server: 10.0.0.9, path: /backups}}";
    const RBD: &str = "{cinderRef: {name: c}, type: RBD, rbd: {pool: backups, user: cinder, \
                       monitors: ['10.1.0.1:6789'], keySecretRef: {name: ceph-key}}}";

    fn target(name: &str, spec: &str) -> CinderBackupBackend {
        CinderBackupBackend::new(
            name,
            serde_norway::from_str(spec).expect("a CinderBackupBackend spec"),
        )
    }

    #[test]
    fn the_target_is_projected_into_a_backup_labelled_immutable_secret() {
        let c = crate::test_fixtures::cinder();
        let (secret, summary) = projection_of(&c, &target("nfs-b", NFS), None).unwrap();
        let name = secret.metadata.name.clone().unwrap();
        assert!(name.starts_with("c-backup-backend-"), "{name}");
        assert_eq!(
            summary.secret_name, name,
            "the artefact names the Secret written"
        );
        assert_eq!(summary.name, "nfs-b");
        assert!(!summary.deleting);
        let labels = secret.metadata.labels.unwrap();
        assert_eq!(labels[names::LABEL_BACKEND], "nfs-b");
        assert_eq!(labels[PROJECTION_LABEL], PROJECTION_BACKUP);
        assert_eq!(secret.immutable, Some(true));
        assert_eq!(secret.metadata.owner_references.unwrap()[0].uid, "u");
        let conf = String::from_utf8(secret.data.unwrap()[BACKUP_CONF_KEY].0.clone()).unwrap();
        assert!(conf.contains("backup_share = 10.0.0.9:/backups"), "{conf}");

        let mut deleting = target("nfs-b", NFS);
        deleting.metadata.deletion_timestamp = Some(Time(k8s_openapi::jiff::Timestamp::now()));
        assert!(projection_of(&c, &deleting, None).unwrap().1.deleting);
    }

    #[test]
    fn an_rbd_target_without_a_usable_key_waits() {
        let c = crate::test_fixtures::cinder();
        let err = projection_of(&c, &target("ceph-b", RBD), None).unwrap_err();
        assert_eq!(err, ProjectionError::BadKey);
        let cond = waiting_for("ceph-b", &err.to_string());
        assert_eq!(
            (cond.type_, cond.status, cond.reason),
            (
                kind::BACKUP_BACKEND_READY,
                false,
                reason::WAITING_FOR_BACKUP_BACKEND
            )
        );
        assert_eq!(
            cond.message,
            "waiting for ceph-b: the RBD key Secret has no usable key (missing, empty or with a control character)"
        );
    }

    #[test]
    fn backup_backend_ready_for_none_one_and_several_targets() {
        let none = none_attached();
        assert_eq!(
            (none.status, none.reason),
            (true, reason::NO_BACKUP_BACKEND)
        );
        let one = projected_as(&ProjectedBackend {
            name: "b".into(),
            secret_name: "c-backup-backend-0123".into(),
            ..Default::default()
        });
        assert_eq!(
            (one.status, one.reason),
            (true, reason::BACKUP_BACKEND_PROJECTED)
        );
        assert_eq!(one.message, "b projected into Secret c-backup-backend-0123");
        let many = more_than_one(&["a".to_string(), "b".to_string()]);
        assert_eq!(
            (many.status, many.reason),
            (false, reason::MULTIPLE_BACKUP_BACKENDS)
        );
        assert_eq!(
            many.message,
            "at most one CinderBackupBackend may be attached; found a, b"
        );
    }
}
