//! The VolumeServices step: one `{name}-volume-{backend}` Deployment per projected backend
//! (replicas 1, strategy Recreate, host `<cinder>@<backend>`, the backend's projection Secret
//! mounted — the RBD keyring with it — and, for NFS, the export as an nfs volume), reported in
//! `status.volumeServices`. A pass plans the desired set ([`plan_volume_services`], pure), applies
//! it (creating, replacing or deleting one backend's Deployment under that backend's device lock,
//! at High priority, a backend change; DeviceBusy requeues after its retry_after), then detaches deleted backends
//! one per pass ([`detach`]). Only a backend that left (no CinderBackend names this Cinder under
//! its name) loses its Deployment outside the detach; a backend that is attached but not
//! projected this pass (its key Secret missing, its spec invalid) keeps its Deployment untouched.
//! A rollout counts as converged only on a live object carrying the desired spec hash
//! ([`rolled_out`]); during an upgrade's RollingUpdate a kept Deployment must also run the image
//! the upgrade rolls onto ([`held_pending`]), so the upgrade never contracts under it.
//! AllVolumeServicesReady; NoBackends / WaitingForVolumeServices / ServiceRemoveJobFailed;
//! requeues every 10 s until every rollout converged.

pub mod detach;

use crate::children::list_children;
use crate::conditions::{Cond, kind, reason};
use crate::context::OperatorContext;
use crate::crd::{CinderBackend, UpgradePhase, VolumeServiceStatus};
use crate::metrics::JobKind;
use crate::names::{self, Component};
use crate::pipeline::{Doing, ProjectedBackend, StepContext, StepResult};
use crate::requeue::REQUEUE_DEPLOYMENT_POLLING;
use crate::workloads::readiness::not_ready_detail;
use crate::workloads::{
    DEVICE_ANNOTATION, ENV_HOST, HOST_ANNOTATION, JobReporting, WorkloadCondition, WorkloadSpec,
    attached_backends, backend_volumes, converged, delete_deployment, desired_deployment,
    ensure_deployment, needs_write, rolled_out, rolled_out_unready, template_image,
};
use cinder_lease::devices::BACKEND_CHANGE_PRIORITY;
use detach::{DetachOutcome, Locked, backend_device, detach_pass, lock_backend, service_id};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::EnvVar;
use kube::{Api, Client, ResourceExt};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

/// What applying one backend's change came to.
enum Applied {
    Done,
    Busy(Duration),
}

/// Runs `write` (a create/replace/delete of one backend's Deployment) under the backend's
/// device lock together with its volume service, at [`BACKEND_CHANGE_PRIORITY`] (High: the
/// highest, so a retry after DeviceBusy has nothing to be raised to).
async fn under_backend_lock<F, Fut>(
    op: &OperatorContext,
    device: &str,
    service: &str,
    write: F,
) -> Result<Applied, String>
where
    F: FnOnce() -> Fut,
    Fut: std::future::Future<Output = Result<(), kube::Error>>,
{
    match lock_backend(&op.device_locks, device, service, BACKEND_CHANGE_PRIORITY).await? {
        Locked::Busy(after) => Ok(Applied::Busy(after)),
        Locked::Guard(guard) => {
            let result = write().await;
            (*guard).release().await;
            result.map(|()| Applied::Done).map_err(|e| e.to_string())
        }
    }
}

/// Whether CinderBackend `backend` exists and is not being deleted (read live).
async fn still_attached(management: &Client, ns: &str, backend: &str) -> Result<bool, kube::Error> {
    let api: Api<CinderBackend> = Api::namespaced(management.clone(), ns);
    Ok(api
        .get_opt(backend)
        .await?
        .is_some_and(|b| b.metadata.deletion_timestamp.is_none()))
}

fn backend_label(d: &Deployment) -> Option<&str> {
    d.metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(names::LABEL_BACKEND))
        .map(String::as_str)
}

/// The desired volume service of one backend.
pub(crate) struct VolumeWorkload {
    pub(crate) spec: WorkloadSpec,
    /// The device the backend's writes lock.
    device: String,
    /// The `host` its cinder-volume registers as.
    host: String,
}

/// The volume service of backend `b` of the Cinder `cinder`: one replica replaced with
/// Recreate (a single writer per backend), the backend's config directory and volumes, annotated
/// with its device and host.
pub(crate) fn volume_workload(
    cinder: &str,
    b: &ProjectedBackend,
    spec_obj: Option<&CinderBackend>,
    config_map: &str,
    ctx: &StepContext,
) -> VolumeWorkload {
    let host = names::volume_service_host(cinder, &b.name);
    let device = spec_obj.map(backend_device).unwrap_or_default();
    let spec = WorkloadSpec {
        extra_env: vec![EnvVar {
            name: ENV_HOST.to_string(),
            value: Some(cinder.to_string()),
            ..Default::default()
        }],
        extra_volumes: backend_volumes(b, spec_obj),
        extra_labels: vec![(names::LABEL_BACKEND.to_string(), b.name.clone())],
        object_annotations: [
            (DEVICE_ANNOTATION.to_string(), device.clone()),
            (HOST_ANNOTATION.to_string(), host.clone()),
        ]
        .into(),
        ..WorkloadSpec::new(
            Component::Volume,
            &names::volume_deployment(cinder, &b.name),
            1,
            &[
                "cinder-volume",
                "--config-dir",
                &crate::planning::backend_projection::backend_mount_dir(&b.name),
            ],
            config_map.to_string(),
            &ctx.artefacts,
            ctx.status.installed_release.as_deref(),
        )
    };
    VolumeWorkload { spec, device, host }
}

/// The volume Deployment of a backend that left the Cinder.
#[derive(Debug, PartialEq, Eq)]
struct Departed {
    backend: String,
    deployment: String,
    /// The device its writes lock (from its annotation; `backend:<name>` without one).
    device: String,
}

/// The volume Deployments in `existing` whose backend has left the Cinder (no CinderBackend in
/// `attached` names it) and that are not already being deleted. A backend that is attached but
/// not projected this pass (waiting for its key, invalid) has not left: its Deployment stays.
/// A backend being deleted is the detach's business.
fn departed(existing: &[Deployment], attached: &BTreeMap<String, CinderBackend>) -> Vec<Departed> {
    existing
        .iter()
        .filter(|d| d.metadata.deletion_timestamp.is_none())
        .filter_map(|d| {
            let backend = backend_label(d)?;
            if attached.contains_key(backend) {
                return None;
            }
            let device = d
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(DEVICE_ANNOTATION))
                .cloned()
                .unwrap_or_else(|| format!("backend:{backend}"));
            Some(Departed {
                backend: backend.to_string(),
                deployment: d.metadata.name.clone().unwrap_or_default(),
                device,
            })
        })
        .collect()
}

/// The desired volume service of one projected backend, compared with what runs.
struct DesiredVolume {
    backend: String,
    device: String,
    host: String,
    deployment: Deployment,
    /// The live Deployment differs from `deployment` (or is missing).
    write: bool,
    /// The live Deployment has converged (meaningless when `write`).
    converged: bool,
    /// The live Deployment's rollout is done but for its pods' readiness
    /// ([`rolled_out_unready`]).
    rolled_out_unready: bool,
}

/// What one pass wants of the volume Deployments.
struct VolumePlan {
    /// One per projected backend that stays (none before the config is rendered).
    desired: Vec<DesiredVolume>,
    /// Backends attached but not projected this pass whose Deployment runs on untouched, and
    /// what it still waits for ([`held_pending`]; `None`: nothing).
    held: Vec<(VolumeServiceStatus, Option<String>)>,
    departed: Vec<Departed>,
}

/// Plans the volume Deployments of a pass from the projected `active` backends, the
/// `attached` CinderBackends and the `existing` volume Deployments.
fn plan_volume_services(
    ctx: &StepContext,
    active: &[ProjectedBackend],
    attached: &BTreeMap<String, CinderBackend>,
    existing: &[Deployment],
) -> VolumePlan {
    let name = ctx.name();
    let rolling = ctx.status.upgrade_phase == Some(UpgradePhase::RollingUpdate);
    let find = |deployment: &str| {
        existing
            .iter()
            .find(|d| d.metadata.name.as_deref() == Some(deployment))
    };
    let desired = match ctx.artefacts.config_map_name.as_deref() {
        None => Vec::new(),
        Some(config_map) => active
            .iter()
            .map(|b| {
                let VolumeWorkload { spec, device, host } =
                    volume_workload(name, b, attached.get(&b.name), config_map, ctx);
                let deployment = desired_deployment(&ctx.cinder, &spec);
                let current = find(&spec.name);
                DesiredVolume {
                    backend: b.name.clone(),
                    device,
                    host,
                    write: needs_write(current, &deployment),
                    converged: current.is_some_and(|c| rolled_out(c, &deployment)),
                    rolled_out_unready: current.is_some_and(|c| rolled_out_unready(c, &deployment)),
                    deployment,
                }
            })
            .collect(),
    };
    let held = attached
        .values()
        .filter(|b| b.metadata.deletion_timestamp.is_none())
        .map(ResourceExt::name_any)
        .filter(|b| !active.iter().any(|a| a.name == *b))
        .filter_map(|b| {
            let current = find(&names::volume_deployment(name, &b))?;
            let status = VolumeServiceStatus {
                host: names::volume_service_host(name, &b),
                backend: b,
            };
            let pending = held_pending(current, &ctx.cinder.spec.image.reference(), rolling);
            Some((status, pending))
        })
        .collect();
    VolumePlan {
        desired,
        held,
        departed: departed(existing, attached),
    }
}

/// What the Deployment `current` of a backend that is attached but not projected this pass
/// still waits for, `None` when nothing: its rollout converging, and during an upgrade's
/// RollingUpdate (`rolling`) also running `image`, the one the upgrade rolls onto. The step
/// cannot roll it (its backend is not projected), so the upgrade waits: contracting the
/// schema under a cinder-volume still on the old release is what the phase order prevents.
fn held_pending(current: &Deployment, image: &str, rolling: bool) -> Option<String> {
    let deployment = current.metadata.name.clone().unwrap_or_default();
    let runs = template_image(current).unwrap_or_default();
    if rolling && runs != image {
        return Some(format!(
            "{deployment} (runs {runs}, not {image}, and its backend is not projected to roll it)"
        ));
    }
    (!converged(current)).then_some(deployment)
}

/// Why applying a plan stopped the pass.
enum Stopped {
    Busy(Cond, Duration),
    Failed(String),
}

impl Stopped {
    /// What a write under a backend's device lock came to: `Ok` when done, else the pass stops,
    /// waiting while the device is busy (`busy` says whose) or failed (`doing` says at what).
    fn unless_done(
        applied: Result<Applied, String>,
        busy: impl FnOnce() -> String,
        doing: impl FnOnce() -> String,
    ) -> Result<(), Stopped> {
        match applied {
            Ok(Applied::Done) => Ok(()),
            Ok(Applied::Busy(after)) => Err(Stopped::Busy(
                WorkloadCondition::VOLUME_SERVICES.waiting(busy()),
                after,
            )),
            Err(e) => Err(Stopped::Failed(format!("{}: {e}", doing()))),
        }
    }
}

/// The volume Deployments a pass leaves not ready.
#[derive(Default)]
struct NotConverged {
    /// Still rolling out (or a container cannot run), with what their pods say: the step
    /// requeues.
    pending: Vec<String>,
    /// Rolled out, but their pods' readiness check fails: Cinder records the service as down or
    /// disabled ([`not_ready_detail`]). The step reports it and the pass goes on.
    down: Vec<String>,
}

/// Writes the Deployments `plan` wants, each under its backend's device lock; returns those not
/// ready yet.
async fn apply_volume_plan(
    op: &OperatorContext,
    ctx: &StepContext,
    plan: &VolumePlan,
) -> Result<NotConverged, Stopped> {
    let (ns, name) = (ctx.namespace(), ctx.name());
    let children = ctx.children(&op.client);
    let mut out = NotConverged::default();
    for v in &plan.desired {
        let deployment_name = v.deployment.metadata.name.clone().unwrap_or_default();
        if !v.write {
            if !v.converged {
                match not_ready_detail(&children, &v.deployment).await {
                    Some(d) if d.checks_only && v.rolled_out_unready => {
                        out.down.push(format!("{deployment_name} ({})", d.text));
                    }
                    Some(d) => out
                        .pending
                        .push(format!("{deployment_name} (not ready: {})", d.text)),
                    None => out.pending.push(deployment_name),
                }
            }
            continue;
        }
        let (c, reads, m, n, backend, desired) = (
            children.clone(),
            ctx.children_reads().clone(),
            op.client.clone(),
            ns.to_string(),
            v.backend.clone(),
            v.deployment.clone(),
        );
        let applied = under_backend_lock(
            op,
            &v.device,
            &service_id(ns, name, &v.backend),
            || async move {
                // Re-checked under the lock: a backend whose detach started since this
                // pass's snapshot (maybe by another replica) keeps its Deployment deleted.
                if !still_attached(&m, &n, &backend).await? {
                    return Ok(());
                }
                ensure_deployment(&c, &reads, &desired).await.map(|_| ())
            },
        )
        .await;
        Stopped::unless_done(
            applied,
            || format!("the device of backend {} is busy", v.backend),
            || format!("writing Deployment {deployment_name}"),
        )?;
        out.pending.push(deployment_name);
    }
    for d in &plan.departed {
        let (c, reads, n, nm) = (
            children.clone(),
            ctx.children_reads().clone(),
            ns.to_string(),
            d.deployment.clone(),
        );
        let applied = under_backend_lock(
            op,
            &d.device,
            &service_id(ns, name, &d.backend),
            || async move { delete_deployment(&c, &reads, &n, &nm).await.map(|_| ()) },
        )
        .await;
        Stopped::unless_done(
            applied,
            || format!("the device of departed backend {} is busy", d.backend),
            || format!("deleting Deployment {}", d.deployment),
        )?;
    }
    Ok(out)
}

/// Runs the step once for one Cinder.
pub(crate) async fn run(op: Arc<OperatorContext>, ctx: &mut StepContext) -> StepResult {
    let reporting = JobReporting::new(&op, ctx, JobKind::ServiceRemove);
    let name = ctx.name().to_string();
    let ns = ctx.namespace().to_string();
    let children = ctx.children(&op.client);
    let attached = attached_backends(&op.client, ctx.management_reads(), &ns, &name)
        .await
        .doing("listing CinderBackends")?;
    let volume = Some(Component::Volume);
    let existing: Vec<Deployment> =
        list_children(&children, ctx.children_reads(), &ns, &name, volume)
            .await
            .doing("listing volume Deployments")?;
    let config_map = ctx.artefacts.config_map_name.clone();
    let active: Vec<_> = ctx
        .artefacts
        .backends
        .iter()
        .filter(|b| !b.deleting)
        .cloned()
        .collect();

    let plan = plan_volume_services(ctx, &active, &attached, &existing);
    let NotConverged { mut pending, down } = match apply_volume_plan(&op, ctx, &plan).await {
        Ok(p) => p,
        Err(Stopped::Busy(condition, after)) => return ctx.requeue(condition, after),
        Err(Stopped::Failed(what)) => return Err(what.into()),
    };
    ctx.status.volume_services = plan
        .desired
        .iter()
        .map(|v| VolumeServiceStatus {
            backend: v.backend.clone(),
            host: v.host.clone(),
        })
        .chain(plan.held.iter().map(|(s, _)| s.clone()))
        .collect();
    pending.extend(plan.held.iter().filter_map(|(_, pending)| pending.clone()));

    // The detach of deleted backends, one per pass.
    let backends: Vec<CinderBackend> = attached.into_values().collect();
    let detached = detach_pass(
        &op,
        &ctx.clusters(&op.client),
        &reporting,
        &ctx.cinder,
        &backends,
        config_map.as_deref(),
    )
    .await;
    match detached {
        Err(e) => return Err(e.to_string()).doing("detach"),
        Ok(DetachOutcome::Busy { backend, after }) => {
            return ctx.requeue(
                WorkloadCondition::VOLUME_SERVICES
                    .waiting(format!("detaching backend {backend}: a device is busy")),
                after,
            );
        }
        Ok(DetachOutcome::Worked { plan }) => {
            let condition = plan.condition.clone().unwrap_or_else(|| {
                WorkloadCondition::VOLUME_SERVICES
                    .waiting(format!("detaching backend {}", plan.backend))
            });
            return ctx.requeue(condition, plan.requeue);
        }
        Ok(DetachOutcome::Idle) => {}
    }

    if config_map.is_none() && !active.is_empty() {
        return WorkloadCondition::VOLUME_SERVICES.await_config(ctx);
    }
    let count = ctx.status.volume_services.len();
    if count == 0 {
        return ctx.proceed(Cond::false_(
            kind::VOLUME_SERVICES_READY,
            reason::NO_BACKENDS,
            "no backend is projected",
        ));
    }
    if !pending.is_empty() {
        let down = if down.is_empty() {
            String::new()
        } else {
            format!("; not ready: {}", down.join(", "))
        };
        return ctx.requeue(
            WorkloadCondition::VOLUME_SERVICES
                .waiting(format!("rolling out: {}{down}", pending.join(", "))),
            REQUEUE_DEPLOYMENT_POLLING,
        );
    }
    if !down.is_empty() {
        // Rolled out, the services down in Cinder: reported, and the pass goes on (the pods
        // turning ready change their Deployments, whose watch brings the next pass).
        return ctx.proceed(
            WorkloadCondition::VOLUME_SERVICES.waiting(format!("not ready: {}", down.join(", "))),
        );
    }
    ctx.proceed(all_ready(count, &plan.held))
}

/// AllVolumeServicesReady for `count` services, naming those kept as they run while their
/// backends are not projected.
fn all_ready(count: usize, held: &[(VolumeServiceStatus, Option<String>)]) -> Cond {
    let held = if held.is_empty() {
        String::new()
    } else {
        let names: Vec<_> = held.iter().map(|(s, _)| s.backend.as_str()).collect();
        format!(
            " ({} kept as they run while their backends are not projected)",
            names.join(", ")
        )
    };
    WorkloadCondition::VOLUME_SERVICES.ready(format!("{count} volume service(s) ready{held}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn all_ready_names_the_services_kept_for_unprojected_backends() {
        assert_eq!(all_ready(2, &[]).message, "2 volume service(s) ready");
        let kept = VolumeServiceStatus {
            backend: "nfs1".into(),
            host: "c@nfs1".into(),
        };
        let c = all_ready(1, &[(kept, None)]);
        assert!(c.status);
        assert_eq!(
            c.message,
            "1 volume service(s) ready (nfs1 kept as they run while their backends are not projected)"
        );
    }
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};

    fn deployment(backend: &str, device: Option<&str>, deleting: bool) -> Deployment {
        Deployment {
            metadata: ObjectMeta {
                name: Some(format!("c-volume-{backend}")),
                labels: Some([(names::LABEL_BACKEND.to_string(), backend.to_string())].into()),
                annotations: device
                    .map(|d| [(DEVICE_ANNOTATION.to_string(), d.to_string())].into()),
                deletion_timestamp: deleting.then(|| Time(k8s_openapi::jiff::Timestamp::now())),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    fn backend_spec(name: &str, deleting: bool) -> CinderBackend {
        let mut b: CinderBackend = serde_json::from_value(serde_json::json!({
            "apiVersion": "cinder.openstack.c5c3.io/v1alpha1",
            "kind": "CinderBackend",
            "metadata": {"name": name, "namespace": "ns"},
            "spec": {"cinderRef": {"name": "c"}, "type": "NFS",
                "nfs": {"server": "nfs.example", "path": "/export"}}
        }))
        .unwrap();
        if deleting {
            b.metadata.deletion_timestamp = Some(Time(k8s_openapi::jiff::Timestamp::now()));
        }
        b
    }

    fn running(image: &str, converged: bool) -> Deployment {
        let mut d = deployment("waits", None, false);
        d.spec = serde_json::from_value(serde_json::json!({"replicas": 1, "selector": {},
            "template": {"spec": {"containers": [{"name": "volume", "image": image}]}}}))
        .unwrap();
        let ready = i32::from(converged);
        d.status = Some(
            serde_json::from_value(serde_json::json!({"replicas": 1, "updatedReplicas": 1,
                "readyReplicas": ready, "availableReplicas": ready}))
            .unwrap(),
        );
        d
    }

    #[test]
    fn a_kept_service_on_the_old_image_holds_the_rolling_update() {
        let old = running("r:2025.2", true);
        // Outside an upgrade a kept service counts once converged, whatever it runs.
        assert_eq!(held_pending(&old, "r:2026.1", false), None);
        let waits = held_pending(&old, "r:2026.1", true).expect("the upgrade waits");
        assert!(waits.contains("c-volume-waits"), "{waits}");
        assert!(waits.contains("runs r:2025.2, not r:2026.1"), "{waits}");
        assert_eq!(
            held_pending(&running("r:2026.1", true), "r:2026.1", true),
            None
        );
        assert_eq!(
            held_pending(&running("r:2026.1", false), "r:2026.1", true).as_deref(),
            Some("c-volume-waits")
        );
    }

    #[test]
    fn only_backends_that_left_depart() {
        let existing = vec![
            deployment("stays", Some("nfs:a"), false),
            deployment("waits", Some("rbd:w"), false),
            deployment("gone", Some("nfs:b"), false),
            deployment("unannotated", None, false),
            deployment("detaching", Some("nfs:c"), false),
            deployment("already", Some("nfs:d"), true),
        ];
        // "waits" is attached but not projected this pass (its key Secret is missing).
        let specs: BTreeMap<String, CinderBackend> = [
            ("stays".to_string(), backend_spec("stays", false)),
            ("waits".to_string(), backend_spec("waits", false)),
            ("detaching".to_string(), backend_spec("detaching", true)),
        ]
        .into();
        assert_eq!(
            departed(&existing, &specs),
            vec![
                Departed {
                    backend: "gone".into(),
                    deployment: "c-volume-gone".into(),
                    device: "nfs:b".into(),
                },
                Departed {
                    backend: "unannotated".into(),
                    deployment: "c-volume-unannotated".into(),
                    device: "backend:unannotated".into(),
                },
            ]
        );
    }
}
