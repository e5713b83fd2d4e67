//! A process pod's way to the API server, as a real cluster gives it: the `kube-api-access`
//! projected volume the ServiceAccount admission adds (a bound token of the pod's
//! ServiceAccount, `ca.crt` from the namespace's `kube-root-ca.crt`, the namespace) mounted at
//! [`MOUNT_PATH`] in every container, and the `KUBERNETES_SERVICE_HOST` / `_PORT` variables the
//! kubelet sets from the `default/kubernetes` Service. Only where the cluster has that Service
//! ([`crate::in_cluster`]): elsewhere a pod gets neither, since neither would lead anywhere.
//! Automounting follows `automountServiceAccountToken` of the pod, else of its ServiceAccount.

use k8s_openapi::api::core::v1::{Service, ServiceAccount};
use kube::api::Api;
use serde_json::Value;

use crate::in_cluster;
use crate::objects::pod_admission;

/// Where the volume is mounted (what client libraries' in-cluster configuration reads).
pub const MOUNT_PATH: &str = pod_admission::TOKEN_MOUNT_PATH;
/// The volume's name.
pub const VOLUME: &str = "kube-api-access";

/// The `kubernetes` Service's ClusterIP and port, when the cluster has it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ApiService {
    pub host: String,
    pub port: u16,
}

/// The `default/kubernetes` Service, if there is one with a ClusterIP and a port.
pub async fn api_service(client: &kube::Client) -> Option<ApiService> {
    let services: Api<Service> = Api::namespaced(client.clone(), "default");
    let service = services.get_opt(in_cluster::SERVICE_NAME).await.ok()??;
    let spec = service.spec?;
    let host = spec
        .cluster_ip
        .filter(|ip| !ip.is_empty() && ip != "None")?;
    let port = spec
        .ports?
        .first()
        .and_then(|p| u16::try_from(p.port).ok())?;
    Some(ApiService { host, port })
}

/// Whether the pod gets the token volume: its `automountServiceAccountToken`, else its
/// ServiceAccount's, else yes.
pub async fn automount(client: &kube::Client, pod: &Value) -> bool {
    if let Some(own) = pod
        .pointer("/spec/automountServiceAccountToken")
        .and_then(Value::as_bool)
    {
        return own;
    }
    let namespace = pod["metadata"]["namespace"].as_str().unwrap_or_default();
    let account = pod
        .pointer("/spec/serviceAccountName")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .unwrap_or("default");
    let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), namespace);
    match accounts.get_opt(account).await {
        Ok(Some(sa)) => sa.automount_service_account_token.unwrap_or(true),
        _ => true,
    }
}

/// Adds the `kube-api-access` volume to `pod` and mounts it read-only at [`MOUNT_PATH`] in
/// every container (init containers too) that mounts nothing there. A pod that has a token
/// volume already (the ServiceAccount admission's `kube-api-access-*`) is left as it is.
pub fn add_volume(pod: &mut Value) {
    let Some(spec) = pod.get_mut("spec").and_then(Value::as_object_mut) else {
        return;
    };
    let has_one = spec
        .get("volumes")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .any(|v| v["name"].as_str().is_some_and(|n| n.starts_with(VOLUME)));
    if !has_one {
        pod_admission::mount_token_volume(spec, VOLUME);
    }
}

/// The kubelet's variables for the `kubernetes` Service, each unless `env` sets it already.
pub fn add_env(env: &mut Vec<(String, String)>, api: &ApiService) {
    let ApiService { host, port } = api;
    let url = format!("tcp://{host}:{port}");
    let vars = [
        ("KUBERNETES_SERVICE_HOST".to_owned(), host.clone()),
        ("KUBERNETES_SERVICE_PORT".to_owned(), port.to_string()),
        ("KUBERNETES_SERVICE_PORT_HTTPS".to_owned(), port.to_string()),
        ("KUBERNETES_PORT".to_owned(), url.clone()),
        (format!("KUBERNETES_PORT_{port}_TCP"), url),
        (
            format!("KUBERNETES_PORT_{port}_TCP_PROTO"),
            "tcp".to_owned(),
        ),
        (format!("KUBERNETES_PORT_{port}_TCP_PORT"), port.to_string()),
        (format!("KUBERNETES_PORT_{port}_TCP_ADDR"), host.clone()),
    ];
    for (name, value) in vars {
        if !env.iter().any(|(k, _)| *k == name) {
            env.push((name, value));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_volume_is_mounted_where_nothing_else_is() {
        let mut pod = json!({"spec": {"containers": [
            {"name": "a"},
            {"name": "b", "volumeMounts": [{"name": "own", "mountPath": MOUNT_PATH}]}
        ], "volumes": [{"name": "own", "emptyDir": {}}]}});
        add_volume(&mut pod);
        add_volume(&mut pod);
        let volumes = pod["spec"]["volumes"].as_array().unwrap();
        assert_eq!(volumes.iter().filter(|v| v["name"] == VOLUME).count(), 1);
        assert_eq!(
            pod["spec"]["containers"][0]["volumeMounts"],
            json!([{"name": VOLUME, "mountPath": MOUNT_PATH, "readOnly": true}])
        );
        assert_eq!(
            pod["spec"]["containers"][1]["volumeMounts"][0]["name"],
            "own"
        );
        assert_eq!(
            pod["spec"]["containers"][1]["volumeMounts"]
                .as_array()
                .unwrap()
                .len(),
            1
        );
    }

    #[test]
    fn the_variables_do_not_override_the_containers_own() {
        let mut env = vec![("KUBERNETES_SERVICE_PORT".to_owned(), "1".to_owned())];
        let api = ApiService {
            host: "10.96.0.1".to_owned(),
            port: 443,
        };
        add_env(&mut env, &api);
        let get = |k: &str| env.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
        assert_eq!(get("KUBERNETES_SERVICE_HOST"), Some("10.96.0.1"));
        assert_eq!(get("KUBERNETES_SERVICE_PORT"), Some("1"));
        assert_eq!(get("KUBERNETES_PORT_443_TCP"), Some("tcp://10.96.0.1:443"));
    }
}
