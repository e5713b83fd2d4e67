//! The VPA member of the parallel group (VPAReady): VerticalPodAutoscalers
//! (autoscaling.k8s.io/v1) for the API, the scheduler, every volume Deployment and the backup
//! Deployment, when the Cinder asks for them and the VPA CRD is served.
//!
//! The switch is `spec.verticalAutoscaling` (its `updateMode`, Auto by default, becomes every
//! VPA's). The API's VPA under an HPA (`spec.autoscaling`) controls memory only, so the VPA
//! never resizes the CPU the HPA scales on. Not asked → every VPA of the Cinder is deleted
//! (VPANotRequired, True). Asked and the CRD absent → VPANotInstalled (False); the probe itself
//! failing → CapabilityProbeFailed (False); an API error → VPAError (False, the error
//! propagates). The wanted targets are the Deployments the lane's artefacts name that exist
//! now; a VPA of the Cinder whose target is not wanted or no longer exists (a detached backend,
//! a removed backup target) is deleted with it.

use crate::children::{already_not_required, child_meta, selector};
use crate::conditions::{Cond, kind, reason};
use crate::context::OperatorContext;
use crate::crd::Cinder;
use crate::kube_ext::ApiErrorExt;
use crate::kube_ext::apply;
use crate::kube_ext::capability::{self, VERTICAL_POD_AUTOSCALER};
use crate::kube_ext::reader::ClusterStores;
use crate::names;
use crate::pipeline::{Artefacts, Doing, StepContext, StepResult};
use crate::requeue::REQUEUE_DEPLOYMENT_POLLING;
use k8s_openapi::api::apps::v1::Deployment;
use kube::Api;
use kube::api::{DynamicObject, ListParams};
use serde_json::json;
use std::collections::BTreeSet;
use std::sync::Arc;

/// The label on every VPA the step writes (what the sweep selects).
pub(crate) const VPA_LABEL: &str = "cinder.openstack.c5c3.io/vpa";

/// Whether `cinder` asks for VPAs.
pub(crate) fn wanted(cinder: &Cinder) -> bool {
    cinder.spec.vertical_autoscaling.is_some()
}

/// The Deployments that should carry a VPA, from the lane's artefacts.
pub(crate) fn target_deployments(cinder: &str, artefacts: &Artefacts) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    out.insert(names::api_deployment(cinder));
    out.insert(names::scheduler_deployment(cinder));
    let held = artefacts.held_backends.iter();
    for b in artefacts
        .backends
        .iter()
        .filter(|b| !b.deleting)
        .chain(held)
    {
        out.insert(names::volume_deployment(cinder, &b.name));
    }
    if artefacts
        .backup_backend
        .as_ref()
        .is_some_and(|b| !b.deleting)
    {
        out.insert(names::backup_deployment(cinder));
    }
    out
}

/// The VPA of `deployment`: the spec's update mode; memory only for the API's under an HPA.
pub(crate) fn desired_vpa(cinder: &Cinder, deployment: &str) -> DynamicObject {
    let ar = VERTICAL_POD_AUTOSCALER.api_resource();
    let name = names::vpa_for(deployment);
    let cinder_name = cinder.metadata.name.clone().unwrap_or_default();
    let mode = cinder
        .spec
        .vertical_autoscaling
        .as_ref()
        .map(|v| v.update_mode)
        .unwrap_or_default();
    let mut spec = json!({
        "targetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": deployment},
        "updatePolicy": {"updateMode": mode.as_str()},
    });
    if cinder.spec.autoscaling.is_some() && deployment == names::api_deployment(&cinder_name) {
        spec["resourcePolicy"] = json!({
            "containerPolicies": [{"containerName": "*", "controlledResources": ["memory"]}]
        });
    }
    let mut vpa = DynamicObject::new(&name, &ar).data(json!({ "spec": spec }));
    vpa.metadata = child_meta(cinder, &name, &[(VPA_LABEL, "true")]);
    vpa
}

fn not_installed() -> Cond {
    Cond::false_(
        kind::VPA_READY,
        reason::VPA_NOT_INSTALLED,
        format!(
            "spec.verticalAutoscaling asks for VPAs but {} is not served",
            VERTICAL_POD_AUTOSCALER.api_version()
        ),
    )
}

/// Deletes the Cinder's VPAs whose names are not in `keep`.
async fn sweep(
    api: &Api<DynamicObject>,
    reads: &ClusterStores,
    cinder: &str,
    keep: &BTreeSet<String>,
) -> Result<Vec<String>, kube::Error> {
    crate::kube_ext::sweep(api, reads, &selector(cinder, &[(VPA_LABEL, "true")]), |n| {
        keep.contains(n)
    })
    .await
}

/// The condition of a Cinder that asks for no VPA.
fn not_asked() -> Cond {
    Cond::true_(
        kind::VPA_READY,
        reason::VPA_NOT_REQUIRED,
        "no VPA asked for (spec.verticalAutoscaling is unset)",
    )
}

/// Runs the step once for one Cinder.
pub(crate) async fn run(op: Arc<OperatorContext>, ctx: &mut StepContext) -> StepResult {
    let client = ctx.children(&op.client);
    let ns = ctx.namespace().to_string();
    let name = ctx.name().to_string();
    let api = VERTICAL_POD_AUTOSCALER.namespaced(&client, &ns);
    let asked = wanted(&ctx.cinder);
    if !asked && already_not_required(&ctx.cinder, kind::VPA_READY, reason::VPA_NOT_REQUIRED) {
        // The pass that found VPAs unasked swept them; nothing creates them since.
        return ctx.proceed(not_asked());
    }
    let served = match capability::is_served(&client, VERTICAL_POD_AUTOSCALER).await {
        Ok(served) => served,
        Err(e) if asked => {
            return ctx.requeue(e.condition(kind::VPA_READY), REQUEUE_DEPLOYMENT_POLLING);
        }
        // Not asked: try the sweep anyway (a 404 there means nothing to delete).
        Err(_) => true,
    };
    if !asked {
        if served
            && let Err(e) = sweep(&api, ctx.children_reads(), &name, &BTreeSet::new()).await
            && !e.is_not_found()
        {
            return Err(e).doing("deleting VPAs").with_reason(reason::VPA_ERROR);
        }
        return ctx.proceed(not_asked());
    }
    if !served {
        return ctx.requeue(not_installed(), REQUEUE_DEPLOYMENT_POLLING);
    }
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns);
    let existing: BTreeSet<String> = deployments
        .list_metadata(&ListParams::default().labels(&selector(&name, &[])))
        .await
        .doing("listing Deployments")
        .with_reason(reason::VPA_ERROR)?
        .items
        .into_iter()
        .filter(|d| d.metadata.deletion_timestamp.is_none())
        .filter_map(|d| d.metadata.name)
        .collect();
    let targets: BTreeSet<String> = target_deployments(&name, &ctx.artefacts)
        .intersection(&existing)
        .cloned()
        .collect();
    let keep: BTreeSet<String> = targets.iter().map(|d| names::vpa_for(d)).collect();
    for deployment in &targets {
        let vpa = desired_vpa(&ctx.cinder, deployment);
        let vpa_name = names::vpa_for(deployment);
        if let Err(e) = apply(&api, &vpa_name, &vpa).await {
            if e.is_not_found() {
                return ctx.requeue(not_installed(), REQUEUE_DEPLOYMENT_POLLING);
            }
            return Err(e)
                .doing(format_args!("applying VPA {vpa_name}"))
                .with_reason(reason::VPA_ERROR);
        }
    }
    sweep(&api, ctx.children_reads(), &name, &keep)
        .await
        .doing("sweeping VPAs")
        .with_reason(reason::VPA_ERROR)?;
    let list: Vec<&str> = targets.iter().map(String::as_str).collect();
    ctx.proceed(Cond::true_(
        kind::VPA_READY,
        reason::VPA_READY,
        format!("VPAs for {} Deployment(s): {}", list.len(), list.join(", ")),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pipeline::ProjectedBackend;

    #[test]
    fn targets_follow_the_artefacts() {
        let mut a = Artefacts::default();
        a.backends.push(ProjectedBackend {
            name: "nfs1".into(),
            ..Default::default()
        });
        a.backends.push(ProjectedBackend {
            name: "gone".into(),
            deleting: true,
            ..Default::default()
        });
        let t = target_deployments("c", &a);
        assert!(t.contains("c-api") && t.contains("c-scheduler") && t.contains("c-volume-nfs1"));
        assert!(!t.contains("c-volume-gone"));
        assert!(!t.contains("c-backup"));
        a.backup_backend = Some(ProjectedBackend::default());
        assert!(target_deployments("c", &a).contains("c-backup"));
    }

    #[test]
    fn under_an_hpa_the_api_vpa_controls_memory_only() {
        let mut c = crate::test_fixtures::cinder();
        c.spec.vertical_autoscaling = Some(Default::default());
        let policy = |c: &Cinder, d: &str| desired_vpa(c, d).data["spec"]["resourcePolicy"].clone();
        assert!(policy(&c, "c-api").is_null());
        assert_eq!(
            desired_vpa(&c, "c-api").data["spec"]["updatePolicy"]["updateMode"],
            "Auto"
        );
        c.spec.autoscaling = Some(crate::crd::cinder::AutoscalingSpec {
            min_replicas: 2,
            max_replicas: 4,
            target_cpu_utilization: 80,
        });
        let name = c.metadata.name.clone().unwrap();
        let api = policy(&c, &names::api_deployment(&name));
        assert_eq!(
            api["containerPolicies"][0]["controlledResources"],
            serde_json::json!(["memory"])
        );
        assert!(policy(&c, &names::scheduler_deployment(&name)).is_null());
    }
}
