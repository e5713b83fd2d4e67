//! Integration tests of the operator crate, one module per scenario: the CRDs and their CLI, the
//! pipeline engine with fake steps, the metrics registry, the endpoints over real listeners, and
//! the binary and in-process runs against embedded clusters (each test its own cluster, ports 0).

mod support;

mod crd_cli;
mod crd_embedded_admission;
mod crd_generated;
mod crd_validation;
mod create_if_absent;
mod database_job_replace;
mod endpoints_admin;
mod lock_plan_cli;
mod pipeline_engine;
mod pipeline_metrics;
mod run_binary;
mod run_embedded_operator;
mod run_leader_binary;
mod run_leader_election;
mod shards_membership;
