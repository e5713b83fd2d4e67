//! The third-party CRD fixtures (external-secrets, mariadb-operator, Gateway API, VPA): the
//! YAML in `sim/fixtures/`, embedded at build time, and their installation / removal through
//! the API like `kubectl apply -f` would.

use std::time::Duration;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Client;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};

use super::config::FixtureSet;

const EXTERNAL_SECRETS: &str = include_str!("../../fixtures/external-secrets.yaml");
const MARIADB: &str = include_str!("../../fixtures/mariadb.yaml");
const GATEWAY_API: &str = include_str!("../../fixtures/gateway-api.yaml");
const VPA: &str = include_str!("../../fixtures/vpa.yaml");

/// What `cinder-operator run --embedded` applies beside deploy/samples: the objects the samples
/// name that a real cluster's owner provides (the ClusterSecretStore with sample values in
/// external-secrets' fake provider, the MariaDB cluster), as (path in the repository, YAML).
pub const RUN_EMBEDDED: &[(&str, &str)] = &[
    (
        "sim/fixtures/run-embedded/10-secret-store.yaml",
        include_str!("../../fixtures/run-embedded/10-secret-store.yaml"),
    ),
    (
        "sim/fixtures/run-embedded/20-mariadb.yaml",
        include_str!("../../fixtures/run-embedded/20-mariadb.yaml"),
    ),
];

/// The embedded YAML documents selected by `set`.
fn selected_yaml(set: FixtureSet) -> Vec<&'static str> {
    [
        (set.external_secrets, EXTERNAL_SECRETS),
        (set.mariadb, MARIADB),
        (set.gateway_api, GATEWAY_API),
        (set.vpa, VPA),
    ]
    .into_iter()
    .filter_map(|(on, yaml)| on.then_some(yaml))
    .collect()
}

/// The CRDs of the fixtures selected by `set`, parsed from the embedded YAML.
pub fn fixture_crds(set: FixtureSet) -> Result<Vec<CustomResourceDefinition>, serde_norway::Error> {
    let mut crds = Vec::new();
    for yaml in selected_yaml(set) {
        for document in serde_norway::Deserializer::from_str(yaml) {
            let crd = <CustomResourceDefinition as serde::Deserialize>::deserialize(document)?;
            crds.push(crd);
        }
    }
    Ok(crds)
}

fn served_resource(crd: &CustomResourceDefinition) -> Option<ApiResource> {
    let version = crd.spec.versions.iter().find(|v| v.served)?;
    let gvk = GroupVersionKind::gvk(&crd.spec.group, &version.name, &crd.spec.names.kind);
    Some(ApiResource::from_gvk_with_plural(
        &gvk,
        &crd.spec.names.plural,
    ))
}

fn invalid_fixture(error: serde_norway::Error) -> kube::Error {
    kube::Error::Service(format!("embedded CRD fixture does not parse: {error}").into())
}

/// Installs the fixtures selected by `set` (existing CRDs are left as they are) and waits
/// until every new kind is served.
pub async fn install(client: Client, set: FixtureSet) -> Result<(), kube::Error> {
    let crds = fixture_crds(set).map_err(invalid_fixture)?;
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    for crd in &crds {
        match api.create(&PostParams::default(), crd).await {
            Ok(_) => {}
            Err(kube::Error::Api(status)) if status.code == 409 => {}
            Err(error) => return Err(error),
        }
    }
    for crd in &crds {
        if let Some(resource) = served_resource(crd) {
            wait_served(client.clone(), &resource).await?;
        }
    }
    Ok(())
}

/// Waits (up to 30 s) until listing `resource` succeeds.
async fn wait_served(client: Client, resource: &ApiResource) -> Result<(), kube::Error> {
    let api: Api<DynamicObject> = Api::all_with(client, resource);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        match api.list(&ListParams::default().limit(1)).await {
            Ok(_) => return Ok(()),
            Err(error) if tokio::time::Instant::now() >= deadline => return Err(error),
            Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
}

/// Deletes the fixture CRDs selected by `set` (absent ones are fine), so a test can observe
/// "CRD not installed" behaviour.
pub async fn uninstall(client: Client, set: FixtureSet) -> Result<(), kube::Error> {
    let crds = fixture_crds(set).map_err(invalid_fixture)?;
    let api: Api<CustomResourceDefinition> = Api::all(client);
    for crd in &crds {
        let name = crd.metadata.name.clone().unwrap_or_default();
        match api.delete(&name, &DeleteParams::default()).await {
            Ok(_) => {}
            Err(kube::Error::Api(status)) if status.code == 404 => {}
            Err(error) => return Err(error),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_fixture_parses_with_status_and_printer_columns() {
        let crds = fixture_crds(FixtureSet::ALL).unwrap();
        let names: Vec<_> = crds
            .iter()
            .filter_map(|c| c.metadata.name.clone())
            .collect();
        assert_eq!(
            names,
            [
                "secretstores.external-secrets.io",
                "clustersecretstores.external-secrets.io",
                "externalsecrets.external-secrets.io",
                "mariadbs.k8s.mariadb.com",
                "databases.k8s.mariadb.com",
                "users.k8s.mariadb.com",
                "grants.k8s.mariadb.com",
                "gateways.gateway.networking.k8s.io",
                "httproutes.gateway.networking.k8s.io",
                "verticalpodautoscalers.autoscaling.k8s.io",
            ]
        );
        for crd in &crds {
            assert_eq!(crd.spec.versions.len(), 1);
            let version = &crd.spec.versions[0];
            assert!(version.served && version.storage);
            assert!(
                version
                    .subresources
                    .as_ref()
                    .and_then(|s| s.status.as_ref())
                    .is_some()
            );
            assert!(
                version
                    .additional_printer_columns
                    .as_ref()
                    .is_some_and(|c| c.len() >= 2)
            );
            let schema = version
                .schema
                .as_ref()
                .and_then(|s| s.open_api_v3_schema.as_ref())
                .unwrap();
            assert_eq!(schema.type_.as_deref(), Some("object"));
            assert!(served_resource(crd).is_some());
            let expected = format!("{}.{}", crd.spec.names.plural, crd.spec.group);
            assert_eq!(crd.metadata.name.as_deref(), Some(expected.as_str()));
        }
        let cluster_scoped: Vec<_> = crds
            .iter()
            .filter(|c| c.spec.scope == "Cluster")
            .map(|c| c.spec.names.kind.as_str())
            .collect();
        assert_eq!(cluster_scoped, ["ClusterSecretStore"]);
    }

    #[test]
    fn fixture_set_selects_groups() {
        let set = FixtureSet {
            gateway_api: false,
            vpa: false,
            ..FixtureSet::ALL
        };
        let groups: Vec<_> = fixture_crds(set)
            .unwrap()
            .into_iter()
            .map(|c| c.spec.group)
            .collect();
        assert!(
            !groups
                .iter()
                .any(|g| g == "gateway.networking.k8s.io" || g == "autoscaling.k8s.io")
        );
        assert_eq!(groups.len(), 7);
        assert!(fixture_crds(FixtureSet::NONE).unwrap().is_empty());
    }
}
