//! The five workloads of the benchmark, each generic over [`crate::engine::Engine`] so that every
//! engine runs exactly the same transactions.

pub mod backend_update;
pub mod create_publish;
pub mod objects;
pub mod overhead;
pub mod scale;
pub mod throughput;
