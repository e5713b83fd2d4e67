//! Target clusters (docs/target-clusters.md): registration, the
//! gate that runs ahead of every step, and the cleanup of a Cinder's children on its target.
//!
//! A target cluster `<name>` is registered by a Secret labelled
//! `cinder.openstack.c5c3.io/target-cluster=<name>` with a non-empty `kubeconfig` key, in the
//! Cinder's namespace or in the operator's lease namespace. It resolves when that kubeconfig
//! parses into a client. Unresolvable → SecretsReady=False / TargetClusterUnavailable, requeue
//! after 15 s, no finalizer, nothing created. Children on a target carry the ownership label
//! [`OWNER_LABEL`]`=<namespace>.<name>` instead of an owner reference (cross-cluster owner
//! references do not work), and are deleted by that label when the Cinder is deleted.
//!
//! [`TargetClusters`] keeps (in its [`TargetRegistry`] actor) one client per registered kubeconfig (rebuilt when it changes,
//! dropped when its registration goes), ensures the Cinder's namespace on the target, and runs one
//! watch per owned kind per target by [`OWNER_LABEL`] (`watches`), whose stores answer the
//! steps' reads there and whose events wake the owning Cinder.

use crate::crd::Cinder;
use crate::kube_client::ClientLimits;
use crate::kube_ext::ApiErrorExt;
use crate::kube_ext::delete_if_present;
use crate::kube_ext::ownership::{OWNER_LABEL, owner_value};
use crate::kube_ext::reader::ClusterStores;
use crate::pipeline::TargetCluster;
use actix::Addr;
use futures::channel::mpsc::UnboundedSender;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use k8s_openapi::api::batch::v1::{CronJob, Job};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret, Service};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::{DeleteParams, ListParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::core::NamespaceResourceScope;
use kube::runtime::reflector::ObjectRef;
use kube::{Api, Client, Resource, ResourceExt};
use serde::de::DeserializeOwned;

mod abort_on_drop;
mod registry;
mod watches;
pub(crate) use registry::TargetRegistry;
use registry::{
    CachedClient, ForgetTarget, NamespaceExists, NamespaceKnown, RecordClient, WakeChannel,
    WatchInto,
};

/// The label of a target cluster's registration Secret (defined with the other label names).
pub use crate::names::TARGET_CLUSTER_LABEL;
/// The key of a target-cluster Secret holding the kubeconfig.
pub const TARGET_CLUSTER_KUBECONFIG_KEY: &str = "kubeconfig";

/// The registration Secrets of `name`, looking in `namespaces` (deduplicated), with a non-empty
/// kubeconfig.
async fn registration(
    client: &Client,
    reads: &ClusterStores,
    namespaces: &[&str],
    name: &str,
) -> Result<Option<Vec<u8>>, kube::Error> {
    let selector = format!("{TARGET_CLUSTER_LABEL}={name}");
    let mut seen = Vec::new();
    for ns in namespaces {
        if seen.contains(ns) {
            continue;
        }
        seen.push(ns);
        let api: Api<Secret> = Api::namespaced(client.clone(), ns);
        let list = reads
            .list(&api, &ListParams::default().labels(&selector))
            .await?;
        let found = list.into_iter().find_map(|s| {
            s.data
                .and_then(|mut d| d.remove(TARGET_CLUSTER_KUBECONFIG_KEY))
                .filter(|v| !v.0.is_empty())
        });
        if let Some(kubeconfig) = found {
            return Ok(Some(kubeconfig.0));
        }
    }
    Ok(None)
}

/// A resolved target: the key of its entry (the kubeconfig's digest), its client and the stores
/// of its watches (empty while none run).
struct Resolved {
    digest: String,
    client: Client,
    stores: ClusterStores,
}

/// Why a target cluster does not resolve (no secret material in the message).
#[derive(Debug, thiserror::Error)]
pub(crate) enum Unresolvable {
    #[error("target cluster {0:?} is not registered")]
    NotRegistered(String),
    #[error("target cluster {0:?}: the registered kubeconfig does not load: {1}")]
    BadKubeconfig(String, String),
    #[error("target cluster {0:?} does not answer: {1}")]
    Unreachable(String, String),
    #[error(
        "target cluster {0:?}: the ownership label value {1:?} of this Cinder is {len} characters, more than a label value may hold (63); use a shorter namespace or name",
        len = .1.len()
    )]
    OwnerLabelTooLong(String, String),
}

/// The longest label value Kubernetes accepts.
const MAX_LABEL_VALUE: usize = 63;

/// The ownership label value of `cinder`, refused when it cannot be a label value.
fn checked_owner(cinder: &Cinder, target: &str) -> Result<String, Unresolvable> {
    let owner = owner_value(&cinder.namespace().unwrap_or_default(), &cinder.name_any());
    if owner.len() > MAX_LABEL_VALUE {
        return Err(Unresolvable::OwnerLabelTooLong(target.to_string(), owner));
    }
    Ok(owner)
}

/// Builds a client from kubeconfig bytes (its current context). The error names what failed,
/// never the content.
pub(crate) async fn client_from_kubeconfig(
    raw: &[u8],
    limits: Option<ClientLimits>,
) -> Result<Client, String> {
    let text = std::str::from_utf8(raw).map_err(|_| "not UTF-8".to_string())?;
    let kubeconfig = Kubeconfig::from_yaml(text).map_err(|_| "not a kubeconfig".to_string())?;
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .map_err(|_| "incomplete kubeconfig (context, cluster or user)".to_string())?;
    let client = match limits {
        Some(limits) => crate::kube_client::throttled(config, limits),
        None => Client::try_from(config),
    };
    client.map_err(|_| "no client could be built from it".to_string())
}

async fn delete_labelled<K>(
    client: &Client,
    namespace: &str,
    selector: &str,
    deleted: &mut Vec<String>,
) -> Result<(), kube::Error>
where
    K: Resource<Scope = NamespaceResourceScope> + Clone + DeserializeOwned + std::fmt::Debug,
    K::DynamicType: Default,
{
    let api: Api<K> = Api::namespaced(client.clone(), namespace);
    let kind = K::kind(&K::DynamicType::default()).to_string();
    delete_listed(&api, &kind, selector, deleted).await
}

/// Deletes every child of the Cinder `owner` (`<namespace>.<name>`) on a target cluster by the
/// ownership label, in the Cinder's namespace, the VPAs and the HTTPRoute included where the
/// target serves those kinds; returns the `Kind/name` of each child deleted.
pub(crate) async fn delete_children(
    target: &Client,
    namespace: &str,
    owner: &str,
) -> Result<Vec<String>, kube::Error> {
    let selector = format!("{OWNER_LABEL}={owner}");
    let mut deleted = Vec::new();
    delete_labelled::<Deployment>(target, namespace, &selector, &mut deleted).await?;
    delete_labelled::<Service>(target, namespace, &selector, &mut deleted).await?;
    delete_labelled::<ConfigMap>(target, namespace, &selector, &mut deleted).await?;
    delete_labelled::<Secret>(target, namespace, &selector, &mut deleted).await?;
    delete_labelled::<PodDisruptionBudget>(target, namespace, &selector, &mut deleted).await?;
    delete_labelled::<HorizontalPodAutoscaler>(target, namespace, &selector, &mut deleted).await?;
    delete_labelled::<NetworkPolicy>(target, namespace, &selector, &mut deleted).await?;
    delete_labelled::<Job>(target, namespace, &selector, &mut deleted).await?;
    delete_labelled::<CronJob>(target, namespace, &selector, &mut deleted).await?;
    for optional in [
        crate::kube_ext::capability::VERTICAL_POD_AUTOSCALER,
        crate::kube_ext::capability::HTTP_ROUTE,
    ] {
        delete_labelled_optional(target, namespace, &selector, optional, &mut deleted).await?;
    }
    Ok(deleted)
}

/// As [`delete_labelled`] for a CRD-backed kind the target may not serve (a 404 on the list:
/// nothing of it to delete).
async fn delete_labelled_optional(
    client: &Client,
    namespace: &str,
    selector: &str,
    kind: crate::kube_ext::capability::OptionalKind,
    deleted: &mut Vec<String>,
) -> Result<(), kube::Error> {
    let api = kind.namespaced(client, namespace);
    match delete_listed(&api, kind.kind, selector, deleted).await {
        Err(e) if e.is_not_found() => Ok(()),
        done => done,
    }
}

/// Deletes (in the background) each object of `api` that `selector` matches and that is not
/// already being deleted, adding `kind/name` to `deleted` for each deleted or already going. A
/// 404 on the list is the caller's to judge; one on a delete means the object is gone already.
async fn delete_listed<K>(
    api: &Api<K>,
    kind: &str,
    selector: &str,
    deleted: &mut Vec<String>,
) -> Result<(), kube::Error>
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug,
{
    let list = api
        .list_metadata(&ListParams::default().labels(selector))
        .await?;
    for item in list.items {
        let Some(name) = item.metadata.name else {
            continue;
        };
        if item.metadata.deletion_timestamp.is_none()
            && !delete_if_present(api, &name, &DeleteParams::background()).await?
        {
            continue;
        }
        deleted.push(format!("{kind}/{name}"));
    }
    Ok(())
}

/// The target clusters the operator has resolved (see the module docs). Cheap to clone; the
/// resolved state lives in the [`TargetRegistry`] actor.
#[derive(Clone)]
pub struct TargetClusters {
    management: Client,
    management_reads: ClusterStores,
    lease_namespace: String,
    watch_namespace: Option<String>,
    client_limits: Option<ClientLimits>,
    registry: Addr<TargetRegistry>,
}

impl TargetClusters {
    /// Registrations are read through `management` (from its watch stores `management_reads`)
    /// in the Cinder's namespace and in `lease_namespace`; target watches are scoped to `watch_namespace` when set; a target's
    /// client is throttled by `client_limits` when given. `registry` is the started actor holding
    /// the resolved state.
    pub(crate) fn new(
        management: Client,
        management_reads: ClusterStores,
        lease_namespace: &str,
        watch_namespace: Option<&str>,
        client_limits: Option<ClientLimits>,
        registry: Addr<TargetRegistry>,
    ) -> Self {
        TargetClusters {
            management,
            management_reads,
            lease_namespace: lease_namespace.to_string(),
            watch_namespace: watch_namespace.map(str::to_string),
            client_limits,
            registry,
        }
    }

    /// From here on every target resolved gets a watcher over the owned kinds whose events send
    /// the owning Cinder to `wake`; targets resolved before are resolved again (with one).
    pub(crate) fn watch_into(&self, wake: UnboundedSender<ObjectRef<Cinder>>) {
        self.registry.do_send(WatchInto(Some(wake)));
    }

    /// Stops every target watcher and forgets the resolved clients.
    pub(crate) fn stop_watches(&self) {
        self.registry.do_send(WatchInto(None));
    }

    /// A client for the target `name` as registered for a Cinder in `namespace` (`Ok(Err(..))`
    /// when it does not resolve). A client is built once per kubeconfig content.
    pub(crate) async fn resolve(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<Result<Client, Unresolvable>, kube::Error> {
        Ok(self.resolve_keyed(namespace, name).await?.map(|r| r.client))
    }

    /// [`Self::resolve`] with the key (kubeconfig digest) of the resolved entry.
    async fn resolve_keyed(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<Result<Resolved, Unresolvable>, kube::Error> {
        let namespaces = [namespace, self.lease_namespace.as_str()];
        let Some(raw) =
            registration(&self.management, &self.management_reads, &namespaces, name).await?
        else {
            self.forget_name(name);
            return Ok(Err(Unresolvable::NotRegistered(name.to_string())));
        };
        let digest = crate::planning::digest::sha256_hex(&raw);
        let cached = CachedClient {
            digest: digest.clone(),
            name: name.to_string(),
        };
        // A registry that is gone (shutdown) only costs the cache: the client is built anew.
        if let Ok(Some((client, stores))) = self.registry.send(cached).await {
            return Ok(Ok(Resolved {
                digest,
                client,
                stores,
            }));
        }
        let client = match client_from_kubeconfig(&raw, self.client_limits).await {
            Ok(c) => c,
            Err(why) => {
                self.forget_name(name);
                return Ok(Err(Unresolvable::BadKubeconfig(name.to_string(), why)));
            }
        };
        let watch = match self.registry.send(WakeChannel).await {
            Ok(Some(wake)) => Some(watches::start(
                &client,
                self.watch_namespace.as_deref(),
                wake,
            )),
            _ => None,
        };
        let record = RecordClient {
            digest: digest.clone(),
            name: name.to_string(),
            client: client.clone(),
            watch,
        };
        let (client, stores) = self
            .registry
            .send(record)
            .await
            .unwrap_or_else(|_| (client, ClusterStores::default()));
        Ok(Ok(Resolved {
            digest,
            client,
            stores,
        }))
    }

    /// The target `cinder` projects onto (`Ok(Ok(None))` when it names none), with the Cinder's
    /// namespace ensured on it.
    pub(crate) async fn resolve_for(
        &self,
        cinder: &Cinder,
    ) -> Result<Result<Option<TargetCluster>, Unresolvable>, kube::Error> {
        let Some(target) = &cinder.spec.target_cluster_ref else {
            return Ok(Ok(None));
        };
        if let Err(why) = checked_owner(cinder, &target.name) {
            return Ok(Err(why));
        }
        let namespace = cinder.namespace().unwrap_or_default();
        let resolved = match self.resolve_keyed(&namespace, &target.name).await? {
            Ok(r) => r,
            Err(why) => return Ok(Err(why)),
        };
        let Resolved {
            digest,
            client,
            stores,
        } = resolved;
        if let Err(e) = self.ensure_namespace(&digest, &client, &namespace).await {
            return Ok(Err(Unresolvable::Unreachable(
                target.name.clone(),
                short_error(&e),
            )));
        }
        Ok(Ok(Some(TargetCluster {
            name: target.name.clone(),
            client,
            stores,
        })))
    }

    fn forget_name(&self, name: &str) {
        self.registry.do_send(ForgetTarget(name.to_string()));
    }

    /// Creates `namespace` on the target of entry `key` unless it is known to exist there.
    async fn ensure_namespace(
        &self,
        key: &str,
        client: &Client,
        namespace: &str,
    ) -> Result<(), kube::Error> {
        let known = NamespaceKnown {
            digest: key.to_string(),
            namespace: namespace.to_string(),
        };
        if self.registry.send(known).await.unwrap_or(false) {
            return Ok(());
        }
        let api: Api<Namespace> = Api::all(client.clone());
        if api.get_opt(namespace).await?.is_none() {
            let ns = Namespace {
                metadata: kube::api::ObjectMeta {
                    name: Some(namespace.to_string()),
                    ..Default::default()
                },
                ..Default::default()
            };
            match api.create(&PostParams::default(), &ns).await {
                Ok(_) => {}
                Err(e) if e.is_already_exists() => {}
                Err(e) => return Err(e),
            }
        }
        self.registry.do_send(NamespaceExists {
            digest: key.to_string(),
            namespace: namespace.to_string(),
        });
        Ok(())
    }
}

/// A kube error in one line without a response body.
fn short_error(e: &kube::Error) -> String {
    match e {
        kube::Error::Api(s) => format!("{} {}", s.code, s.reason),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kube_ext::ownership::owner_of;

    #[tokio::test]
    async fn a_broken_kubeconfig_names_the_problem_not_the_content() {
        let Err(why) = client_from_kubeconfig(b"token: s3cr3t\n: [", None).await else {
            panic!("a broken kubeconfig loaded");
        };
        assert!(!why.contains("s3cr3t"), "{why}");
        let Err(why) = client_from_kubeconfig(b"apiVersion: v1\nkind: Config\n", None).await else {
            panic!("an empty kubeconfig loaded");
        };
        assert!(why.contains("incomplete"), "{why}");
    }

    #[test]
    fn an_ownership_label_longer_than_a_label_value_is_refused() {
        let cinder = crate::test_fixtures::cinder_named;
        assert_eq!(
            checked_owner(&cinder("openstack", "cinder"), "edge").ok(),
            Some("openstack.cinder".to_string())
        );
        let fits = cinder(&"n".repeat(19), &"c".repeat(43));
        assert!(checked_owner(&fits, "edge").is_ok());
        let long = cinder(&"n".repeat(20), &"c".repeat(43));
        let why = checked_owner(&long, "edge").expect_err("64 characters");
        assert!(why.to_string().contains("64 characters"), "{why}");
    }

    #[test]
    fn the_owner_label_names_its_cinder() {
        let value = owner_value("openstack", "cinder.a");
        assert_eq!(value, "openstack.cinder.a");
        let owner = owner_of::<Cinder>(&value).expect("an owner");
        assert_eq!(owner.name, "cinder.a");
        assert_eq!(owner.namespace.as_deref(), Some("openstack"));
        assert!(owner_of::<Cinder>("nodot").is_none());
        assert!(owner_of::<Cinder>(".name").is_none());
        assert!(owner_of::<Cinder>("ns.").is_none());
    }
}
