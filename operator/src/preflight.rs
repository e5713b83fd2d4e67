//! The start-up check of `cinder-operator run`: before any controller starts, one `list`
//! (limit 1) of every kind the operator watches, in the scope it watches it. A kind the API
//! server does not serve (404) is a missing CustomResourceDefinition, named with how to install
//! it; a 403 is missing RBAC, named with the verb and resource the service account needs. Either
//! ends the start with one line, instead of watchers that retry forever and a pod that never
//! becomes ready.

use crate::crd::{Cinder, CinderBackend, CinderBackupBackend};
use crate::kube_ext::resources::{
    cluster_secret_store_resource, mariadb_resource, secret_store_resource,
};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use k8s_openapi::api::batch::v1::{CronJob, Job};
use k8s_openapi::api::core::v1::{ConfigMap, Secret, Service};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::{ApiResource, DynamicObject, ListParams};
use kube::{Api, Client};

/// Where a watched kind comes from, for the message when its CRD is missing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Origin {
    /// A built-in kind of every cluster.
    BuiltIn,
    /// One of the operator's own CRDs.
    Operator,
    /// A CRD of another project the operator works with.
    ThirdParty(&'static str),
}

/// One kind the operator lists and watches, and where.
#[derive(Clone, Debug)]
pub(crate) struct WatchedKind {
    pub resource: ApiResource,
    pub origin: Origin,
    /// The namespace it is listed in (None: all namespaces, or a cluster-scoped kind).
    pub namespace: Option<String>,
}

impl WatchedKind {
    /// `plural.group` (`plural` for the core group), as RBAC rules and CRD names spell it.
    pub(crate) fn qualified(&self) -> String {
        if self.resource.group.is_empty() {
            self.resource.plural.clone()
        } else {
            format!("{}.{}", self.resource.plural, self.resource.group)
        }
    }

    fn scope(&self) -> String {
        match &self.namespace {
            Some(ns) => format!("in namespace {ns}"),
            None => "cluster-wide".to_string(),
        }
    }
}

/// Every kind the controllers watch (see [`crate::controller`]), in the watched namespace
/// (`--namespace`) or all of them.
pub(crate) fn watched_kinds(namespace: Option<&str>) -> Vec<WatchedKind> {
    let scoped = |resource: ApiResource, origin: Origin| WatchedKind {
        resource,
        origin,
        namespace: namespace.map(str::to_string),
    };
    let operator = [
        ApiResource::erase::<Cinder>(&()),
        ApiResource::erase::<CinderBackend>(&()),
        ApiResource::erase::<CinderBackupBackend>(&()),
    ];
    let built_in = [
        ApiResource::erase::<Deployment>(&()),
        ApiResource::erase::<Service>(&()),
        ApiResource::erase::<ConfigMap>(&()),
        ApiResource::erase::<Secret>(&()),
        ApiResource::erase::<PodDisruptionBudget>(&()),
        ApiResource::erase::<HorizontalPodAutoscaler>(&()),
        ApiResource::erase::<NetworkPolicy>(&()),
        ApiResource::erase::<Job>(&()),
        ApiResource::erase::<CronJob>(&()),
    ];
    let mut kinds: Vec<WatchedKind> = operator
        .into_iter()
        .map(|r| scoped(r, Origin::Operator))
        .chain(built_in.into_iter().map(|r| scoped(r, Origin::BuiltIn)))
        .collect();
    kinds.extend([
        scoped(
            secret_store_resource(),
            Origin::ThirdParty("external-secrets (https://external-secrets.io)"),
        ),
        scoped(
            mariadb_resource(),
            Origin::ThirdParty(
                "mariadb-operator (https://github.com/mariadb-operator/mariadb-operator)",
            ),
        ),
    ]);
    if namespace.is_none() {
        kinds.push(WatchedKind {
            resource: cluster_secret_store_resource(),
            origin: Origin::ThirdParty("external-secrets (https://external-secrets.io)"),
            namespace: None,
        });
    }
    kinds
}

/// Why the operator cannot start on this cluster: one line naming the kind and the remedy.
pub(crate) fn refusal(kind: &WatchedKind, status: u16, message: &str) -> String {
    let name = kind.qualified();
    match (status, kind.origin) {
        (404, Origin::Operator) => format!(
            "the CustomResourceDefinition {name} is not installed; install the operator's CRDs with `kubectl apply -k deploy/crds` (or `cinder-operator crdgen | kubectl apply -f -`)"
        ),
        (404, Origin::ThirdParty(project)) => format!(
            "the CustomResourceDefinition {name} is not installed; install {project}, whose CRDs the operator watches"
        ),
        (404, Origin::BuiltIn) => format!(
            "the API server does not serve {name} ({}); the operator needs a cluster that does",
            kind.resource.api_version
        ),
        (403, _) => format!(
            "RBAC: the operator may not list {name} {}; grant the verbs list and watch on {name} (deploy/rbac/cluster-role.yaml): {message}",
            kind.scope()
        ),
        _ => format!(
            "listing {name} {} failed with HTTP {status}: {message}",
            kind.scope()
        ),
    }
}

/// Lists each kind once (limit 1); the first refusal as one line.
pub(crate) async fn check(client: &Client, kinds: &[WatchedKind]) -> Result<(), String> {
    for kind in kinds {
        let api: Api<DynamicObject> = match &kind.namespace {
            Some(ns) => Api::namespaced_with(client.clone(), ns, &kind.resource),
            None => Api::all_with(client.clone(), &kind.resource),
        };
        match api.list_metadata(&ListParams::default().limit(1)).await {
            Ok(_) => {}
            Err(kube::Error::Api(s)) => return Err(refusal(kind, s.code, &s.message)),
            Err(e) => {
                return Err(format!(
                    "listing {} {} failed: {e}",
                    kind.qualified(),
                    kind.scope()
                ));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kind(kinds: &[WatchedKind], plural: &str) -> WatchedKind {
        kinds
            .iter()
            .find(|k| k.resource.plural == plural)
            .cloned()
            .unwrap_or_else(|| panic!("{plural} is watched"))
    }

    #[test]
    fn every_watched_kind_is_checked_in_its_scope() {
        let all = watched_kinds(None);
        assert!(
            all.iter()
                .any(|k| k.resource.plural == "clustersecretstores")
        );
        assert_eq!(kind(&all, "secrets").namespace, None);
        let one = watched_kinds(Some("team"));
        assert!(
            !one.iter()
                .any(|k| k.resource.plural == "clustersecretstores")
        );
        assert_eq!(kind(&one, "cinders").namespace.as_deref(), Some("team"));
        assert_eq!(one.len() + 1, all.len());
    }

    #[test]
    fn a_missing_crd_names_itself_and_how_to_install_it() {
        let kinds = watched_kinds(None);
        let line = refusal(&kind(&kinds, "cinders"), 404, "not found");
        assert!(line.contains("cinders.cinder.openstack.c5c3.io"), "{line}");
        assert!(line.contains("kubectl apply -k deploy/crds"), "{line}");
        let line = refusal(&kind(&kinds, "mariadbs"), 404, "not found");
        assert!(line.contains("mariadbs.k8s.mariadb.com"), "{line}");
        assert!(line.contains("mariadb-operator"), "{line}");
    }

    #[test]
    fn missing_rbac_names_the_verb_the_resource_and_the_scope() {
        let kinds = watched_kinds(Some("team"));
        let line = refusal(&kind(&kinds, "secrets"), 403, "forbidden");
        assert!(
            line.contains("may not list secrets in namespace team"),
            "{line}"
        );
        let line = refusal(&kind(&kinds, "deployments"), 403, "forbidden");
        assert!(line.contains("list deployments.apps"), "{line}");
        assert!(!line.contains('\n'));
    }
}
