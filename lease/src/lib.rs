//! cinder-lease: per-device locks (seed 002, design section 4).
//!
//! This crate owns the device actor (one lock per device, waiters queued by priority
//! with ageing), the Kubernetes Lease that excludes other operator replicas, and
//! `jitter`, the one function every periodic requeue of the project goes through.

pub mod jitter;

pub use jitter::jitter;
