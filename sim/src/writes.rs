//! The write record: every mutating API request (create, update, patch, delete,
//! deletecollection) with the client's user agent, the answer's status code, and the state of
//! every Lease in the cluster (holder, acquire / renew time, duration) read just before the
//! request was served and again just after, each read with the store resourceVersion it is
//! consistent with. Tests use it to check who changed an object while which Lease was held
//! (e.g. that every change to a backend's volume service came from the holder of that backend's
//! device Lease). Off unless `ClusterConfig::record_writes` is set (each write then reads the
//! Leases twice).

use crate::requests::BoundedLog;
use crate::store::Store;
use chrono::{DateTime, Utc};
use serde_json::Value;

/// The verbs the write record keeps.
pub const MUTATING_VERBS: [&str; 5] = ["create", "update", "patch", "delete", "deletecollection"];

/// Whether `verb` (as in the request record) changes state.
pub fn is_mutating(verb: &str) -> bool {
    MUTATING_VERBS.contains(&verb)
}

/// One Lease as stored at a moment.
#[derive(Clone, Debug, PartialEq)]
pub struct LeaseState {
    pub namespace: String,
    pub name: String,
    /// `spec.holderIdentity` (None when absent or empty).
    pub holder: Option<String>,
    pub acquire_time: Option<DateTime<Utc>>,
    pub renew_time: Option<DateTime<Utc>>,
    pub duration_seconds: Option<i64>,
}

fn time_at(v: &Value, pointer: &str) -> Option<DateTime<Utc>> {
    let text = v.pointer(pointer)?.as_str()?;
    DateTime::parse_from_rfc3339(text)
        .ok()
        .map(|t| t.with_timezone(&Utc))
}

impl LeaseState {
    /// The state of a stored Lease object.
    pub fn from_object(v: &Value) -> LeaseState {
        let text = |p: &str| {
            v.pointer(p)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string()
        };
        LeaseState {
            namespace: text("/metadata/namespace"),
            name: text("/metadata/name"),
            holder: v
                .pointer("/spec/holderIdentity")
                .and_then(Value::as_str)
                .filter(|h| !h.is_empty())
                .map(str::to_string),
            acquire_time: time_at(v, "/spec/acquireTime"),
            renew_time: time_at(v, "/spec/renewTime"),
            duration_seconds: v
                .pointer("/spec/leaseDurationSeconds")
                .and_then(Value::as_i64),
        }
    }

    /// When the Lease expires: the renew time (else the acquire time) plus the duration. None
    /// when there is no duration (it never expires by itself); a Lease with a duration but
    /// neither time has always been expired (`DateTime::MIN_UTC`).
    pub fn expires(&self) -> Option<DateTime<Utc>> {
        let secs = self.duration_seconds?;
        let Some(last) = self.renew_time.or(self.acquire_time) else {
            return Some(DateTime::<Utc>::MIN_UTC);
        };
        Some(last + chrono::Duration::seconds(secs))
    }

    /// The holder at `time`: the holder identity unless the Lease had expired by then.
    pub fn holder_at(&self, time: DateTime<Utc>) -> Option<&str> {
        let holder = self.holder.as_deref()?;
        match self.expires() {
            Some(expiry) if expiry <= time => None,
            _ => Some(holder),
        }
    }
}

/// Every Lease of the cluster at one moment.
#[derive(Clone, Debug, PartialEq)]
pub struct LeaseSnapshot {
    /// The store resourceVersion the read is consistent with.
    pub resource_version: u64,
    pub time: DateTime<Utc>,
    pub leases: Vec<LeaseState>,
}

impl LeaseSnapshot {
    /// Reads every Lease of `store` now.
    pub fn read(store: &Store) -> LeaseSnapshot {
        let (items, resource_version) = store.list_with_rv("coordination.k8s.io", "leases", None);
        LeaseSnapshot {
            resource_version,
            time: Utc::now(),
            leases: items.iter().map(LeaseState::from_object).collect(),
        }
    }

    /// Lease `namespace/name`, if it existed.
    pub fn lease(&self, namespace: &str, name: &str) -> Option<&LeaseState> {
        self.leases
            .iter()
            .find(|l| l.namespace == namespace && l.name == name)
    }

    /// The holder of Lease `namespace/name` at this moment (None when absent, free or expired).
    pub fn holder(&self, namespace: &str, name: &str) -> Option<&str> {
        self.lease(namespace, name)?.holder_at(self.time)
    }
}

/// One served mutating request.
#[derive(Clone, Debug, PartialEq)]
pub struct WriteRecord {
    /// create, update, patch, delete or deletecollection.
    pub verb: String,
    pub group: String,
    pub resource: String,
    pub subresource: String,
    pub namespace: String,
    /// The object's name: from the path, or for a create from the JSON body's `metadata.name`
    /// (empty for a `generateName` create or a YAML body).
    pub name: String,
    pub user_agent: String,
    /// The HTTP status code of the answer.
    pub status: u16,
    /// The Leases read before the request was served (after any injected latency).
    pub before: LeaseSnapshot,
    /// The Leases read after it was served, before the answer left the server.
    pub after: LeaseSnapshot,
}

impl WriteRecord {
    /// Whether the server accepted the write (a 2xx answer).
    pub fn succeeded(&self) -> bool {
        (200..300).contains(&self.status)
    }
}

/// Bounded log of writes (the oldest go first beyond `capacity`); a disabled log keeps nothing.
#[derive(Clone, Debug)]
pub struct WriteLog {
    log: BoundedLog<WriteRecord>,
    enabled: bool,
}

impl WriteLog {
    pub fn new(enabled: bool, capacity: usize) -> WriteLog {
        WriteLog {
            log: BoundedLog::new(capacity),
            enabled,
        }
    }

    /// Whether writes are recorded.
    pub fn enabled(&self) -> bool {
        self.enabled
    }

    pub fn push(&self, r: WriteRecord) {
        if self.enabled {
            self.log.push(r);
        }
    }

    pub fn all(&self) -> Vec<WriteRecord> {
        self.log.all()
    }

    pub fn clear(&self) {
        self.log.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn lease(holder: &str, renew: &str, duration: i64) -> Value {
        json!({
            "metadata": {"namespace": "ns", "name": "l"},
            "spec": {"holderIdentity": holder, "renewTime": renew, "leaseDurationSeconds": duration}
        })
    }

    #[test]
    fn a_lease_is_held_until_it_expires() {
        let s = LeaseState::from_object(&lease("a", "2026-01-01T00:00:00.000000Z", 15));
        let t = |s: &str| DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc);
        assert_eq!(s.holder_at(t("2026-01-01T00:00:14Z")), Some("a"));
        assert_eq!(s.holder_at(t("2026-01-01T00:00:15Z")), None);
        let free = LeaseState::from_object(&lease("", "2026-01-01T00:00:00Z", 15));
        assert_eq!(free.holder, None);
        let timeless = LeaseState::from_object(
            &json!({"spec": {"holderIdentity": "a", "leaseDurationSeconds": 5}}),
        );
        assert_eq!(timeless.holder_at(t("2026-01-01T00:00:00Z")), None);
        let endless = LeaseState::from_object(&json!({"spec": {"holderIdentity": "a"}}));
        assert_eq!(endless.holder_at(t("2999-01-01T00:00:00Z")), Some("a"));
    }

    #[test]
    fn a_disabled_log_keeps_nothing_and_a_full_one_drops_the_oldest() {
        let snap = LeaseSnapshot {
            resource_version: 1,
            time: Utc::now(),
            leases: vec![],
        };
        let record = |name: &str| WriteRecord {
            verb: "create".into(),
            group: String::new(),
            resource: "configmaps".into(),
            subresource: String::new(),
            namespace: "ns".into(),
            name: name.into(),
            user_agent: String::new(),
            status: 201,
            before: snap.clone(),
            after: snap.clone(),
        };
        let off = WriteLog::new(false, 10);
        off.push(record("a"));
        assert!(off.all().is_empty());
        let on = WriteLog::new(true, 2);
        for n in ["a", "b", "c"] {
            on.push(record(n));
        }
        let names: Vec<_> = on.all().into_iter().map(|r| r.name).collect();
        assert_eq!(names, ["b", "c"]);
        assert!(is_mutating("patch") && !is_mutating("get") && !is_mutating("watch"));
    }
}
