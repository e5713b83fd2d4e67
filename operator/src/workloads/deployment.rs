//! A workload's Deployment: what differs between the workloads ([`WorkloadSpec`]), the desired
//! Deployment with its spec-hash annotation, the spec-hash comparison that decides a replace, the
//! write, the rollout-convergence test, and deletion.

use super::pod::{
    ExtraVolume, config_mount, pod_annotations, rootwrap_filters_volume, workload_env,
};
use crate::children::child_meta;
use crate::crd::Cinder;
use crate::kube_ext::reader::ClusterStores;
use crate::kube_ext::{create_if_absent, delete_if_present, replace_unless_changed};
use crate::names::{self, Component};
use crate::pipeline::Artefacts;
use crate::planning::connection_cap::{
    API_ROLLOUT, Rollout, SINGLE_WRITER_ROLLOUT, VOLUME_ROLLOUT,
};
use crate::planning::containers;
use crate::planning::digest::sha256_hex;
use k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec};
use k8s_openapi::api::core::v1::{
    ConfigMapVolumeSource, Container, EnvVar, PodSpec, PodTemplateSpec, Volume, VolumeMount,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use kube::api::{DeleteParams, PropagationPolicy};
use kube::{Api, Client};
use std::collections::BTreeMap;

/// Annotation on a workload object: sha256 of its desired spec (a different hash means replace).
pub(crate) const SPEC_HASH_ANNOTATION: &str = "cinder.openstack.c5c3.io/spec-hash";
/// Annotation on a volume Deployment: the storage device (lock id) its backend lives on, so a
/// Deployment whose CinderBackend is already gone is still deleted under the right lock.
pub(crate) const DEVICE_ANNOTATION: &str = "cinder.openstack.c5c3.io/device";
/// Annotation on a volume Deployment: the service host `<cinder>@<backend>`.
pub(crate) const HOST_ANNOTATION: &str = "cinder.openstack.c5c3.io/volume-host";

/// What differs between the workloads.
#[derive(Clone, Debug)]
pub(crate) struct WorkloadSpec {
    pub component: Component,
    pub name: String,
    pub replicas: i32,
    /// How the Deployment replaces its pods (what the connection cap assumes of it).
    pub rollout: Rollout,
    pub command: Vec<String>,
    pub extra_env: Vec<EnvVar>,
    pub extra_volumes: Vec<ExtraVolume>,
    /// Extra labels on the Deployment and its pods (the backend of a volume service).
    pub extra_labels: Vec<(String, String)>,
    /// Extra annotations on the Deployment object (not the pods).
    pub object_annotations: BTreeMap<String, String>,
    pub pod_annotations: BTreeMap<String, String>,
    pub config_map: String,
    pub container_port: Option<i32>,
    /// An HPA owns the replica count: the Deployment is written without `spec.replicas`, and a
    /// replacement keeps the live count.
    pub hpa_owns_replicas: bool,
}

impl WorkloadSpec {
    /// A workload of `component` named `name` running `command` with the config ConfigMap
    /// `config_map`: the rollout the connection cap assumes of the component (the API surges
    /// one pod, the scheduler and the backup service none, a volume service is recreated), the
    /// pod annotations of `artefacts` (and of `release` for the components that carry it), no
    /// extras.
    pub(crate) fn new(
        component: Component,
        name: &str,
        replicas: i32,
        command: &[&str],
        config_map: String,
        artefacts: &Artefacts,
        release: Option<&str>,
    ) -> Self {
        WorkloadSpec {
            component,
            name: name.to_string(),
            replicas,
            rollout: match component {
                Component::Api => API_ROLLOUT,
                Component::Volume => VOLUME_ROLLOUT,
                _ => SINGLE_WRITER_ROLLOUT,
            },
            command: command.iter().map(|c| c.to_string()).collect(),
            extra_env: Vec::new(),
            extra_volumes: Vec::new(),
            extra_labels: Vec::new(),
            object_annotations: BTreeMap::new(),
            pod_annotations: pod_annotations(component, artefacts, release),
            config_map,
            container_port: None,
            hpa_owns_replicas: false,
        }
    }
}

/// The desired Deployment of `spec` owned by `cinder`, with its spec-hash annotation.
pub(crate) fn desired_deployment(cinder: &Cinder, spec: &WorkloadSpec) -> Deployment {
    let cinder_name = cinder.metadata.name.clone().unwrap_or_default();
    let mut labels = names::component_labels(&cinder_name, spec.component);
    for (k, v) in &spec.extra_labels {
        labels.insert(k.clone(), v.clone());
    }
    let mut volumes = vec![Volume {
        name: "config".to_string(),
        config_map: Some(ConfigMapVolumeSource {
            name: spec.config_map.clone(),
            ..Default::default()
        }),
        ..Default::default()
    }];
    let mut mounts = vec![config_mount()];
    if matches!(spec.component, Component::Volume | Component::Backup) {
        let (volume, mount) = rootwrap_filters_volume(&spec.config_map);
        volumes.push(volume);
        mounts.push(mount);
    }
    for extra in &spec.extra_volumes {
        volumes.push(extra.volume.clone());
        mounts.push(VolumeMount {
            name: extra.volume.name.clone(),
            mount_path: extra.mount_path.clone(),
            read_only: Some(extra.volume.nfs.is_none()),
            ..Default::default()
        });
    }
    let mut env = workload_env(cinder, spec.component);
    env.extend(spec.extra_env.iter().cloned());
    let (startup_probe, readiness_probe, liveness_probe) =
        containers::probes(spec.component, &spec.command);
    let container = Container {
        resources: containers::resources(&cinder.spec, spec.component),
        startup_probe,
        readiness_probe,
        liveness_probe,
        name: spec.component.as_str().to_string(),
        image: Some(cinder.spec.image.reference()),
        command: Some(spec.command.clone()),
        env: Some(env),
        volume_mounts: Some(mounts),
        ports: spec.container_port.map(|p| {
            vec![k8s_openapi::api::core::v1::ContainerPort {
                container_port: p,
                name: Some("api".to_string()),
                ..Default::default()
            }]
        }),
        ..Default::default()
    };
    let deployment_spec = DeploymentSpec {
        // An HPA owns the count: the field is left out, so no write of the operator's sets it.
        replicas: (!spec.hpa_owns_replicas).then_some(spec.replicas),
        selector: LabelSelector {
            match_labels: Some(labels.clone()),
            ..Default::default()
        },
        strategy: Some(spec.rollout.strategy()),
        template: PodTemplateSpec {
            metadata: Some(ObjectMeta {
                labels: Some(labels),
                annotations: Some(spec.pod_annotations.clone()),
                ..Default::default()
            }),
            spec: Some(PodSpec {
                containers: vec![container],
                volumes: Some(volumes),
                ..Default::default()
            }),
        },
        ..Default::default()
    };
    let extra: Vec<(&str, &str)> =
        std::iter::once((names::LABEL_COMPONENT, spec.component.as_str()))
            .chain(
                spec.extra_labels
                    .iter()
                    .map(|(k, v)| (k.as_str(), v.as_str())),
            )
            .collect();
    let mut metadata = child_meta(cinder, &spec.name, &extra);
    let mut annotations = spec.object_annotations.clone();
    annotations.insert(SPEC_HASH_ANNOTATION.to_string(), hash_of(&deployment_spec));
    metadata.annotations = Some(annotations);
    Deployment {
        metadata,
        spec: deployment_spec,
        ..Default::default()
    }
}

/// sha256 of the JSON form of `value` (empty when it cannot be serialised).
pub(crate) fn hash_of<T: serde::Serialize>(value: &T) -> String {
    serde_json::to_string(value)
        .map(|s| sha256_hex(s.as_bytes()))
        .unwrap_or_default()
}

/// The spec hash an object carries.
pub(crate) fn spec_hash(meta: &ObjectMeta) -> Option<&str> {
    meta.annotations
        .as_ref()
        .and_then(|a| a.get(SPEC_HASH_ANNOTATION))
        .map(String::as_str)
}

/// Whether `existing` must be replaced by `desired` (absent, or another spec hash).
pub(crate) fn needs_write(existing: Option<&Deployment>, desired: &Deployment) -> bool {
    existing.is_none_or(|e| spec_hash(&e.metadata) != spec_hash(&desired.metadata))
}

/// Creates `desired`, or replaces the existing Deployment when its spec hash differs. Returns
/// whether anything was written.
pub(crate) async fn ensure_deployment(
    client: &Client,
    reads: &ClusterStores,
    desired: &Deployment,
) -> Result<bool, kube::Error> {
    let ns = desired.metadata.namespace.clone().unwrap_or_default();
    let name = desired.metadata.name.clone().unwrap_or_default();
    let api: Api<Deployment> = Api::namespaced(client.clone(), &ns);
    let existing = reads.get_opt(&api, &name).await?;
    if !needs_write(existing.as_ref(), desired) {
        return Ok(false);
    }
    match existing {
        None => create_if_absent(&api, desired).await,
        Some(e) => {
            let mut replacement = desired.clone();
            replacement.metadata.resource_version = e.metadata.resource_version;
            if replacement.spec.replicas.is_none() {
                // The count belongs to an HPA: keep what it set (a conflict with its write
                // retries on the next pass).
                replacement.spec.replicas = e.spec.replicas;
            }
            replace_unless_changed(&api, &name, &replacement).await
        }
    }
}

/// Deletes Deployment `name` (foreground is not needed: its pods follow); returns whether it
/// existed. It reads before it deletes, so that passes that find it absent write nothing.
pub(crate) async fn delete_deployment(
    client: &Client,
    reads: &ClusterStores,
    namespace: &str,
    name: &str,
) -> Result<bool, kube::Error> {
    let api: Api<Deployment> = Api::namespaced(client.clone(), namespace);
    if reads.get_opt(&api, name).await?.is_none() {
        return Ok(false);
    }
    let params = DeleteParams {
        propagation_policy: Some(PropagationPolicy::Background),
        ..Default::default()
    };
    delete_if_present(&api, name, &params).await
}

/// Whether the rollout of `d`'s current generation fully converged: observed, every replica
/// updated, ready and available, and nothing left over.
pub(crate) fn converged(d: &Deployment) -> bool {
    let want = d.spec.replicas.unwrap_or(1);
    let Some(status) = d.status.as_ref() else {
        return false;
    };
    let generation = d.metadata.generation.unwrap_or(0);
    status.observed_generation.unwrap_or(0) >= generation
        && status.updated_replicas.unwrap_or(0) == want
        && status.ready_replicas.unwrap_or(0) == want
        && status.available_replicas.unwrap_or(0) == want
        && status.replicas.unwrap_or(0) == want
}

/// Whether the rollout of `desired` is done but for readiness: `live` carries its spec hash, its
/// current generation is observed, and every pod it counts runs the current template (no old
/// pod left). What keeps such a Deployment from converging is its pods' readiness alone.
pub(crate) fn rolled_out_unready(live: &Deployment, desired: &Deployment) -> bool {
    let want = live.spec.replicas.unwrap_or(1);
    let Some(status) = live.status.as_ref() else {
        return false;
    };
    !needs_write(Some(live), desired)
        && status.observed_generation.unwrap_or(0) >= live.metadata.generation.unwrap_or(0)
        && status.updated_replicas.unwrap_or(0) == want
        && status.replicas.unwrap_or(0) == want
}

/// Whether `live` runs what `desired` asks for and has converged on it: `live` carries the
/// spec hash of `desired` (so an older object, one whose replace lost to a conflict or one a
/// watch store has not caught up with, never counts) and its rollout [`converged`].
pub(crate) fn rolled_out(live: &Deployment, desired: &Deployment) -> bool {
    !needs_write(Some(live), desired) && converged(live)
}

/// The image of the first container of `d`'s pod template.
pub(crate) fn template_image(d: &Deployment) -> Option<&str> {
    d.spec
        .template
        .spec
        .as_ref()?
        .containers
        .first()?
        .image
        .as_deref()
}

/// Ensures `desired` and reports whether it is rolled out ([`rolled_out`]: a Deployment just
/// written is not, nor one whose replace this pass lost to a conflict).
pub(crate) async fn ensure_converged(
    client: &Client,
    reads: &ClusterStores,
    desired: &Deployment,
) -> Result<bool, kube::Error> {
    if ensure_deployment(client, reads, desired).await? {
        return Ok(false);
    }
    let ns = desired.metadata.namespace.clone().unwrap_or_default();
    let name = desired.metadata.name.clone().unwrap_or_default();
    let api: Api<Deployment> = Api::namespaced(client.clone(), &ns);
    Ok(reads
        .get_opt(&api, &name)
        .await?
        .is_some_and(|d| rolled_out(&d, desired)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_fixtures::{artefacts, cinder};

    fn spec(component: Component, artefacts: &Artefacts) -> WorkloadSpec {
        WorkloadSpec {
            component,
            name: format!("c-{}", component.as_str()),
            replicas: 1,
            rollout: SINGLE_WRITER_ROLLOUT,
            command: vec!["x".into()],
            extra_env: vec![],
            extra_volumes: vec![],
            extra_labels: vec![],
            object_annotations: BTreeMap::new(),
            pod_annotations: pod_annotations(component, artefacts, Some("2026.1")),
            config_map: "c-config-1".into(),
            container_port: None,
            hpa_owns_replicas: false,
        }
    }

    #[test]
    fn an_hpa_owned_deployment_carries_no_replica_count() {
        let a = artefacts();
        let c = cinder();
        let mut s = spec(Component::Api, &a);
        assert_eq!(desired_deployment(&c, &s).spec.replicas, Some(1));
        s.hpa_owns_replicas = true;
        let d = desired_deployment(&c, &s);
        assert_eq!(d.spec.replicas, None);
        assert_ne!(spec_hash(&d.metadata), None);
    }

    #[test]
    fn a_rotated_password_changes_only_the_api_spec_hash() {
        let c = cinder();
        let before = artefacts();
        let mut after = before.clone();
        after.authtoken_hash = Some("a2".into());
        for (component, changes) in [
            (Component::Api, true),
            (Component::Scheduler, false),
            (Component::Volume, false),
            (Component::Backup, false),
        ] {
            let old = desired_deployment(&c, &spec(component, &before));
            let new = desired_deployment(&c, &spec(component, &after));
            assert_eq!(needs_write(Some(&old), &new), changes, "{component:?}");
        }
    }

    #[test]
    fn the_rootwrap_filters_are_mounted_alone_where_rootwrap_looks_for_volume_and_backup() {
        let c = cinder();
        let a = artefacts();
        for (component, mounted) in [
            (Component::Api, false),
            (Component::Scheduler, false),
            (Component::Volume, true),
            (Component::Backup, true),
        ] {
            let pod = desired_deployment(&c, &spec(component, &a))
                .spec
                .template
                .spec
                .unwrap();
            let volume = pod
                .volumes
                .unwrap_or_default()
                .into_iter()
                .find(|v| v.name == "rootwrap-filters");
            let mount = pod.containers[0]
                .volume_mounts
                .clone()
                .unwrap_or_default()
                .into_iter()
                .find(|m| m.name == "rootwrap-filters");
            assert_eq!(volume.is_some(), mounted, "{component:?}");
            assert_eq!(mount.is_some(), mounted, "{component:?}");
            if let (Some(v), Some(m)) = (volume, mount) {
                let cm = v.config_map.unwrap();
                assert_eq!(cm.name, "c-config-1");
                let items = cm.items.unwrap();
                assert_eq!(
                    (items.len(), items[0].key.as_str(), items[0].path.as_str()),
                    (1, "volume.filters", "volume.filters")
                );
                assert_eq!(m.mount_path, "/usr/share/cinder/rootwrap");
                assert_eq!(m.read_only, Some(true));
            }
        }
    }

    #[test]
    fn convergence_needs_every_replica_of_the_current_generation() {
        let c = cinder();
        let mut d = desired_deployment(&c, &spec(Component::Scheduler, &artefacts()));
        assert!(!converged(&d));
        d.metadata.generation = Some(2);
        d.status = Some(
            serde_json::from_value(serde_json::json!({"observedGeneration": 2, "replicas": 1,
                "updatedReplicas": 1, "readyReplicas": 1, "availableReplicas": 1}))
            .unwrap(),
        );
        assert!(converged(&d));
        d.metadata.generation = Some(3);
        assert!(!converged(&d));
    }

    #[test]
    fn an_older_object_never_counts_as_rolled_out_however_converged() {
        let c = cinder();
        let mut old = desired_deployment(&c, &spec(Component::Scheduler, &artefacts()));
        old.metadata.generation = Some(1);
        old.status = Some(
            serde_json::from_value(serde_json::json!({"observedGeneration": 1, "replicas": 1,
                "updatedReplicas": 1, "readyReplicas": 1, "availableReplicas": 1}))
            .unwrap(),
        );
        assert!(rolled_out(&old, &old));
        let mut upgraded = c.clone();
        upgraded.spec.image.tag = Some("2026.2".into());
        let wanted = desired_deployment(&upgraded, &spec(Component::Scheduler, &artefacts()));
        // A replace lost to a 409 leaves the old object, converged on the old image.
        assert!(converged(&old));
        assert!(!rolled_out(&old, &wanted));
        assert_eq!(template_image(&wanted), Some("r:2026.2"));
    }
}
