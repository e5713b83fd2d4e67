//! The deployment artefacts checked against the operator: the manifests and RBAC of deploy/ on
//! the embedded cluster, the Grafana dashboard, the operations guide, a real Prometheus scrape,
//! and deploy/ on a real Kubernetes control plane (tests/control-plane/).

mod dashboard;
mod embedded_vs_real;
mod manifests;
mod operations_doc;
mod operator_under_rbac;
mod prometheus_scrape;
mod rbac;
mod real_control_plane;
