//! The product pipeline steps: one file per step of [`crate::pipeline::StepName`] (the twelve
//! lane steps and the five group members; [`database`] and [`volume_services`] keep their parts
//! in subfolders of the same name), and [`mod@table`], the product step table the engine runs.
//!
//! What several steps share lives beside this folder: the Deployments, the one-shot Jobs and
//! their reporting in [`crate::workloads`]; creating, listing and sweeping the Cinder's children
//! and the backends' projection Secrets in [`crate::children`]; reading credential Secrets in
//! [`crate::credentials`]; the device-lock retry priority in [`crate::device_retry`]; the
//! discovery probes of optional kinds in [`crate::kube_ext::capability`]. Every step runs with
//! the operator's context ([`crate::context::OperatorContext`]) and its own
//! ([`crate::pipeline::StepContext`]).
//!
//! Secret values are read here and written into derived Secrets; they never reach a log line,
//! an event, a condition message, an error message or an artefact (only their digests do).

pub mod backends;
pub mod backup_backend;
pub mod backup_service;
pub mod config;
#[cfg(test)]
mod connection_budget;
pub mod database;
pub mod db_connection_secret;
pub mod db_purge;
pub mod deployment;
pub mod health_check;
pub mod hpa;
pub mod http_route;
pub mod network_policy;
pub mod scheduler;
pub mod secrets;
pub mod table;
pub mod transport_url_secret;
pub mod volume_services;
pub mod vpa;

pub(crate) use table::table;
