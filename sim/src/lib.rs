//! cinder-sim: an embedded Kubernetes-compatible API server with simulated controllers.
//!
//! This crate owns the in-memory object store, the HTTP API that kube-rs and kubectl
//! talk to (discovery, CRUD, watch, patches, status, CRDs), the simulated cluster
//! controllers (Deployments, Jobs, CronJobs, MariaDB, secret stores, Gateways) and
//! fault injection. It is a simulator, documented in docs/embedded-cluster.md.

pub mod controllers;
