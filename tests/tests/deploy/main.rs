//! The deployment artefacts checked against the operator: the manifests and RBAC of deploy/ on
//! the embedded cluster, the operator's own Deployment running on its process nodes, the
//! Grafana dashboard, the operations guide, a real Prometheus scrape,
//! the rendered Cinder config and Job commands against real Cinder of each release, and deploy/
//! on a real Kubernetes control plane (tests/control-plane/).

mod dashboard;
mod embedded_vs_real;
mod manifests;
mod network_policy_tracing;
mod operations_doc;
mod operator_deployment;
mod operator_image;
mod operator_under_rbac;
mod prometheus_scrape;
mod rbac;
mod real_cinder_ceph;
mod real_cinder_config;
mod real_cinder_connection_cap;
mod real_cinder_convergence;
mod real_cinder_database;
mod real_cinder_db_errors;
mod real_cinder_detach;
mod real_cinder_health;
mod real_cinder_jobs;
mod real_cinder_keystone;
mod real_cinder_purge;
mod real_cinder_rotation;
mod real_cinder_upgrade;
mod real_control_plane;
