//! The kubeconfig written for an embedded cluster: one cluster (plain HTTP on 127.0.0.1, or HTTPS
//! with its certificate authority when RBAC is enforced), one context with namespace "default",
//! and the cluster administrator's bearer token.

/// Context, cluster and user name in the kubeconfig.
pub const CONTEXT: &str = "cinder-sim";

/// A kubeconfig document for the server at `url`, authenticating with `token`.
pub fn kubeconfig_yaml(url: &str, token: &str) -> String {
    kubeconfig_yaml_with_ca(url, token, None)
}

/// Like [`kubeconfig_yaml`], trusting the certificate authority `ca_pem` (for an https `url`).
pub fn kubeconfig_yaml_with_ca(url: &str, token: &str, ca_pem: Option<&str>) -> String {
    use base64::Engine as _;
    let ca = ca_pem
        .map(|pem| {
            format!(
                "\n    certificate-authority-data: {}",
                base64::engine::general_purpose::STANDARD.encode(pem)
            )
        })
        .unwrap_or_default();
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: {CONTEXT}\n  cluster:\n    server: {url}{ca}\ncontexts:\n- name: {CONTEXT}\n  context:\n    cluster: {CONTEXT}\n    user: {CONTEXT}\n    namespace: default\ncurrent-context: {CONTEXT}\nusers:\n- name: {CONTEXT}\n  user:\n    token: {token}\npreferences: {{}}\n"
    )
}
