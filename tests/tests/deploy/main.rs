//! The deployment artefacts checked against the operator: the manifests and RBAC of deploy/ on
//! the embedded cluster, the Grafana dashboard, the operations guide and a real Prometheus scrape.

mod dashboard;
mod manifests;
mod operations_doc;
mod operator_image;
mod operator_under_rbac;
mod prometheus_scrape;
mod rbac;
