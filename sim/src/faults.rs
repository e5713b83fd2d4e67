//! Fault injection: latency on every request, error answers (409 / 429 / 500 / any code as a
//! Status) by verb, resource and probability, dropped watch connections (all now, or with a
//! probability per event), and forced answers of Service health checks.

use rand::Rng;
use std::sync::{Arc, RwLock};
use std::time::Duration;

/// Answer a share of matching requests with an error Status.
#[derive(Clone, Debug, PartialEq)]
pub struct ErrorRule {
    /// Verb to match (get, list, watch, create, update, patch, delete, deletecollection); None = any.
    pub verb: Option<String>,
    /// Resource (plural) to match, e.g. "leases"; None = any.
    pub resource: Option<String>,
    /// Only requests whose User-Agent contains this; None = any.
    pub user_agent: Option<String>,
    /// HTTP status code of the answer (409, 429, 500, ...).
    pub code: u16,
    /// Share of matching requests that fail, 0.0 ..= 1.0.
    pub probability: f64,
}

impl ErrorRule {
    /// A rule failing every request of `verb` on `resource` with `code`.
    pub fn always(verb: Option<&str>, resource: Option<&str>, code: u16) -> ErrorRule {
        ErrorRule {
            verb: verb.map(str::to_string),
            resource: resource.map(str::to_string),
            user_agent: None,
            code,
            probability: 1.0,
        }
    }
}

/// A forced answer for a Service's proxied health check.
#[derive(Clone, Debug, PartialEq)]
pub struct ServiceFault {
    pub namespace: String,
    pub name: String,
    /// Answer with this status code instead of the computed one.
    pub status: Option<u16>,
    /// Wait this long before answering (provokes client timeouts).
    pub delay: Duration,
}

/// Fault injection settings.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FaultConfig {
    /// Added to every API request before it is served.
    pub latency: Duration,
    pub errors: Vec<ErrorRule>,
    /// Probability, per event sent, that a watch connection is closed instead.
    pub watch_drop_probability: f64,
    pub services: Vec<ServiceFault>,
}

/// Changes fault injection of a running cluster.
#[derive(Clone, Debug)]
pub struct FaultHandle {
    config: Arc<RwLock<FaultConfig>>,
    drops: Arc<tokio::sync::watch::Sender<u64>>,
}

impl FaultHandle {
    pub fn new(config: FaultConfig) -> FaultHandle {
        let (tx, _) = tokio::sync::watch::channel(0);
        FaultHandle {
            config: Arc::new(RwLock::new(config)),
            drops: Arc::new(tx),
        }
    }

    /// The current settings.
    pub fn get(&self) -> FaultConfig {
        self.config
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Replaces the settings.
    pub fn set(&self, config: FaultConfig) {
        *self.config.write().unwrap_or_else(|e| e.into_inner()) = config;
    }

    /// Changes the settings in place.
    pub fn update(&self, f: impl FnOnce(&mut FaultConfig)) {
        f(&mut self.config.write().unwrap_or_else(|e| e.into_inner()));
    }

    /// Removes every fault.
    pub fn clear(&self) {
        self.set(FaultConfig::default());
    }

    pub fn set_latency(&self, latency: Duration) {
        self.update(|c| c.latency = latency);
    }

    pub fn add_error_rule(&self, rule: ErrorRule) {
        self.update(|c| c.errors.push(rule));
    }

    pub fn set_watch_drop_probability(&self, p: f64) {
        self.update(|c| c.watch_drop_probability = p.clamp(0.0, 1.0));
    }

    /// Forces the health-check answer of a Service (replaces an earlier one for it).
    pub fn set_service_fault(&self, fault: ServiceFault) {
        self.update(|c| {
            c.services
                .retain(|s| !(s.namespace == fault.namespace && s.name == fault.name));
            c.services.push(fault);
        });
    }

    pub fn clear_service_fault(&self, namespace: &str, name: &str) {
        self.update(|c| {
            c.services
                .retain(|s| !(s.namespace == namespace && s.name == name))
        });
    }

    /// Closes every open watch connection now.
    pub fn drop_watches(&self) {
        self.drops.send_modify(|n| *n += 1);
    }

    /// A receiver that changes whenever `drop_watches` is called.
    pub fn drop_signal(&self) -> tokio::sync::watch::Receiver<u64> {
        self.drops.subscribe()
    }

    /// The error code to inject for a request, if any.
    pub fn error_for(&self, verb: &str, resource: &str, user_agent: &str) -> Option<u16> {
        let config = self.config.read().unwrap_or_else(|e| e.into_inner());
        let mut rng = rand::rng();
        config
            .errors
            .iter()
            .filter(|r| r.verb.as_deref().is_none_or(|v| v == verb))
            .filter(|r| r.resource.as_deref().is_none_or(|x| x == resource))
            .filter(|r| {
                r.user_agent
                    .as_deref()
                    .is_none_or(|u| user_agent.contains(u))
            })
            .find(|r| r.probability >= 1.0 || rng.random_bool(r.probability.clamp(0.0, 1.0)))
            .map(|r| r.code)
    }

    pub fn latency(&self) -> Duration {
        self.config
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .latency
    }

    /// Whether to drop a watch before sending the next event.
    pub fn drop_watch_now(&self) -> bool {
        let p = self
            .config
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .watch_drop_probability;
        p > 0.0 && rand::rng().random_bool(p.clamp(0.0, 1.0))
    }

    pub fn service_fault(&self, namespace: &str, name: &str) -> Option<ServiceFault> {
        self.config
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .services
            .iter()
            .find(|s| s.namespace == namespace && s.name == name)
            .cloned()
    }
}
