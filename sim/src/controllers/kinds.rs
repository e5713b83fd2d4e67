//! The third-party kinds the fixtures install and the simulated controllers act on, with the
//! `ApiResource` a dynamic client needs for each.

use kube::core::{ApiResource, GroupVersionKind};

/// One third-party kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Kind {
    /// API group.
    pub group: &'static str,
    /// Served version.
    pub version: &'static str,
    /// Kind.
    pub kind: &'static str,
    /// Plural resource name.
    pub plural: &'static str,
    /// Namespaced (true) or cluster-scoped.
    pub namespaced: bool,
}

impl Kind {
    /// The `ApiResource` for `Api::<DynamicObject>::*_with`.
    pub fn resource(&self) -> ApiResource {
        ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk(self.group, self.version, self.kind),
            self.plural,
        )
    }

    /// The name of the kind's CustomResourceDefinition.
    pub fn crd_name(&self) -> String {
        format!("{}.{}", self.plural, self.group)
    }
}

const fn kind(
    group: &'static str,
    version: &'static str,
    kind: &'static str,
    plural: &'static str,
    namespaced: bool,
) -> Kind {
    Kind {
        group,
        version,
        kind,
        plural,
        namespaced,
    }
}

/// external-secrets.io/v1 SecretStore.
pub const SECRET_STORE: Kind = kind(
    "external-secrets.io",
    "v1",
    "SecretStore",
    "secretstores",
    true,
);
/// external-secrets.io/v1 ClusterSecretStore.
pub const CLUSTER_SECRET_STORE: Kind = kind(
    "external-secrets.io",
    "v1",
    "ClusterSecretStore",
    "clustersecretstores",
    false,
);
/// external-secrets.io/v1 ExternalSecret.
pub const EXTERNAL_SECRET: Kind = kind(
    "external-secrets.io",
    "v1",
    "ExternalSecret",
    "externalsecrets",
    true,
);
/// k8s.mariadb.com/v1alpha1 MariaDB.
pub const MARIADB: Kind = kind("k8s.mariadb.com", "v1alpha1", "MariaDB", "mariadbs", true);
/// k8s.mariadb.com/v1alpha1 Database.
pub const DATABASE: Kind = kind("k8s.mariadb.com", "v1alpha1", "Database", "databases", true);
/// k8s.mariadb.com/v1alpha1 User.
pub const USER: Kind = kind("k8s.mariadb.com", "v1alpha1", "User", "users", true);
/// k8s.mariadb.com/v1alpha1 Grant.
pub const GRANT: Kind = kind("k8s.mariadb.com", "v1alpha1", "Grant", "grants", true);
/// gateway.networking.k8s.io/v1 Gateway.
pub const GATEWAY: Kind = kind(
    "gateway.networking.k8s.io",
    "v1",
    "Gateway",
    "gateways",
    true,
);
/// gateway.networking.k8s.io/v1 HTTPRoute.
pub const HTTP_ROUTE: Kind = kind(
    "gateway.networking.k8s.io",
    "v1",
    "HTTPRoute",
    "httproutes",
    true,
);
/// autoscaling.k8s.io/v1 VerticalPodAutoscaler.
pub const VERTICAL_POD_AUTOSCALER: Kind = kind(
    "autoscaling.k8s.io",
    "v1",
    "VerticalPodAutoscaler",
    "verticalpodautoscalers",
    true,
);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controllers::config::FixtureSet;
    use crate::controllers::fixtures::fixture_crds;

    #[test]
    fn every_kind_matches_its_fixture() {
        let crds = fixture_crds(FixtureSet::ALL).unwrap();
        for kind in [
            SECRET_STORE,
            CLUSTER_SECRET_STORE,
            MARIADB,
            DATABASE,
            USER,
            GRANT,
            GATEWAY,
            HTTP_ROUTE,
            VERTICAL_POD_AUTOSCALER,
        ] {
            let crd = crds
                .iter()
                .find(|c| c.metadata.name.as_deref() == Some(kind.crd_name().as_str()))
                .unwrap();
            assert_eq!(crd.spec.names.kind, kind.kind);
            assert_eq!(crd.spec.versions[0].name, kind.version);
            assert_eq!(crd.spec.scope == "Namespaced", kind.namespaced);
            assert_eq!(
                kind.resource().api_version,
                format!("{}/{}", kind.group, kind.version)
            );
        }
    }
}
