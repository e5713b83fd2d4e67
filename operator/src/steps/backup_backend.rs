//! The BackupBackend step: renders the single attached, credential-ready CinderBackupBackend
//! (through [`crate::planning::backend_projection::project_backup_backend`]) into a
//! content-hashed Secret (`{name}-backup-backend-{hash}`) and sweeps the rest (keeping what a
//! live Deployment mounts), under the same never-short-circuit contract as Backends.
//!
//! BackupBackendReady reasons: BackupBackendProjected, NoBackupBackend; WaitingForBackupBackend,
//! MultipleBackupBackends.

use super::children::{ensure_secret, secret};
use super::env::StepEnv;
use super::projection::{
    PROJECTION_BACKUP, PROJECTION_LABEL, attached, credentials_for, sweep_projections,
};
use crate::conditions::{Cond, kind, reason};
use crate::crd::CinderBackupBackend;
use crate::crd::validation::validate_satellite;
use crate::names;
use crate::pipeline::{Doing, ProjectedBackend, StepContext, StepResult};
use crate::planning::backend_projection::project_backup_backend;
use kube::{Client, ResourceExt};

/// Projects the one attached target: `Ok(Ok(summary))`, `Ok(Err(why it waits))`, or an API error.
async fn project_one(
    management: &Client,
    ctx: &StepContext,
    b: &CinderBackupBackend,
) -> Result<Result<ProjectedBackend, String>, kube::Error> {
    let ns = ctx.namespace();
    let bname = b.name_any();
    if let Err(e) = validate_satellite(&b.spec.satellite) {
        return Ok(Err(e.to_string()));
    }
    let key = match credentials_for(
        management,
        ns,
        b.spec.satellite.backend_type,
        b.spec.satellite.rbd.as_ref(),
    )
    .await?
    {
        Ok(k) => k,
        Err(why) => return Ok(Err(why)),
    };
    let projection = match project_backup_backend(
        ctx.name(),
        &bname,
        &b.spec,
        key.as_ref().map(|k| k.expose()),
    ) {
        Ok(p) => p,
        Err(e) => return Ok(Err(e.to_string())),
    };
    let labels = [
        (names::LABEL_BACKEND, bname.as_str()),
        (PROJECTION_LABEL, PROJECTION_BACKUP),
    ];
    let desired = secret(
        &ctx.cinder,
        &projection.secret_name,
        &labels,
        projection.data.into_bytes(),
        true,
    );
    ensure_secret(&ctx.children(management), desired).await?;
    let mut summary = projection.summary;
    summary.deleting = b.metadata.deletion_timestamp.is_some();
    Ok(Ok(summary))
}

/// Runs the step once for one Cinder.
pub async fn run(env: StepEnv, ctx: &mut StepContext) -> StepResult {
    let children = ctx.children(&env.client);
    let ns = ctx.namespace().to_string();
    let cinder_name = ctx.name().to_string();
    let attached: Vec<CinderBackupBackend> = attached(&env.client, &ns, &cinder_name)
        .await
        .doing("listing CinderBackupBackends")?;

    let (condition, projected) = match attached.as_slice() {
        [] => (
            Cond::true_(
                kind::BACKUP_BACKEND_READY,
                reason::NO_BACKUP_BACKEND,
                "no CinderBackupBackend is attached",
            ),
            None,
        ),
        [b] => match project_one(&env.client, ctx, b)
            .await
            .doing(format_args!("projecting {}", b.name_any()))?
        {
            Err(why) => (
                Cond::false_(
                    kind::BACKUP_BACKEND_READY,
                    reason::WAITING_FOR_BACKUP_BACKEND,
                    format!("waiting for {}: {why}", b.name_any()),
                ),
                None,
            ),
            Ok(summary) => (
                Cond::true_(
                    kind::BACKUP_BACKEND_READY,
                    reason::BACKUP_BACKEND_PROJECTED,
                    format!(
                        "{} projected into Secret {}",
                        summary.name, summary.secret_name
                    ),
                ),
                Some(summary),
            ),
        },
        many => (
            Cond::false_(
                kind::BACKUP_BACKEND_READY,
                reason::MULTIPLE_BACKUP_BACKENDS,
                format!(
                    "at most one CinderBackupBackend may be attached; found {}",
                    many.iter()
                        .map(|b| b.name_any())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            ),
            None,
        ),
    };

    let keep = projected.iter().map(|p| p.secret_name.clone()).collect();
    let swept = sweep_projections(&children, &ns, &cinder_name, PROJECTION_BACKUP, keep);
    swept.await.doing("sweeping backup Secrets")?;
    if projected.is_none() {
        ctx.artefacts.backup_backend_held = attached.iter().map(|b| b.name_any()).collect();
    }
    ctx.artefacts.backup_backend = projected;
    ctx.proceed(condition)
}
