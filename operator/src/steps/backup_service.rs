//! The BackupService step: ensures the `{name}-backup` Deployment when a backup target is
//! projected, or deletes it when no target is attached (BackupServiceReady=True /
//! BackupNotConfigured); an attached target that is not projected this pass (waiting for its
//! credentials) leaves the running Deployment as it is (WaitingForBackupService), and during an
//! upgrade's RollingUpdate holds the upgrade while that Deployment runs another image. The
//! backup service reads source volumes itself, so it mounts every NFS volume backend's export
//! and projects every RBD volume backend's keyring besides the backup target's Secret. It
//! requeues every 10 s until its rollout converged (WaitingForBackupService).

use crate::conditions::{Cond, kind, reason};
use crate::context::OperatorContext;
use crate::crd::{BackendType, CinderBackend, UpgradePhase};
use crate::names::{self, Component};
use crate::pipeline::{Doing, ProjectedBackend, StepContext, StepResult};
use crate::planning::backend_projection::{BACKUP_MOUNT_DIR, backend_mount_dir};
use crate::requeue::REQUEUE_DEPLOYMENT_POLLING;
use crate::workloads::{
    ExtraVolume, WorkloadCondition, WorkloadSpec, attached_backends, converge, delete_deployment,
    desired_deployment, template_image,
};
use k8s_openapi::api::apps::v1::Deployment;
use kube::Api;
use std::collections::BTreeMap;
use std::sync::Arc;

/// The backup service's command line: `--config-dir` is the backup target's Secret (its
/// `backup.conf` fragment).
const BACKUP_COMMAND: [&str; 3] = ["cinder-backup", "--config-dir", BACKUP_MOUNT_DIR];

/// BackupServiceReady while the attached target(s) `held` are not projected: the Deployment
/// `deployment_name` is left as it runs.
fn kept_as_it_is(held: &[String], deployment_name: &str) -> Cond {
    let held = held.join(", ");
    WorkloadCondition::BACKUP_SERVICE.waiting(format!(
        "backup target {held} is not projected; Deployment {deployment_name} is kept as it is"
    ))
}

/// WaitingForBackupService when, during an upgrade's RollingUpdate (`rolling`), the backup
/// Deployment `running` kept for the unprojected targets `held` does not run `image`, the one
/// the upgrade rolls onto: the step cannot roll it, and the upgrade must not contract under it.
fn stale_during_upgrade(
    running: &Deployment,
    image: &str,
    rolling: bool,
    held: &[String],
) -> Option<Cond> {
    let runs = template_image(running).unwrap_or_default();
    (rolling && runs != image).then(|| {
        WorkloadCondition::BACKUP_SERVICE.waiting(format!(
            "Deployment {} runs {runs}, not {image}, and backup target {} is not projected to \
             roll it",
            running.metadata.name.as_deref().unwrap_or_default(),
            held.join(", ")
        ))
    })
}

/// BackupServiceReady with no backup target attached (the Deployment is deleted).
fn not_configured() -> Cond {
    Cond::true_(
        kind::BACKUP_SERVICE_READY,
        reason::BACKUP_NOT_CONFIGURED,
        "no backup target is projected",
    )
}

/// The backup service's volumes besides its config: the projected `target`'s Secret at
/// [`BACKUP_MOUNT_DIR`], and of every volume backend in `backends` not being deleted, an RBD
/// backend's Secret (its keyring) or an NFS backend's export (from its spec in `specs`; none
/// without one).
fn backup_volumes(
    target: &ProjectedBackend,
    backends: &[ProjectedBackend],
    specs: &BTreeMap<String, CinderBackend>,
) -> Vec<ExtraVolume> {
    let mut extra_volumes = vec![ExtraVolume::secret(
        "backup-target",
        &target.secret_name,
        BACKUP_MOUNT_DIR.to_string(),
    )];
    for b in backends.iter().filter(|b| !b.deleting) {
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
    extra_volumes
}

/// The backup Deployment of `cinder` for the projected `target` (reading the volume backends of
/// `artefacts`, NFS exports from `specs`), mounting the config ConfigMap `config_map`.
pub(crate) fn backup_deployment(
    cinder: &crate::crd::Cinder,
    target: &ProjectedBackend,
    specs: &BTreeMap<String, CinderBackend>,
    config_map: String,
    artefacts: &crate::pipeline::Artefacts,
    installed_release: Option<&str>,
) -> Deployment {
    let name = cinder.metadata.name.as_deref().unwrap_or_default();
    let spec = WorkloadSpec {
        extra_volumes: backup_volumes(target, &artefacts.backends, specs),
        ..WorkloadSpec::new(
            Component::Backup,
            &names::backup_deployment(name),
            1,
            &BACKUP_COMMAND,
            config_map,
            artefacts,
            installed_release,
        )
    };
    desired_deployment(cinder, &spec)
}

/// Runs the step once for one Cinder.
pub(crate) async fn run(op: Arc<OperatorContext>, ctx: &mut StepContext) -> StepResult {
    let children = ctx.children(&op.client);
    let name = ctx.name().to_string();
    let ns = ctx.namespace().to_string();
    let deployment_name = names::backup_deployment(&name);
    let Some(target) = ctx.artefacts.backup_backend.clone() else {
        if !ctx.artefacts.backup_backend_held.is_empty() {
            // A target that only waits this pass keeps the running backup service: only a
            // target that left takes it away.
            let held = ctx.artefacts.backup_backend_held.clone();
            let api: Api<Deployment> = Api::namespaced(children.clone(), &ns);
            let running = ctx
                .children_reads()
                .get_opt(&api, &deployment_name)
                .await
                .doing(format_args!("reading Deployment {deployment_name}"))?;
            let rolling = ctx.status.upgrade_phase == Some(UpgradePhase::RollingUpdate);
            let image = ctx.cinder.spec.image.reference();
            if let Some(c) = running
                .as_ref()
                .and_then(|d| stale_during_upgrade(d, &image, rolling, &held))
            {
                return ctx.requeue(c, REQUEUE_DEPLOYMENT_POLLING);
            }
            return ctx.proceed(kept_as_it_is(&held, &deployment_name));
        }
        delete_deployment(&children, ctx.children_reads(), &ns, &deployment_name)
            .await
            .doing(format_args!("deleting Deployment {deployment_name}"))?;
        return ctx.proceed(not_configured());
    };
    let Some(config_map) = ctx.artefacts.config_map_name.clone() else {
        return WorkloadCondition::BACKUP_SERVICE.await_config(ctx);
    };
    let specs = attached_backends(&op.client, ctx.management_reads(), &ns, &name)
        .await
        .doing("listing CinderBackends")?;
    let desired = backup_deployment(
        &ctx.cinder,
        &target,
        &specs,
        config_map,
        &ctx.artefacts,
        ctx.status.installed_release.as_deref(),
    );
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pipeline::Artefacts;
    use crate::workloads::desired_deployment;

    fn projected(name: &str, backend_type: BackendType, deleting: bool) -> ProjectedBackend {
        ProjectedBackend {
            name: name.into(),
            backend_type: Some(backend_type),
            secret_name: format!("c-backend-{name}-0123"),
            deleting,
            ..Default::default()
        }
    }

    fn nfs_spec(name: &str) -> (String, CinderBackend) {
        let spec = serde_norway::from_str(
            "{cinderRef: {name: c}, type: NFS, nfs: {server: 10.0.0.5, path: /export}}",
        )
        .expect("a CinderBackend spec");
        (name.to_string(), CinderBackend::new(name, spec))
    }

    /// `(volume name, mount path)` of each volume.
    fn mounts(volumes: &[ExtraVolume]) -> Vec<(String, String)> {
        volumes
            .iter()
            .map(|v| (v.volume.name.clone(), v.mount_path.clone()))
            .collect()
    }

    fn secret_of(v: &ExtraVolume) -> Option<String> {
        let sources = v.volume.projected.as_ref()?.sources.as_ref()?;
        sources[0].secret.as_ref().map(|s| s.name.clone())
    }

    #[test]
    fn a_kept_backup_service_on_the_old_image_holds_the_rolling_update() {
        let mut old = crate::test_fixtures::cinder();
        old.spec.image.tag = Some("2025.2".into());
        let spec = WorkloadSpec::new(
            Component::Backup,
            "c-backup",
            1,
            &BACKUP_COMMAND,
            "c-config-1".into(),
            &Artefacts::default(),
            Some("2025.2"),
        );
        let running = desired_deployment(&old, &spec);
        let held = ["b".to_string()];
        assert!(stale_during_upgrade(&running, "r:2026.1", false, &held).is_none());
        assert!(stale_during_upgrade(&running, "r:2025.2", true, &held).is_none());
        let c = stale_during_upgrade(&running, "r:2026.1", true, &held).expect("waits");
        assert_eq!(
            (c.status, c.reason),
            (false, reason::WAITING_FOR_BACKUP_SERVICE)
        );
        assert!(
            c.message.contains("runs r:2025.2, not r:2026.1"),
            "{}",
            c.message
        );
        assert!(c.message.contains("backup target b"), "{}", c.message);
    }

    #[test]
    fn the_backup_service_mounts_its_target_and_the_volume_backends_it_reads() {
        let target = ProjectedBackend {
            name: "b".into(),
            secret_name: "c-backup-backend-4567".into(),
            ..Default::default()
        };
        let backends = [
            projected("ceph1", BackendType::Rbd, false),
            projected("nfs1", BackendType::Nfs, false),
            // No spec read for it: no export to mount.
            projected("nfs2", BackendType::Nfs, false),
            projected("gone", BackendType::Rbd, true),
        ];
        let specs: BTreeMap<String, CinderBackend> = [nfs_spec("nfs1")].into();
        let volumes = backup_volumes(&target, &backends, &specs);
        assert_eq!(
            mounts(&volumes),
            [
                ("backup-target".into(), BACKUP_MOUNT_DIR.into()),
                ("backend-ceph1".into(), "/etc/cinder-backends/ceph1".into()),
                ("nfs-nfs1".into(), "/var/lib/cinder/mnt/nfs1".into()),
            ]
        );
        assert_eq!(
            secret_of(&volumes[0]).as_deref(),
            Some("c-backup-backend-4567")
        );
        assert_eq!(
            secret_of(&volumes[1]).as_deref(),
            Some("c-backend-ceph1-0123")
        );
        let nfs = volumes[2].volume.nfs.as_ref().unwrap();
        assert_eq!(
            (nfs.server.as_str(), nfs.path.as_str()),
            ("10.0.0.5", "/export")
        );
        assert_eq!(
            secret_of(&volumes[2]),
            None,
            "an NFS backend's Secret is not mounted"
        );
    }

    #[test]
    fn the_backup_deployment_runs_cinder_backup_on_the_target_fragment() {
        let c = crate::test_fixtures::cinder();
        let target = projected("b", BackendType::Nfs, false);
        let spec = WorkloadSpec {
            extra_volumes: backup_volumes(&target, &[], &BTreeMap::new()),
            ..WorkloadSpec::new(
                Component::Backup,
                &names::backup_deployment("c"),
                1,
                &BACKUP_COMMAND,
                "c-config-89ab".into(),
                &Artefacts::default(),
                Some("2026.1"),
            )
        };
        let d = desired_deployment(&c, &spec);
        assert_eq!(d.metadata.name.as_deref(), Some("c-backup"));
        assert_eq!(d.spec.replicas, Some(1));
        let pod = d.spec.template.spec.unwrap();
        assert_eq!(
            pod.containers[0].command.as_deref().unwrap(),
            [
                "cinder-backup",
                "--config-dir",
                "/etc/cinder-backup-backend"
            ]
        );
    }

    #[test]
    fn a_waiting_target_keeps_the_service_and_no_target_removes_it() {
        let kept = kept_as_it_is(&["b1".to_string(), "b2".to_string()], "c-backup");
        assert_eq!(
            (kept.type_, kept.status, kept.reason),
            (
                kind::BACKUP_SERVICE_READY,
                false,
                reason::WAITING_FOR_BACKUP_SERVICE
            )
        );
        assert_eq!(
            kept.message,
            "backup target b1, b2 is not projected; Deployment c-backup is kept as it is"
        );
        let none = not_configured();
        assert_eq!(
            (none.type_, none.status, none.reason),
            (
                kind::BACKUP_SERVICE_READY,
                true,
                reason::BACKUP_NOT_CONFIGURED
            )
        );
    }
}
