//! The record of every API request served (verb, resource, namespace, name, user agent, status
//! code, time), for tests that count calls (e.g. Lease traffic) or check RBAC needs.

use std::sync::{Arc, Mutex};

/// One served API request.
#[derive(Clone, Debug, PartialEq)]
pub struct RequestRecord {
    /// get, list, watch, create, update, patch, delete, deletecollection (or proxy / discovery).
    pub verb: String,
    pub method: String,
    pub path: String,
    pub group: String,
    pub version: String,
    pub resource: String,
    pub subresource: String,
    pub namespace: String,
    pub name: String,
    pub user_agent: String,
    /// The authenticated user (`system:anonymous` without a credential; empty when refused 401).
    pub user: String,
    pub status: u16,
    pub time: chrono::DateTime<chrono::Utc>,
}

/// A bounded, shared log (the oldest entries go first beyond `capacity`).
#[derive(Clone, Debug)]
pub struct BoundedLog<T> {
    inner: Arc<Mutex<std::collections::VecDeque<T>>>,
    capacity: usize,
}

impl<T: Clone> BoundedLog<T> {
    pub fn new(capacity: usize) -> BoundedLog<T> {
        BoundedLog {
            inner: Arc::new(Mutex::new(std::collections::VecDeque::new())),
            capacity: capacity.max(1),
        }
    }

    pub fn push(&self, r: T) {
        let mut log = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        if log.len() >= self.capacity {
            log.pop_front();
        }
        log.push_back(r);
    }

    pub fn all(&self) -> Vec<T> {
        self.inner
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .cloned()
            .collect()
    }

    pub fn clear(&self) {
        self.inner.lock().unwrap_or_else(|e| e.into_inner()).clear();
    }
}

/// Bounded log of requests.
pub type RequestLog = BoundedLog<RequestRecord>;
