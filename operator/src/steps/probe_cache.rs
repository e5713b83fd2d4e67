//! The /healthcheck probe cache the HealthCheck member shares across every Cinder: one entry per
//! endpoint (Cinder namespace, name and the URL probed); a passing result is reused for
//! [`PROBE_CACHE_TTL`] (30 s), a failed one for [`HEALTH_CHECK_RETRY`] (10 s) so a retry happens
//! on the step's 10 s requeue. Entries of a deleted Cinder are dropped with [`ProbeCache::evict`];
//! expired entries are pruned on every insert. [`ProbeCache::probes`] counts the probes really
//! sent (not the cache hits), for tests and the admin view.

use crate::requeue::{HEALTH_CHECK_RETRY, PROBE_CACHE_TTL};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// What one /healthcheck probe found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ProbeResult {
    /// 2xx.
    Healthy,
    /// The endpoint answered with a non-2xx status other than "no ready backend".
    Unhealthy { status: u16 },
    /// No Service, or 503 from the proxy: no ready backend behind the Service.
    EndpointNotReady { detail: String },
    /// No answer within the probe timeout.
    Timeout,
    /// The connection could not be made.
    ConnectionFailed { detail: String },
    /// Anything else (a malformed request, an unexpected client error).
    Failed { detail: String },
}

impl ProbeResult {
    pub fn is_healthy(&self) -> bool {
        matches!(self, ProbeResult::Healthy)
    }
    /// How long the result may be reused.
    pub fn ttl(&self) -> Duration {
        if self.is_healthy() {
            PROBE_CACHE_TTL
        } else {
            HEALTH_CHECK_RETRY
        }
    }
}

/// The key of one entry.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ProbeKey {
    pub namespace: String,
    pub name: String,
    pub endpoint: String,
}

#[derive(Debug)]
struct Entry {
    result: ProbeResult,
    at: Instant,
}

/// The shared cache (cheap to clone: one `Arc`).
#[derive(Clone, Debug, Default)]
pub struct ProbeCache {
    inner: Arc<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    entries: Mutex<HashMap<ProbeKey, Entry>>,
    probes: AtomicU64,
}

impl ProbeCache {
    pub fn new() -> Self {
        ProbeCache::default()
    }

    fn entries(&self) -> std::sync::MutexGuard<'_, HashMap<ProbeKey, Entry>> {
        self.inner.entries.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The cached result for `key` at `now`, when still within its TTL.
    pub fn get_at(&self, key: &ProbeKey, now: Instant) -> Option<ProbeResult> {
        let entries = self.entries();
        let e = entries.get(key)?;
        (now.saturating_duration_since(e.at) < e.result.ttl()).then(|| e.result.clone())
    }

    /// Stores `result` for `key`, probed at `at`, and prunes expired entries.
    pub fn put_at(&self, key: ProbeKey, result: ProbeResult, at: Instant) {
        let mut entries = self.entries();
        entries.retain(|_, e| at.saturating_duration_since(e.at) < e.result.ttl());
        entries.insert(key, Entry { result, at });
    }

    /// The cached result for `key`, or the result of `probe` (counted, then cached).
    pub async fn get_or_probe<F, Fut>(&self, key: ProbeKey, probe: F) -> (ProbeResult, bool)
    where
        F: FnOnce() -> Fut,
        Fut: std::future::Future<Output = ProbeResult>,
    {
        if let Some(hit) = self.get_at(&key, Instant::now()) {
            return (hit, true);
        }
        self.inner.probes.fetch_add(1, Ordering::Relaxed);
        let result = probe().await;
        self.put_at(key, result.clone(), Instant::now());
        (result, false)
    }

    /// Drops every entry of the Cinder `namespace/name` (call it when the Cinder is deleted).
    pub fn evict(&self, namespace: &str, name: &str) {
        self.entries()
            .retain(|k, _| !(k.namespace == namespace && k.name == name));
    }

    /// How many probes were really sent (cache hits excluded).
    pub fn probes(&self) -> u64 {
        self.inner.probes.load(Ordering::Relaxed)
    }

    /// How many entries are held.
    pub fn len(&self) -> usize {
        self.entries().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(name: &str) -> ProbeKey {
        ProbeKey {
            namespace: "ns".into(),
            name: name.into(),
            endpoint: format!("http://{name}"),
        }
    }

    #[test]
    fn pass_reused_for_thirty_seconds_failure_for_ten() {
        let cache = ProbeCache::new();
        let t0 = Instant::now();
        cache.put_at(key("a"), ProbeResult::Healthy, t0);
        cache.put_at(key("b"), ProbeResult::Unhealthy { status: 500 }, t0);
        let at = |s| t0 + Duration::from_secs(s);
        assert_eq!(cache.get_at(&key("a"), at(29)), Some(ProbeResult::Healthy));
        assert_eq!(cache.get_at(&key("a"), at(30)), None);
        assert!(cache.get_at(&key("b"), at(9)).is_some());
        assert_eq!(cache.get_at(&key("b"), at(10)), None);
    }

    #[test]
    fn evict_drops_only_that_cinder_and_expired_entries_are_pruned() {
        let cache = ProbeCache::new();
        let t0 = Instant::now();
        cache.put_at(key("a"), ProbeResult::Healthy, t0);
        cache.put_at(key("b"), ProbeResult::Healthy, t0);
        cache.evict("ns", "a");
        assert_eq!(cache.get_at(&key("a"), t0), None);
        assert!(cache.get_at(&key("b"), t0).is_some());
        cache.put_at(key("c"), ProbeResult::Healthy, t0 + Duration::from_secs(31));
        assert_eq!(cache.len(), 1, "b expired and was pruned");
    }

    #[tokio::test]
    async fn counts_only_real_probes() {
        let cache = ProbeCache::new();
        let (r, hit) = cache
            .get_or_probe(key("a"), || async { ProbeResult::Healthy })
            .await;
        assert!(r.is_healthy() && !hit);
        let (_, hit) = cache
            .get_or_probe(key("a"), || async { ProbeResult::Timeout })
            .await;
        assert!(hit);
        assert_eq!(cache.probes(), 1);
    }
}
