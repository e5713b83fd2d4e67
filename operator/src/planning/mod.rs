//! Pure planning logic of the Cinder pipeline (no I/O, unit-tested): what each step decides
//! from the CR and what it observed. One file per idea; the steps that talk to the cluster call
//! these and apply the results.

pub mod backend_projection;
pub mod config;
pub mod connection_cap;
pub mod connection_urls;
pub mod containers;
pub mod db_purge;
pub mod detach;
pub mod digest;
pub mod image_release;
pub mod ini;
pub mod job;
pub mod network_policy;
pub mod process_model;
pub mod release;
pub mod secret_data;
pub mod upgrade;
pub mod upgrade_check;
