//! The kubeconfig written for an embedded cluster: one cluster (plain HTTP on 127.0.0.1, or HTTPS
//! with its certificate authority when RBAC is enforced), one context with namespace "default",
//! and the cluster administrator's bearer token; kube's own [`Kubeconfig`] type, serialized.

use kube::config::{
    AuthInfo, Cluster, Context, Kubeconfig, NamedAuthInfo, NamedCluster, NamedContext, Preferences,
};

/// Context, cluster and user name in the kubeconfig.
pub const CONTEXT: &str = "cinder-sim";

/// A kubeconfig document for the server at `url`, authenticating with `token`.
pub fn kubeconfig_yaml(url: &str, token: &str) -> String {
    kubeconfig_yaml_with_ca(url, token, None)
}

/// Like [`kubeconfig_yaml`], trusting the certificate authority `ca_pem` (for an https `url`).
pub fn kubeconfig_yaml_with_ca(url: &str, token: &str, ca_pem: Option<&str>) -> String {
    use base64::Engine as _;
    let config = Kubeconfig {
        api_version: Some("v1".to_string()),
        kind: Some("Config".to_string()),
        clusters: vec![NamedCluster {
            name: CONTEXT.to_string(),
            cluster: Some(Cluster {
                server: Some(url.to_string()),
                certificate_authority_data: ca_pem
                    .map(|pem| base64::engine::general_purpose::STANDARD.encode(pem)),
                ..Default::default()
            }),
            ..Default::default()
        }],
        contexts: vec![NamedContext {
            name: CONTEXT.to_string(),
            context: Some(Context {
                cluster: CONTEXT.to_string(),
                user: Some(CONTEXT.to_string()),
                namespace: Some("default".to_string()),
                ..Default::default()
            }),
            ..Default::default()
        }],
        current_context: Some(CONTEXT.to_string()),
        auth_infos: vec![NamedAuthInfo {
            name: CONTEXT.to_string(),
            auth_info: Some(AuthInfo {
                token: Some(token.to_string().into()),
                ..Default::default()
            }),
            ..Default::default()
        }],
        preferences: Some(Preferences::default()),
        ..Default::default()
    };
    // A kubeconfig of these types always serializes (strings and maps only).
    serde_norway::to_string(&config).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What is written reads back as the same cluster, context and credential (as kubectl and
    /// kube read it), with and without a certificate authority.
    #[test]
    fn the_kubeconfig_reads_back() {
        for ca in [
            None,
            Some("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"),
        ] {
            let text = kubeconfig_yaml_with_ca("https://127.0.0.1:6443", "t0ken", ca);
            let read = Kubeconfig::from_yaml(&text).expect("parses");
            assert_eq!(read.current_context.as_deref(), Some(CONTEXT));
            let cluster = read.clusters[0].cluster.clone().expect("cluster");
            assert_eq!(cluster.server.as_deref(), Some("https://127.0.0.1:6443"));
            assert_eq!(cluster.certificate_authority_data.is_some(), ca.is_some());
            let context = read.contexts[0].context.clone().expect("context");
            assert_eq!(context.namespace.as_deref(), Some("default"));
            assert!(
                read.auth_infos[0]
                    .auth_info
                    .clone()
                    .expect("user")
                    .token
                    .is_some()
            );
            let raw: serde_norway::Value = serde_norway::from_str(&text).expect("YAML");
            assert_eq!(raw["users"][0]["user"]["token"].as_str(), Some("t0ken"));
            assert!(
                text.contains("apiVersion: v1") && text.contains("kind: Config"),
                "{text}"
            );
        }
    }
}
