//! Helpers of the target-cluster tests: a second cluster to project onto (embedded, or a
//! second real control plane when `CINDER_E2E_CLUSTER=real`), and the
//! labelled kubeconfig Secret that registers it on the management cluster, and the Secret /
//! ConfigMap references of the pod templates a cluster holds, checked against that cluster.

use crate::fixtures::create_namespace;
use crate::harness::Harness;
use crate::test_cluster::TestCluster;
use crate::test_env::NS;
use cinder_operator::target_cluster::{TARGET_CLUSTER_KUBECONFIG_KEY, TARGET_CLUSTER_LABEL};
use cinder_sim::ClusterConfig;
use k8s_openapi::ByteString;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::batch::v1::{CronJob, Job};
use k8s_openapi::api::core::v1::{ConfigMap, KeyToPath, PodSpec, Secret};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Api;
use kube::api::{ListParams, PostParams};

/// A second cluster of the same kind as the management cluster and a client of it; with
/// `with_namespace`, [`NS`] exists on it.
pub async fn target_cluster(with_namespace: bool) -> anyhow::Result<(TestCluster, kube::Client)> {
    let target = TestCluster::start(ClusterConfig::default()).await?;
    let client = target.client().await;
    if with_namespace {
        create_namespace(&client, NS).await?;
    }
    Ok((target, client))
}

/// Registers the target cluster `name` with `kubeconfig` by the Secret `target-<name>` in [`NS`].
pub async fn register(h: &Harness, name: &str, kubeconfig: String) -> anyhow::Result<()> {
    register_with(&h.client, name, kubeconfig).await
}

/// [`register`] through `client` (a management cluster without a [`Harness`]).
pub async fn register_with(
    client: &kube::Client,
    name: &str,
    kubeconfig: String,
) -> anyhow::Result<()> {
    let secrets: Api<Secret> = Api::namespaced(client.clone(), NS);
    let secret = Secret {
        metadata: ObjectMeta {
            name: Some(format!("target-{name}")),
            labels: Some([(TARGET_CLUSTER_LABEL.to_string(), name.to_string())].into()),
            ..Default::default()
        },
        data: Some(
            [(
                TARGET_CLUSTER_KUBECONFIG_KEY.to_string(),
                ByteString(kubeconfig.into_bytes()),
            )]
            .into(),
        ),
        ..Default::default()
    };
    secrets.create(&PostParams::default(), &secret).await?;
    Ok(())
}

/// A Secret or ConfigMap key (None: the whole object) a pod spec references.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Reference {
    /// "Secret" or "ConfigMap".
    pub kind: &'static str,
    pub name: String,
    pub key: Option<String>,
}

/// Every non-optional Secret / ConfigMap (key) `spec` references: the containers' env and
/// envFrom, and the secret, configMap and projected volumes.
pub fn pod_references(spec: &PodSpec) -> Vec<Reference> {
    let required = |optional: Option<bool>| optional != Some(true);
    let mut out = Vec::new();
    let containers = spec
        .containers
        .iter()
        .chain(spec.init_containers.iter().flatten());
    for c in containers {
        for source in c.env.iter().flatten().filter_map(|e| e.value_from.as_ref()) {
            if let Some(s) = source
                .secret_key_ref
                .as_ref()
                .filter(|s| required(s.optional))
            {
                out.push(Reference {
                    kind: "Secret",
                    name: s.name.clone(),
                    key: Some(s.key.clone()),
                });
            }
            if let Some(m) = source
                .config_map_key_ref
                .as_ref()
                .filter(|m| required(m.optional))
            {
                out.push(Reference {
                    kind: "ConfigMap",
                    name: m.name.clone(),
                    key: Some(m.key.clone()),
                });
            }
        }
        for from in c.env_from.iter().flatten() {
            if let Some(s) = from.secret_ref.as_ref().filter(|s| required(s.optional)) {
                out.push(Reference {
                    kind: "Secret",
                    name: s.name.clone(),
                    key: None,
                });
            }
            if let Some(m) = from
                .config_map_ref
                .as_ref()
                .filter(|m| required(m.optional))
            {
                out.push(Reference {
                    kind: "ConfigMap",
                    name: m.name.clone(),
                    key: None,
                });
            }
        }
    }
    let keys = |kind: &'static str, name: &str, items: Option<&Vec<KeyToPath>>| match items {
        Some(items) if !items.is_empty() => items
            .iter()
            .map(|i| Reference {
                kind,
                name: name.to_string(),
                key: Some(i.key.clone()),
            })
            .collect(),
        _ => vec![Reference {
            kind,
            name: name.to_string(),
            key: None,
        }],
    };
    for v in spec.volumes.iter().flatten() {
        if let Some(s) = v.secret.as_ref().filter(|s| required(s.optional)) {
            out.extend(keys(
                "Secret",
                s.secret_name.as_deref().unwrap_or_default(),
                s.items.as_ref(),
            ));
        }
        if let Some(m) = v.config_map.as_ref().filter(|m| required(m.optional)) {
            out.extend(keys("ConfigMap", &m.name, m.items.as_ref()));
        }
        for p in v.projected.iter().flat_map(|p| p.sources.iter().flatten()) {
            if let Some(s) = p.secret.as_ref().filter(|s| required(s.optional)) {
                out.extend(keys("Secret", &s.name, s.items.as_ref()));
            }
            if let Some(m) = p.config_map.as_ref().filter(|m| required(m.optional)) {
                out.extend(keys("ConfigMap", &m.name, m.items.as_ref()));
            }
        }
    }
    out.sort();
    out.dedup();
    out
}

/// The pod templates of every Deployment, Job and CronJob in [`NS`] on `client`, by owner
/// ("Deployment/x").
pub async fn pod_templates(client: &kube::Client) -> anyhow::Result<Vec<(String, PodSpec)>> {
    let lp = ListParams::default();
    let mut out = Vec::new();
    for d in Api::<Deployment>::namespaced(client.clone(), NS)
        .list(&lp)
        .await?
        .items
    {
        if let Some(spec) = d.spec.template.spec {
            out.push((
                format!("Deployment/{}", d.metadata.name.unwrap_or_default()),
                spec,
            ));
        }
    }
    for j in Api::<Job>::namespaced(client.clone(), NS)
        .list(&lp)
        .await?
        .items
    {
        if let Some(spec) = j.spec.and_then(|s| s.template.spec) {
            out.push((format!("Job/{}", j.metadata.name.unwrap_or_default()), spec));
        }
    }
    for c in Api::<CronJob>::namespaced(client.clone(), NS)
        .list(&lp)
        .await?
        .items
    {
        let spec = c.spec.job_template.spec.and_then(|s| s.template.spec);
        if let Some(spec) = spec {
            out.push((
                format!("CronJob/{}", c.metadata.name.unwrap_or_default()),
                spec,
            ));
        }
    }
    Ok(out)
}

/// The references of every pod template in [`NS`] on `client` that the cluster cannot satisfy
/// (the object or the key is missing there), as "owner -> Kind/name[key]".
pub async fn unsatisfied_references(client: &kube::Client) -> anyhow::Result<Vec<String>> {
    let secrets: Api<Secret> = Api::namespaced(client.clone(), NS);
    let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), NS);
    let mut missing = Vec::new();
    for (owner, spec) in pod_templates(client).await? {
        for r in pod_references(&spec) {
            let keys: Option<Vec<String>> = if r.kind == "Secret" {
                secrets.get_opt(&r.name).await?.map(|s| {
                    s.data
                        .unwrap_or_default()
                        .into_keys()
                        .chain(s.string_data.unwrap_or_default().into_keys())
                        .collect()
                })
            } else {
                config_maps.get_opt(&r.name).await?.map(|c| {
                    c.data
                        .unwrap_or_default()
                        .into_keys()
                        .chain(c.binary_data.unwrap_or_default().into_keys())
                        .collect()
                })
            };
            let satisfied = match (&keys, &r.key) {
                (None, _) => false,
                (Some(_), None) => true,
                (Some(keys), Some(k)) => keys.contains(k),
            };
            if !satisfied {
                missing.push(format!(
                    "{owner} -> {}/{}[{}]",
                    r.kind,
                    r.name,
                    r.key.as_deref().unwrap_or("*")
                ));
            }
        }
    }
    Ok(missing)
}
