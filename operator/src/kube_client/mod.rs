//! The operator's Kubernetes clients: every client the operator builds (management cluster and
//! target clusters) goes through [`throttle::Throttle`], a client-side rate limit (`--kube-qps` /
//! `--kube-burst`, governor's limiter) that also honours a 429's Retry-After, so a fleet's first
//! sync does not reach the API server all at once.

pub mod build;
pub mod limits;
pub mod request_budget;
pub mod throttle;

pub(crate) use build::{throttled, throttled_from_kubeconfig};
pub(crate) use limits::ClientLimits;
