//! cinder-sim: an embedded Kubernetes-compatible API server with simulated controllers.
//!
//! This crate owns the in-memory object store, the HTTP API that kube-rs and kubectl
//! talk to (discovery, CRUD, watch, patches, status, CRDs), the simulated cluster
//! controllers (Deployments, Jobs, CronJobs, MariaDB, secret stores, Gateways) and
//! fault injection. It is a simulator, documented in docs/embedded-cluster.md.

pub mod agent;
pub mod api;
pub mod auth;
pub mod cluster;
pub mod controllers;
pub mod error;
pub mod faults;
pub mod gc;
pub mod groups;
pub mod in_cluster;
pub mod json;
pub mod kubeconfig;
pub mod netproxy;
pub mod objects;
pub mod patch;
pub mod real_servers;
pub mod registry;
pub mod requests;
pub mod schema;
pub mod store;
pub mod writes;

pub use cluster::{ClusterConfig, EmbeddedCluster, StoreView};
pub use error::{ApiError, SimError};
pub use faults::{ErrorRule, FaultConfig, FaultHandle, ServiceFault};
pub use groups::CORE;
pub use netproxy::ServiceProxy;
pub use objects::service_ips::ServiceCidr;
pub use requests::RequestRecord;
pub use writes::{LeaseSnapshot, LeaseState, WriteRecord};
/// In-process store access (`EmbeddedCluster::store()` returns a `Store` view).
pub type Store = StoreView;
