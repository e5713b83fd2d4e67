//! The BackupBackend step: renders the single attached, credential-ready CinderBackupBackend
//! (through [`crate::planning::backend_projection::project_backup_backend`]) into a
//! content-hashed Secret (`{name}-backup-backend-{hash}`) and sweeps the rest (keeping what a
//! live Deployment mounts), under the same never-short-circuit contract as Backends.
//!
//! BackupBackendReady reasons: BackupBackendProjected, NoBackupBackend; WaitingForBackupBackend,
//! MultipleBackupBackends.

use crate::children::projection::{attached_to_pass, project, sweep_projections};
use crate::conditions::{Cond, kind, reason};
use crate::context::OperatorContext;
use crate::crd::CinderBackupBackend;
use crate::pipeline::{Doing, ProjectedBackend, StepContext, StepResult};
use kube::ResourceExt;
use std::sync::Arc;

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
    let attached: Vec<CinderBackupBackend> = attached_to_pass(&op.client, ctx).await?;

    let (condition, projected) = match attached.as_slice() {
        [] => (none_attached(), None),
        [b] => match project(&op.client, ctx, b)
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

    sweep_projections::<CinderBackupBackend>(&op.client, ctx, projected.as_slice())
        .await
        .doing("sweeping backup Secrets")?;
    if projected.is_none() {
        ctx.artefacts.backup_backend_held = attached.iter().map(|b| b.name_any()).collect();
    }
    ctx.artefacts.backup_backend = projected;
    ctx.proceed(condition)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::planning::backend_projection::ProjectionError;

    #[test]
    fn an_rbd_target_without_a_usable_key_waits() {
        let cond = waiting_for("ceph-b", &ProjectionError::BadKey.to_string());
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
