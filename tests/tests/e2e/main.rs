//! End-to-end scenarios of the operator against the embedded cluster, one module per scenario.
//! Each test starts its own embedded cluster (listening on port 0) and its own operator, so the
//! tests of this binary run concurrently without sharing state.

mod backend_hiccups;
mod config;
mod config_edits;
mod database_provisioning;
mod deletion_flow;
mod detach_backend;
mod device_lock_priorities;
mod first_pass;
mod first_pass_status;
mod gates;
mod group_autoscaling;
mod group_health_check;
mod group_http_route;
mod group_network_policy;
mod group_ready;
mod invalid;
mod job_counters_restart;
mod no_secret_leaks;
mod process_model;
mod purge_beside_jobs;
mod purge_runs;
mod reconcile_errors;
mod replaced_job_pod;
mod rotation;
mod satellites;
mod target_cluster_deletion;
mod target_cluster_projection;
mod target_cluster_references;
mod two_operators_detach;
mod upgrade_flow;
mod upgrade_lost_replace;
mod upgrade_two_operators;
mod waiting_reasons;
mod workload_shape;
mod workloads_backup;
mod workloads_happy_path;
mod workloads_rotation;
mod workloads_upgrade_flip;
