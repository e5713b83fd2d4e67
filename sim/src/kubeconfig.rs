//! The kubeconfig written for an embedded cluster: one cluster (plain HTTP on 127.0.0.1), one
//! context with namespace "default", and a user without credentials (the server has no auth).

/// Context, cluster and user name in the kubeconfig.
pub const CONTEXT: &str = "cinder-sim";

/// A kubeconfig document for the server at `url`.
pub fn kubeconfig_yaml(url: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: {CONTEXT}\n  cluster:\n    server: {url}\ncontexts:\n- name: {CONTEXT}\n  context:\n    cluster: {CONTEXT}\n    user: {CONTEXT}\n    namespace: default\ncurrent-context: {CONTEXT}\nusers:\n- name: {CONTEXT}\n  user: {{}}\npreferences: {{}}\n"
    )
}
