//! What a pod needs to reach the API server from inside the cluster, as a real control plane
//! provides it: the `default/kubernetes` Service (ClusterIP the first address of the Service
//! range, port 443 named `https`) with its EndpointSlice naming the HTTPS listener (which the
//! service proxy forwards to), and the `kube-root-ca.crt` ConfigMap (key `ca.crt`: the serving
//! certificate) in every namespace, which kube-controller-manager's root-ca-cert-publisher
//! keeps. The node agent mounts both into process pods (the kube-api-access volume and the
//! `KUBERNETES_SERVICE_HOST` / `_PORT` variables). Every cluster keeps the ConfigMap, as every
//! real one does; the Service exists when pods can use it: with the service proxy (ClusterIPs
//! lead somewhere) and an HTTPS listener (RBAC enforced).

use std::net::Ipv4Addr;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Service, ServiceAccount};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::{Api, PostParams};
use kube::runtime::watcher;
use serde_json::json;

use crate::controllers::endpointslices::SERVICE_NAME_LABEL;
use crate::objects::service_ips::ServiceCidr;

/// The Service pods reach the API server by, in namespace `default`.
pub const SERVICE_NAME: &str = "kubernetes";
/// The ConfigMap holding the API server's certificate authority, in every namespace.
pub const ROOT_CA_CONFIG_MAP: &str = "kube-root-ca.crt";
/// The annotation kube-controller-manager's root-ca-cert-publisher writes on it (v1.37.2).
const ROOT_CA_DESCRIPTION: &str = "Contains a CA bundle that can be used to verify the kube-apiserver when using internal endpoints such as the internal service IP or kubernetes.default.svc. No other usage is guaranteed across distributions of Kubernetes clusters.";
/// The port of the `kubernetes` Service (named `https`).
pub const SERVICE_PORT: u16 = 443;

/// The ClusterIP of the `kubernetes` Service: the first address of the range, as the API
/// server reserves it.
pub fn service_ip(range: ServiceCidr) -> Ipv4Addr {
    Ipv4Addr::from(u32::from(range.network()) + 1)
}

/// The names the serving certificate must hold for a client inside the cluster: the ClusterIP
/// and the Service's DNS names.
pub fn certificate_names(ip: Ipv4Addr) -> Vec<String> {
    vec![
        ip.to_string(),
        "kubernetes".to_owned(),
        "kubernetes.default".to_owned(),
        "kubernetes.default.svc".to_owned(),
        "kubernetes.default.svc.cluster.local".to_owned(),
    ]
}

/// Creates the `kubernetes` Service at `ip` and its EndpointSlice naming `127.0.0.1:https_port`
/// (a selector-less Service: no controller rewrites the slice).
pub async fn create_service(
    client: &kube::Client,
    ip: Ipv4Addr,
    https_port: u16,
) -> Result<(), kube::Error> {
    let service: Service = serde_json::from_value(json!({
        "metadata": {"name": SERVICE_NAME, "namespace": "default",
                     "labels": {"component": "apiserver", "provider": "kubernetes"}},
        "spec": {"type": "ClusterIP", "clusterIP": ip.to_string(),
                 "ports": [{"name": "https", "port": SERVICE_PORT, "protocol": "TCP",
                            "targetPort": https_port}]}
    }))
    .map_err(kube::Error::SerdeError)?;
    Api::<Service>::namespaced(client.clone(), "default")
        .create(&PostParams::default(), &service)
        .await?;
    let slice: EndpointSlice = serde_json::from_value(json!({
        "metadata": {"name": SERVICE_NAME, "namespace": "default",
                     "labels": {SERVICE_NAME_LABEL: SERVICE_NAME}},
        "addressType": "IPv4",
        "endpoints": [{"addresses": ["127.0.0.1"], "conditions": {"ready": true}}],
        "ports": [{"name": "https", "port": https_port, "protocol": "TCP"}]
    }))
    .map_err(kube::Error::SerdeError)?;
    Api::<EndpointSlice>::namespaced(client.clone(), "default")
        .create(&PostParams::default(), &slice)
        .await?;
    Ok(())
}

/// Keeps `kube-root-ca.crt` (holding `ca_pem`) and the `default` ServiceAccount in every
/// namespace that is not terminating, until `stop` turns true: the root-ca-cert-publisher's
/// and the serviceaccount controller's job.
pub async fn keep_namespace_defaults(
    client: kube::Client,
    ca_pem: String,
    mut stop: tokio::sync::watch::Receiver<bool>,
) {
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let mut events = watcher(namespaces, watcher::Config::default()).boxed();
    loop {
        let event = tokio::select! {
            _ = stop.changed() => return,
            event = events.next() => event,
        };
        let namespace = match event {
            Some(Ok(watcher::Event::Apply(ns) | watcher::Event::InitApply(ns))) => ns,
            Some(Ok(_)) => continue,
            Some(Err(error)) => {
                tracing::debug!(%error, "namespace defaults: namespace watch failed; retrying");
                tokio::time::sleep(std::time::Duration::from_millis(200)).await;
                continue;
            }
            None => return,
        };
        if namespace.metadata.deletion_timestamp.is_some() {
            continue;
        }
        let Some(name) = namespace.metadata.name else {
            continue;
        };
        let Ok(map) = serde_json::from_value::<ConfigMap>(json!({
            "metadata": {
                "name": ROOT_CA_CONFIG_MAP,
                "namespace": name,
                "annotations": {"kubernetes.io/description": ROOT_CA_DESCRIPTION},
            },
            "data": {"ca.crt": ca_pem},
        })) else {
            continue;
        };
        let params = PostParams {
            field_manager: Some("kube-controller-manager".to_string()),
            ..PostParams::default()
        };
        let account = ServiceAccount {
            metadata: kube::api::ObjectMeta {
                name: Some("default".to_string()),
                namespace: Some(name.clone()),
                ..Default::default()
            },
            ..Default::default()
        };
        let account = Api::<ServiceAccount>::namespaced(client.clone(), &name)
            .create(&params, &account)
            .await
            .map(|_| ());
        let map = Api::<ConfigMap>::namespaced(client.clone(), &name)
            .create(&params, &map)
            .await
            .map(|_| ());
        for (what, created) in [
            ("ServiceAccount default", account),
            (ROOT_CA_CONFIG_MAP, map),
        ] {
            match created {
                Ok(()) => {}
                Err(kube::Error::Api(status)) if status.code == 409 => {}
                Err(error) => {
                    tracing::warn!(%error, namespace = %name, "namespace defaults: {what} not created");
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_service_holds_the_first_address_of_the_range() {
        let range = ServiceCidr::new(Ipv4Addr::new(10, 96, 0, 0), 16).unwrap();
        assert_eq!(service_ip(range), Ipv4Addr::new(10, 96, 0, 1));
        assert!(certificate_names(service_ip(range)).contains(&"10.96.0.1".to_owned()));
    }
}
