//! The BackupService step: ensures the `{name}-backup` Deployment when a backup target is
//! projected, or deletes it when no target is attached (BackupServiceReady=True /
//! BackupNotConfigured); an attached target that is not projected this pass (waiting for its
//! credentials) leaves the running Deployment as it is (WaitingForBackupService). The
//! backup service reads source volumes itself, so it mounts every NFS volume backend's export
//! and projects every RBD volume backend's keyring besides the backup target's Secret. It
//! requeues every 10 s until its rollout converged (WaitingForBackupService).

use super::env::StepEnv;
use super::workloads::{
    ExtraVolume, WorkloadCondition, WorkloadSpec, attached_backends, converge, delete_deployment,
    desired_deployment,
};
use crate::conditions::{Cond, kind, reason};
use crate::crd::BackendType;
use crate::names::{self, Component};
use crate::pipeline::{Doing, StepContext, StepResult};
use crate::planning::backend_projection::{BACKUP_MOUNT_DIR, backend_mount_dir};

/// Runs the step once for one Cinder.
pub async fn run(env: StepEnv, ctx: &mut StepContext) -> StepResult {
    let children = ctx.children(&env.client);
    let name = ctx.name().to_string();
    let ns = ctx.namespace().to_string();
    let deployment_name = names::backup_deployment(&name);
    let Some(target) = ctx.artefacts.backup_backend.clone() else {
        if !ctx.artefacts.backup_backend_held.is_empty() {
            // A target that only waits this pass keeps the running backup service: only a
            // target that left takes it away.
            let held = ctx.artefacts.backup_backend_held.join(", ");
            return ctx.proceed(WorkloadCondition::BACKUP_SERVICE.waiting(format!(
                "backup target {held} is not projected; Deployment {deployment_name} is kept as it is"
            )));
        }
        delete_deployment(&children, &ns, &deployment_name)
            .await
            .doing(format_args!("deleting Deployment {deployment_name}"))?;
        return ctx.proceed(Cond::true_(
            kind::BACKUP_SERVICE_READY,
            reason::BACKUP_NOT_CONFIGURED,
            "no backup target is projected",
        ));
    };
    let Some(config_map) = ctx.artefacts.config_map_name.clone() else {
        return WorkloadCondition::BACKUP_SERVICE.await_config(ctx);
    };
    let specs = attached_backends(&env.client, &ns, &name)
        .await
        .doing("listing CinderBackends")?;
    let mut extra_volumes = vec![ExtraVolume::secret(
        "backup-target",
        &target.secret_name,
        BACKUP_MOUNT_DIR.to_string(),
    )];
    for b in ctx.artefacts.backends.iter().filter(|b| !b.deleting) {
        match b.backend_type {
            Some(BackendType::Rbd) => extra_volumes.push(ExtraVolume::secret(
                &format!("backend-{}", b.name),
                &b.secret_name,
                backend_mount_dir(&b.name),
            )),
            Some(BackendType::Nfs) => {
                if let Some(nfs) = specs
                    .get(&b.name)
                    .and_then(|s| s.spec.satellite.nfs.as_ref())
                {
                    extra_volumes.push(ExtraVolume::nfs(&format!("nfs-{}", b.name), &b.name, nfs));
                }
            }
            None => {}
        }
    }
    let spec = WorkloadSpec {
        extra_volumes,
        ..WorkloadSpec::new(
            Component::Backup,
            &deployment_name,
            1,
            &["cinder-backup", "--config-dir", BACKUP_MOUNT_DIR],
            config_map,
            &ctx.artefacts,
            ctx.status.installed_release.as_deref(),
        )
    };
    let desired = desired_deployment(&ctx.cinder, &spec);
    let ready = format!(
        "Deployment {deployment_name} is ready (backup target {})",
        target.name
    );
    converge(
        ctx,
        &children,
        &desired,
        &WorkloadCondition::BACKUP_SERVICE,
        ready,
    )
    .await
}
