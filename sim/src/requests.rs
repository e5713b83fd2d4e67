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

/// The bounded record of one cluster's requests: every request served, or only those whose
/// user agent starts with a prefix (a benchmark counting one client's requests keeps the
/// rest of the traffic out of its memory).
#[derive(Clone, Debug)]
pub struct RequestLog {
    log: BoundedLog<RequestRecord>,
    user_agent_prefix: Option<Arc<str>>,
}

impl RequestLog {
    /// A record of at most `capacity` requests, of the user agents starting with
    /// `user_agent_prefix` when given.
    pub fn new(capacity: usize, user_agent_prefix: Option<&str>) -> RequestLog {
        RequestLog {
            log: BoundedLog::new(capacity),
            user_agent_prefix: user_agent_prefix.map(Arc::from),
        }
    }

    /// Records `r` when its user agent is one this record keeps.
    pub fn push(&self, r: RequestRecord) {
        let kept = self
            .user_agent_prefix
            .as_deref()
            .is_none_or(|prefix| r.user_agent.starts_with(prefix));
        if kept {
            self.log.push(r);
        }
    }

    pub fn all(&self) -> Vec<RequestRecord> {
        self.log.all()
    }

    pub fn clear(&self) {
        self.log.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(user_agent: &str) -> RequestRecord {
        RequestRecord {
            verb: "get".into(),
            method: "GET".into(),
            path: "/api/v1/pods".into(),
            group: String::new(),
            version: "v1".into(),
            resource: "pods".into(),
            subresource: String::new(),
            namespace: String::new(),
            name: String::new(),
            user_agent: user_agent.into(),
            user: "admin".into(),
            status: 200,
            time: chrono::Utc::now(),
        }
    }

    #[test]
    fn a_prefixed_record_keeps_only_that_client() {
        let log = RequestLog::new(10, Some("cinder-operator/"));
        log.push(request("cinder-operator/0.1.0 (a)"));
        log.push(request("kubectl/v1.30"));
        let kept: Vec<String> = log.all().into_iter().map(|r| r.user_agent).collect();
        assert_eq!(kept, ["cinder-operator/0.1.0 (a)"]);
        let everything = RequestLog::new(1, None);
        everything.push(request("kubectl/v1.30"));
        everything.push(request("curl/8"));
        assert_eq!(everything.all().len(), 1, "bounded: the oldest goes first");
    }
}
