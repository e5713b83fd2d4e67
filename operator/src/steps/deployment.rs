//! The Deployment step: ensures the API Deployment (`{name}-api`, uWSGI; written without
//! `spec.replicas` when an HPA owns the count, so a roll-out keeps the HPA's), its Service (port 8776) and
//! its PodDisruptionBudget (maxUnavailable 1), and stamps `status.endpoint`
//! (`http://{svc}.{ns}.svc:8776`); DeploymentReady / WaitingForDeployment, requeueing every 10 s
//! until the rollout converged. Mid-upgrade it flips RollingUpdate → Contracting once the API has
//! converged too (the scheduler, volume and backup steps before it only continue once theirs
//! have), with a 1 s requeue (RequeueNextPass).

use crate::children::child_meta;
use crate::context::OperatorContext;
use crate::kube_ext::create_if_absent;
use crate::kube_ext::reader::ClusterStores;
use crate::names::{self, Component};
use crate::pipeline::{Artefacts, Doing, StepContext, StepResult};
use crate::planning::upgrade::rollout_converged;
use crate::requeue::REQUEUE_DEPLOYMENT_POLLING;
use crate::workloads::{
    SPEC_HASH_ANNOTATION, WorkloadCondition, WorkloadSpec, desired_deployment, ensure_converged,
    hash_of, spec_hash,
};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Service, ServicePort, ServiceSpec};
use k8s_openapi::api::policy::v1::{PodDisruptionBudget, PodDisruptionBudgetSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::api::{Patch, PatchParams};
use kube::{Api, Client, Resource};
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::fmt::Debug;
use std::sync::Arc;

/// The API Service: port 8776 to the API pods.
pub(crate) fn desired_service(cinder: &crate::crd::Cinder) -> Service {
    let name = cinder.metadata.name.clone().unwrap_or_default();
    let spec = ServiceSpec {
        selector: Some(names::component_labels(&name, Component::Api)),
        ports: Some(vec![ServicePort {
            name: Some("api".to_string()),
            port: names::API_PORT,
            target_port: Some(IntOrString::Int(names::API_PORT)),
            protocol: Some("TCP".to_string()),
            ..Default::default()
        }]),
        ..Default::default()
    };
    Service {
        metadata: api_child_meta(cinder, &names::api_service(&name), &spec),
        spec: Some(spec),
        ..Default::default()
    }
}

/// Metadata of the API's child `name`, annotated with the hash of its `spec`.
fn api_child_meta<S: Serialize>(cinder: &crate::crd::Cinder, name: &str, spec: &S) -> ObjectMeta {
    let mut metadata = child_meta(
        cinder,
        name,
        &[(names::LABEL_COMPONENT, Component::Api.as_str())],
    );
    metadata.annotations = Some([(SPEC_HASH_ANNOTATION.to_string(), hash_of(spec))].into());
    metadata
}

/// The API PodDisruptionBudget: maxUnavailable 1, so a node drain may always evict one API pod
/// (with minAvailable 1, a one-replica API would block every drain of its node).
pub(crate) fn desired_pdb(cinder: &crate::crd::Cinder) -> PodDisruptionBudget {
    let name = cinder.metadata.name.clone().unwrap_or_default();
    let spec = PodDisruptionBudgetSpec {
        max_unavailable: Some(IntOrString::Int(1)),
        selector: Some(LabelSelector {
            match_labels: Some(names::component_labels(&name, Component::Api)),
            ..Default::default()
        }),
        ..Default::default()
    };
    PodDisruptionBudget {
        metadata: api_child_meta(cinder, &names::api_pdb(&name), &spec),
        spec: Some(spec),
        ..Default::default()
    }
}

/// Creates `desired` or merge-patches its spec and annotations when the spec hash differs
/// (a patch keeps the fields the API server allocated, such as a Service's clusterIP); the spec
/// fields named in `cleared` are removed by the patch (set to null), for a field `desired`
/// leaves out that an earlier version set (a PDB's `minAvailable`, which excludes
/// `maxUnavailable`).
pub(crate) async fn ensure_patched<K>(
    client: &Client,
    reads: &ClusterStores,
    desired: &K,
    cleared: &[&str],
) -> Result<(), kube::Error>
where
    K: Resource<Scope = kube::core::NamespaceResourceScope, DynamicType = ()>
        + Clone
        + Debug
        + Serialize
        + DeserializeOwned
        + Send
        + Sync
        + 'static,
{
    let meta = desired.meta();
    let ns = meta.namespace.clone().unwrap_or_default();
    let name = meta.name.clone().unwrap_or_default();
    let api: Api<K> = Api::namespaced(client.clone(), &ns);
    match reads.get_opt(&api, &name).await? {
        None => create_if_absent(&api, desired).await.map(|_| ()),
        Some(existing) if spec_hash(existing.meta()) == spec_hash(meta) => Ok(()),
        Some(_) => {
            let body = serde_json::to_value(desired).map_err(kube::Error::SerdeError)?;
            let mut spec = body.get("spec").cloned().unwrap_or_default();
            if let Some(fields) = spec.as_object_mut() {
                for field in cleared {
                    fields
                        .entry(field.to_string())
                        .or_insert(serde_json::Value::Null);
                }
            }
            let patch = serde_json::json!({
                "metadata": {"annotations": body.pointer("/metadata/annotations"),
                             "labels": body.pointer("/metadata/labels")},
                "spec": spec,
            });
            api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                .await?;
            Ok(())
        }
    }
}

/// The API Deployment of `cinder` mounting the config ConfigMap `config_map`, its pods
/// annotated from `artefacts` (rolling with the one-pod surge the connection cap counts).
pub(crate) fn api_deployment(
    cinder: &crate::crd::Cinder,
    config_map: String,
    artefacts: &Artefacts,
) -> Deployment {
    let name = cinder.metadata.name.as_deref().unwrap_or_default();
    let command = crate::planning::process_model::api_command();
    let command: Vec<&str> = command.iter().map(String::as_str).collect();
    let spec = WorkloadSpec {
        container_port: Some(names::API_PORT),
        hpa_owns_replicas: cinder.spec.autoscaling.is_some(),
        ..WorkloadSpec::new(
            Component::Api,
            &names::api_deployment(name),
            cinder.spec.api.replicas,
            &command,
            config_map,
            artefacts,
            None,
        )
    };
    desired_deployment(cinder, &spec)
}

/// Runs the step once for one Cinder.
pub(crate) async fn run(op: Arc<OperatorContext>, ctx: &mut StepContext) -> StepResult {
    let children = ctx.children(&op.client);
    let name = ctx.name().to_string();
    let ns = ctx.namespace().to_string();
    let Some(config_map) = ctx.artefacts.config_map_name.clone() else {
        return WorkloadCondition::API.await_config(ctx);
    };
    let cinder = ctx.cinder.clone();
    let deployment_name = names::api_deployment(&name);
    let desired = api_deployment(&cinder, config_map, &ctx.artefacts);
    let converged = ensure_converged(&children, ctx.children_reads(), &desired)
        .await
        .doing(format_args!("writing Deployment {deployment_name}"))?;
    ensure_patched(
        &children,
        ctx.children_reads(),
        &desired_service(&cinder),
        &[],
    )
    .await
    .doing(format_args!(
        "writing Service {}",
        names::api_service(&name)
    ))?;
    ensure_patched(
        &children,
        ctx.children_reads(),
        &desired_pdb(&cinder),
        &["minAvailable"],
    )
    .await
    .doing(format_args!(
        "writing PodDisruptionBudget {}",
        names::api_pdb(&name)
    ))?;
    ctx.status.endpoint = Some(names::api_endpoint(&name, &ns));
    if !converged {
        return ctx.requeue(
            WorkloadCondition::API.waiting(format!("Deployment {deployment_name} is rolling out")),
            REQUEUE_DEPLOYMENT_POLLING,
        );
    }
    let ready = WorkloadCondition::API.ready(format!("Deployment {deployment_name} is ready"));
    // The workload steps before this one only continue once their rollouts are done: converged,
    // or every pod on the new template with only its readiness failing (Cinder records that
    // service down or disabled); no service of the old release is left to contract under.
    if let Some((phase, after)) = rollout_converged(ctx.status.upgrade_phase, true) {
        ctx.status.upgrade_phase = Some(phase);
        return ctx.requeue(ready, after);
    }
    ctx.proceed(ready)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_api_pdb_lets_one_pod_go_at_any_replica_count() {
        let pdb = desired_pdb(&crate::test_fixtures::cinder());
        let spec = pdb.spec.unwrap();
        assert_eq!(spec.max_unavailable, Some(IntOrString::Int(1)));
        assert_eq!(
            spec.min_available, None,
            "minAvailable and maxUnavailable exclude each other"
        );
    }
}
