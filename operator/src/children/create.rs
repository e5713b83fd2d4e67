//! Creating the Cinder's children: every child carries the common labels and a controller
//! ownerReference to its Cinder, or, when the Cinder projects onto a target cluster (where an
//! ownerReference cannot point), the ownership label
//! `cinder.openstack.c5c3.io/owner=<namespace>.<name>`; derived Secrets are created or replaced
//! when their data changed; content-addressed children are immutable and only created or deleted.

use crate::crd::Cinder;
use crate::kube_ext::reader::ClusterStores;
use crate::kube_ext::{create_if_absent, replace_unless_changed};
use crate::names;
use crate::pipeline::{Doing, StepContext, StepError};
use k8s_openapi::ByteString;
use k8s_openapi::NamespaceResourceScope;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{DeleteParams, PostParams};
use kube::{Api, Client, Resource};
use std::collections::BTreeMap;

/// Metadata of a child `name` of `cinder` with the common labels plus `extra_labels`, owned as
/// the cluster it lives on allows: by ownerReference on the management cluster, by the
/// ownership label on the Cinder's target cluster.
pub(crate) fn child_meta(cinder: &Cinder, name: &str, extra_labels: &[(&str, &str)]) -> ObjectMeta {
    if cinder.spec.target_cluster_ref.is_none() {
        return management_child_meta(cinder, name, extra_labels);
    }
    let mut meta = management_child_meta(cinder, name, extra_labels);
    meta.owner_references = None;
    let owner = crate::kube_ext::ownership::owner_value(
        cinder.metadata.namespace.as_deref().unwrap_or_default(),
        cinder.metadata.name.as_deref().unwrap_or_default(),
    );
    meta.labels
        .get_or_insert_with(Default::default)
        .insert(crate::kube_ext::ownership::OWNER_LABEL.to_string(), owner);
    meta
}

/// Metadata of a child that always lives on the management cluster beside its Cinder (the
/// MariaDB Database, User and Grant): the common labels plus `extra_labels` and a controller
/// ownerReference.
pub(crate) fn management_child_meta(
    cinder: &Cinder,
    name: &str,
    extra_labels: &[(&str, &str)],
) -> ObjectMeta {
    let cinder_name = cinder.metadata.name.clone().unwrap_or_default();
    let mut labels = names::common_labels(&cinder_name);
    for (k, v) in extra_labels {
        labels.insert((*k).to_string(), (*v).to_string());
    }
    ObjectMeta {
        name: Some(name.to_string()),
        namespace: cinder.metadata.namespace.clone(),
        labels: Some(labels),
        owner_references: cinder.controller_owner_ref(&()).map(|o| vec![o]),
        ..Default::default()
    }
}

/// A Secret `name` owned by `cinder` holding `data`.
pub(crate) fn secret(
    cinder: &Cinder,
    name: &str,
    extra_labels: &[(&str, &str)],
    data: BTreeMap<String, Vec<u8>>,
    immutable: bool,
) -> Secret {
    Secret {
        metadata: child_meta(cinder, name, extra_labels),
        data: Some(data.into_iter().map(|(k, v)| (k, ByteString(v))).collect()),
        immutable: immutable.then_some(true),
        type_: Some("Opaque".to_string()),
        ..Default::default()
    }
}

/// Ensures the pass's Cinder's derived Secret `name` holding `value` under `key`, on the cluster
/// the workloads run on (one value they mount, such as the database connection or the
/// transport URL).
pub(crate) async fn ensure_derived_secret(
    client: &Client,
    ctx: &StepContext,
    name: &str,
    key: &str,
    value: &str,
) -> Result<bool, StepError> {
    let data = [(key.to_string(), value.as_bytes().to_vec())].into();
    let desired = secret(&ctx.cinder, name, &[], data, false);
    ensure_secret(&ctx.children(client), ctx.children_reads(), desired)
        .await
        .doing(format_args!("writing Secret {name}"))
}

/// Creates `desired`, or replaces the existing Secret when its data or labels differ.
/// Returns whether anything was written.
pub(crate) async fn ensure_secret(
    client: &Client,
    reads: &ClusterStores,
    desired: Secret,
) -> Result<bool, kube::Error> {
    let (api, name) = api_and_name(client, &desired);
    match reads.get_opt(&api, &name).await? {
        None => create_if_absent(&api, &desired).await,
        Some(existing) => {
            if existing.data == desired.data
                && existing.metadata.labels == desired.metadata.labels
                && existing.metadata.owner_references == desired.metadata.owner_references
            {
                return Ok(false);
            }
            if existing.immutable == Some(true) {
                api.delete(&name, &DeleteParams::default()).await?;
                api.create(&PostParams::default(), &desired).await?;
                return Ok(true);
            }
            let mut replacement = desired;
            replacement.metadata.resource_version = existing.metadata.resource_version;
            replace_unless_changed(&api, &name, &replacement).await
        }
    }
}

/// The API of `desired`'s kind in `desired`'s namespace, and `desired`'s name.
fn api_and_name<K>(client: &Client, desired: &K) -> (Api<K>, String)
where
    K: Resource<Scope = NamespaceResourceScope>,
    K::DynamicType: Default,
{
    let meta = desired.meta();
    let namespace = meta.namespace.as_deref().unwrap_or_default();
    let api = Api::namespaced(client.clone(), namespace);
    (api, meta.name.clone().unwrap_or_default())
}

/// Creates the immutable ConfigMap `desired` unless it exists (content-addressed: same name,
/// same content). Returns whether it created it.
pub(crate) async fn ensure_config_map(
    client: &Client,
    reads: &ClusterStores,
    desired: ConfigMap,
) -> Result<bool, kube::Error> {
    let (api, name) = api_and_name(client, &desired);
    if reads.get_opt(&api, &name).await?.is_some() {
        return Ok(false);
    }
    create_if_absent(&api, &desired).await
}
