//! Fault injection: latency on every request, error answers (409 / 429 / 500 / any code as a
//! Status) by verb, resource and probability, dropped watch connections (all now, or with a
//! probability per event), forced answers of Service health checks, and a request-rate limit
//! (a token bucket answering 429 with Retry-After beyond it, as API priority and fairness does). The random draws come
//! from one generator, seeded from `FaultConfig::seed` when set (the same seed and the same
//! sequence of requests give the same faults). The settings are JSON (`GET`/`PUT /sim/faults`).

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

/// Durations as whole milliseconds in the JSON form of the settings.
mod millis {
    use serde::{Deserialize, Deserializer, Serializer};
    use std::time::Duration;

    pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        u64::deserialize(d).map(Duration::from_millis)
    }
}

/// Answer a share of matching requests with an error Status.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ErrorRule {
    /// Verb to match (get, list, watch, create, update, patch, delete, deletecollection); None = any.
    #[serde(default)]
    pub verb: Option<String>,
    /// Resource (plural) to match, e.g. "leases"; None = any.
    #[serde(default)]
    pub resource: Option<String>,
    /// Only requests whose User-Agent contains this; None = any.
    #[serde(default)]
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
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ServiceFault {
    pub namespace: String,
    pub name: String,
    /// Answer with this status code instead of the computed one.
    #[serde(default)]
    pub status: Option<u16>,
    /// Wait this long before answering (provokes client timeouts); `delayMs` in JSON.
    #[serde(default, rename = "delayMs", with = "millis")]
    pub delay: Duration,
}

/// Fault injection settings.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FaultConfig {
    /// Added to every API request before it is served; `latencyMs` in JSON.
    #[serde(default, rename = "latencyMs", with = "millis")]
    pub latency: Duration,
    #[serde(default)]
    pub errors: Vec<ErrorRule>,
    /// Probability, per event sent, that a watch connection is closed instead.
    #[serde(default)]
    pub watch_drop_probability: f64,
    #[serde(default)]
    pub services: Vec<ServiceFault>,
    /// Seed of the random draws (None: seeded from the operating system). Setting the
    /// settings with a seed restarts the sequence.
    #[serde(default)]
    pub seed: Option<u64>,
    /// Requests beyond this rate are answered 429 with a Retry-After.
    #[serde(default)]
    pub rate_limit: Option<RateLimit>,
}

/// A request-rate limit: a token bucket of `burst` requests refilled at `qps` per second, over
/// the requests whose user agent contains `userAgent` (all when absent).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RateLimit {
    pub qps: f64,
    pub burst: u32,
    #[serde(default)]
    pub user_agent: Option<String>,
}

/// The bucket of the current [`RateLimit`]: tokens and when they were counted.
#[derive(Debug)]
struct Bucket {
    limit: RateLimit,
    tokens: f64,
    at: std::time::Instant,
}

impl FaultConfig {
    /// Why the settings are unusable (probabilities outside 0..=1, codes that are not errors).
    pub fn problems(&self) -> Vec<String> {
        let mut out = Vec::new();
        let mut probability = |what: &str, p: f64| {
            if !(0.0..=1.0).contains(&p) {
                out.push(format!("{what} must be between 0 and 1 (got {p})"));
            }
        };
        probability("watchDropProbability", self.watch_drop_probability);
        for (i, r) in self.errors.iter().enumerate() {
            probability(&format!("errors[{i}].probability"), r.probability);
        }
        if let Some(l) = &self.rate_limit
            && !(l.qps.is_finite() && l.qps > 0.0 && l.burst >= 1)
        {
            out.push(format!(
                "rateLimit needs qps above 0 and burst of at least 1 (got {} and {})",
                l.qps, l.burst
            ));
        }
        for (i, r) in self.errors.iter().enumerate() {
            if !(400..=599).contains(&r.code) {
                out.push(format!(
                    "errors[{i}].code must be an HTTP error status, 400 to 599 (got {})",
                    r.code
                ));
            }
        }
        out
    }
}

/// Changes fault injection of a running cluster.
#[derive(Clone, Debug)]
pub struct FaultHandle {
    config: Arc<RwLock<FaultConfig>>,
    rng: Arc<Mutex<StdRng>>,
    drops: Arc<tokio::sync::watch::Sender<u64>>,
    bucket: Arc<Mutex<Option<Bucket>>>,
}

fn rng_for(seed: Option<u64>) -> StdRng {
    match seed {
        Some(s) => StdRng::seed_from_u64(s),
        None => StdRng::from_os_rng(),
    }
}

impl FaultHandle {
    pub fn new(config: FaultConfig) -> FaultHandle {
        let (tx, _) = tokio::sync::watch::channel(0);
        FaultHandle {
            rng: Arc::new(Mutex::new(rng_for(config.seed))),
            config: Arc::new(RwLock::new(config)),
            drops: Arc::new(tx),
            bucket: Arc::default(),
        }
    }

    /// Whether the rate limit turns this request away: `Some(retry_after_seconds)` when it does.
    /// Requests of other user agents neither count nor wait.
    pub fn rate_limited(&self, user_agent: &str) -> Option<u64> {
        let limit = self
            .config
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .rate_limit
            .clone()?;
        if !limit
            .user_agent
            .as_deref()
            .is_none_or(|u| user_agent.contains(u))
        {
            return None;
        }
        let now = std::time::Instant::now();
        let mut slot = self.bucket.lock().unwrap_or_else(|e| e.into_inner());
        let bucket = match slot.as_mut() {
            Some(b) if b.limit == limit => b,
            _ => slot.insert(Bucket {
                tokens: f64::from(limit.burst),
                limit,
                at: now,
            }),
        };
        let rate = bucket.limit.qps.max(f64::MIN_POSITIVE);
        let earned = now.duration_since(bucket.at).as_secs_f64() * rate;
        bucket.tokens = (bucket.tokens + earned).min(f64::from(bucket.limit.burst));
        bucket.at = now;
        if bucket.tokens >= 1.0 {
            bucket.tokens -= 1.0;
            return None;
        }
        Some(((1.0 - bucket.tokens) / rate).ceil().max(1.0) as u64)
    }

    /// One draw: true with probability `p`.
    fn chance(&self, p: f64) -> bool {
        p >= 1.0
            || (p > 0.0
                && self
                    .rng
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .random_bool(p.clamp(0.0, 1.0)))
    }

    /// The current settings.
    pub fn get(&self) -> FaultConfig {
        self.config
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Replaces the settings (a seed in them restarts the random sequence).
    pub fn set(&self, config: FaultConfig) {
        if config.seed.is_some() {
            *self.rng.lock().unwrap_or_else(|e| e.into_inner()) = rng_for(config.seed);
        }
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
        let rules = self
            .config
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .errors
            .clone();
        rules
            .iter()
            .filter(|r| r.verb.as_deref().is_none_or(|v| v == verb))
            .filter(|r| r.resource.as_deref().is_none_or(|x| x == resource))
            .filter(|r| {
                r.user_agent
                    .as_deref()
                    .is_none_or(|u| user_agent.contains(u))
            })
            .find(|r| self.chance(r.probability))
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
        self.chance(p)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_round_trip_and_problems() {
        let text = r#"{"latencyMs": 50, "errors": [{"verb": "create", "code": 500, "probability": 0.1}],
                       "watchDropProbability": 0.02, "seed": 7}"#;
        let c: FaultConfig = serde_json::from_str(text).unwrap();
        assert_eq!(c.latency, Duration::from_millis(50));
        assert_eq!(c.errors[0].verb.as_deref(), Some("create"));
        assert!(c.problems().is_empty());
        let back: FaultConfig = serde_json::from_value(serde_json::to_value(&c).unwrap()).unwrap();
        assert_eq!(back, c);
        assert!(serde_json::from_str::<FaultConfig>(r#"{"latency": 5}"#).is_err());
        let bad = FaultConfig {
            watch_drop_probability: 2.0,
            errors: vec![ErrorRule::always(None, None, 200)],
            ..FaultConfig::default()
        };
        assert_eq!(bad.problems().len(), 2);
    }

    #[test]
    fn a_seed_repeats_the_faults() {
        let config = FaultConfig {
            errors: vec![ErrorRule {
                probability: 0.3,
                ..ErrorRule::always(Some("create"), None, 500)
            }],
            seed: Some(7),
            ..FaultConfig::default()
        };
        let draws = |h: &FaultHandle| -> Vec<bool> {
            (0..200)
                .map(|_| h.error_for("create", "configmaps", "").is_some())
                .collect()
        };
        let a = draws(&FaultHandle::new(config.clone()));
        let b = draws(&FaultHandle::new(config));
        assert_eq!(a, b);
        let failed = a.iter().filter(|x| **x).count();
        assert!((30..=90).contains(&failed), "{failed} of 200 at p=0.3");
    }
}
