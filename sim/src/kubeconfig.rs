//! The kubeconfig written for an embedded cluster: one cluster (plain HTTP on 127.0.0.1), one
//! context with namespace "default", and the cluster administrator's bearer token.

/// Context, cluster and user name in the kubeconfig.
pub const CONTEXT: &str = "cinder-sim";

/// A kubeconfig document for the server at `url`, authenticating with `token`.
pub fn kubeconfig_yaml(url: &str, token: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: {CONTEXT}\n  cluster:\n    server: {url}\ncontexts:\n- name: {CONTEXT}\n  context:\n    cluster: {CONTEXT}\n    user: {CONTEXT}\n    namespace: default\ncurrent-context: {CONTEXT}\nusers:\n- name: {CONTEXT}\n  user:\n    token: {token}\npreferences: {{}}\n"
    )
}
