//! The product pipeline steps, one file per step (the twelve lane steps and the five group
//! members of [`crate::pipeline::StepName`]), and [`table`], the product step table the engine
//! runs.
//!
//! Secret values are read here and written into derived Secrets; they never reach a log line,
//! an event, a condition message, an error message or an artefact (only their digests do).

pub mod backends;
pub mod backup_backend;
pub mod backup_service;
pub mod capability;
pub mod children;
pub mod config;
pub mod credentials;
pub mod database;
pub mod db_connection_secret;
pub mod db_purge;
pub mod deployment;
pub mod device_retry;
pub mod env;
pub mod health_check;
pub mod hpa;
pub mod http_route;
pub mod job_marker;
pub mod network_policy;
pub mod projection;
pub mod scheduler;
pub mod secrets;
pub mod table;
pub mod transport_url_secret;
pub mod volume_services;
pub mod vpa;
pub mod workloads;

pub use env::StepEnv;
pub use table::{steps, table};
