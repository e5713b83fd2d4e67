//! The embedded cluster's in-process tests: one module per scenario, driven through kube-rs
//! clients and raw HTTP against a cluster started in the test.

mod api_forms;
mod cel_rules;
mod ceph_server;
mod common;
mod controllers_behaviour;
mod endpoint_slices;
mod faults_and_proxy;
mod fuzz_requests;
mod http_surface;
mod kube_client;
mod kube_watch;
mod lifecycle;
mod limits;
mod malformed;
mod nodes_and_pods;
mod pod_lifecycle;
mod process_nodes;
mod randomized;
mod rbac;
mod real_keystone;
mod real_servers;
mod service_proxy;
mod slow_clients;
mod watch_forms;
mod workload_pods;
mod write_record;
