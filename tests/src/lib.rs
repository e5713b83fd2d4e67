//! cinder-e2e: end-to-end tests across the crates, run against the embedded cluster.
//! The tests live in a few binaries, `tests/tests/e2e/` (operator scenarios),
//! `tests/tests/deploy/` (the deployment artefacts), `tests/tests/observability/` and
//! `tests/tests/reliability/` (crashes, fault storms, steady state), a module per scenario; this library holds
//! their shared helpers: start an embedded cluster with the CRDs and the operator running
//! in-process ([`Harness`]), the usual fixtures (store, credential Secrets, a Cinder,
//! satellites), polling waits with generous timeouts, and a capture of every tracing line the
//! process emits (to prove no secret value is logged), and a real Kubernetes control plane
//! started from tests/control-plane/'s binary ([`real_cluster::RealControlPlane`]), under the
//! end-to-end scenarios too when `CINDER_E2E_CLUSTER=real` ([`test_cluster::TestCluster`]).

pub mod bench_cluster;
pub mod clients;
pub mod database_helpers;
pub mod deploy_helpers;
pub mod fixtures;
pub mod group_helpers;
pub mod harness;
pub mod log_capture;
pub mod observability_helpers;
pub mod operator_process;
pub mod operator_replica;
pub mod real_cinder;
pub mod real_cinder_cluster;
pub mod real_cluster;
pub mod real_keystone;
pub mod request_checks;
pub mod target_helpers;
pub mod test_cluster;
pub mod test_env;
pub mod waiting;
pub mod workload_helpers;
pub mod write_checks;

pub use fixtures::{
    Credentials, cinder_json, create_cinder, create_cluster_store, create_credentials,
    create_namespace, create_nfs_backend, create_raw, create_rbd_backend, create_store,
    install_crds, put_secret, secret_names, secret_value, sha256_hex,
};
pub use harness::{Harness, HarnessConfig, SecondOperator};
pub use log_capture::{LogCapture, capture_logs};
pub use test_cluster::TestCluster;
pub use test_env::{EVENTUALLY, NS};
pub use waiting::{
    assert_ready_consistent, cinder_conditions, condition, eventually, wait_cinder_condition,
    wait_satellite_condition,
};
