//! The state every HTTP worker shares: the object engine, fault injection, the request and write
//! records, the stop signal, the address and authentication.

use crate::faults::FaultHandle;
use crate::objects::Engine;
use crate::requests::RequestLog;
use crate::writes::WriteLog;

/// Shared state of the HTTP workers.
#[derive(Clone)]
pub struct AppState {
    pub engine: Engine,
    pub faults: FaultHandle,
    pub log: RequestLog,
    /// The write record (mutating requests with the Leases before and after; may be off).
    pub writes: WriteLog,
    /// Flips to true when the server shuts down (ends watches).
    pub stop: tokio::sync::watch::Receiver<bool>,
    pub address: String,
    /// Authentication and authorization of every request.
    pub auth: crate::auth::Auth,
}
