//! The client-side request limits of one client: sustained rate, burst and retries.

/// The client-side request limits of one client (one API server).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ClientLimits {
    /// Sustained requests per second.
    pub qps: f32,
    /// Requests that may start at once after a quiet period.
    pub burst: u32,
    /// How often one request is retried after a 429 (waiting its Retry-After each time).
    pub max_retries: u32,
}

impl Default for ClientLimits {
    /// controller-runtime's defaults: 20 requests per second, bursts of 30.
    fn default() -> Self {
        ClientLimits {
            qps: 20.0,
            burst: 30,
            max_retries: 10,
        }
    }
}
