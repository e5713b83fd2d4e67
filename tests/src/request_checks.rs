//! Checks over the simulator's request record: the hot-loop detector (no object asked for more
//! than a limit within any one second), write and read counts of one client, and the requests
//! of a time window.

use cinder_sim::RequestRecord;
use std::collections::BTreeMap;

/// Verbs that change the store.
pub const WRITE_VERBS: &[&str] = &["create", "update", "patch", "delete", "deletecollection"];

/// Whether `r` is a write.
pub fn is_write(r: &RequestRecord) -> bool {
    WRITE_VERBS.contains(&r.verb.as_str())
}

/// The requests of `records` sent with user agent `agent`.
pub fn of_agent<'a>(records: &'a [RequestRecord], agent: &str) -> Vec<&'a RequestRecord> {
    records.iter().filter(|r| r.user_agent == agent).collect()
}

/// One object that was asked for too often: its key, and the most requests in one second.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HotLoop {
    pub object: String,
    pub peak_per_second: usize,
}

/// The object a named request is about: group, resource, namespace, name and subresource.
pub fn object_of(r: &RequestRecord) -> String {
    format!(
        "{}/{}/{}/{}{}",
        r.group,
        r.resource,
        r.namespace,
        r.name,
        subresource_suffix(r)
    )
}

/// `/<subresource>`, or nothing for a request to the object itself.
fn subresource_suffix(r: &RequestRecord) -> String {
    if r.subresource.is_empty() {
        String::new()
    } else {
        format!("/{}", r.subresource)
    }
}

impl HotLoop {
    /// Whether `r` is a request to this hot object.
    pub fn is_about(&self, r: &RequestRecord) -> bool {
        !r.name.is_empty() && object_of(r) == self.object
    }
}

/// The objects (named requests: get, update, patch, delete, status writes; lists and watches
/// have no name) that received more than `limit` requests within some window of one second.
pub fn hot_loops(records: &[&RequestRecord], limit: usize) -> Vec<HotLoop> {
    let mut per_object: BTreeMap<String, Vec<i64>> = BTreeMap::new();
    for r in records.iter().filter(|r| !r.name.is_empty()) {
        per_object
            .entry(object_of(r))
            .or_default()
            .push(r.time.timestamp_millis());
    }
    let mut out = Vec::new();
    for (object, mut times) in per_object {
        times.sort_unstable();
        let mut peak = 0;
        let mut start = 0;
        for end in 0..times.len() {
            while times[end] - times[start] >= 1000 {
                start += 1;
            }
            peak = peak.max(end - start + 1);
        }
        if peak > limit {
            out.push(HotLoop {
                object,
                peak_per_second: peak,
            });
        }
    }
    out
}

/// `verb resource/name` of each request, for failure messages.
pub fn describe(records: &[&RequestRecord]) -> Vec<String> {
    records
        .iter()
        .map(|r| {
            format!(
                "{} {} {}/{}{} -> {}",
                r.time.format("%H:%M:%S%.3f"),
                r.verb,
                r.resource,
                r.name,
                subresource_suffix(r),
                r.status
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(ms: i64, name: &str) -> RequestRecord {
        RequestRecord {
            verb: "get".into(),
            method: "GET".into(),
            path: String::new(),
            group: String::new(),
            version: "v1".into(),
            resource: "secrets".into(),
            subresource: String::new(),
            namespace: "ns".into(),
            name: name.into(),
            user_agent: "op".into(),
            user: "system:admin".into(),
            status: 200,
            time: chrono::DateTime::from_timestamp_millis(ms).unwrap_or_default(),
        }
    }

    #[test]
    fn a_burst_within_one_second_is_a_hot_loop_and_a_spread_is_not() {
        let burst: Vec<RequestRecord> = (0..6).map(|i| at(10_000 + i * 150, "a")).collect();
        let spread: Vec<RequestRecord> = (0..6).map(|i| at(10_000 + i * 400, "b")).collect();
        let all: Vec<&RequestRecord> = burst.iter().chain(spread.iter()).collect();
        let hot = hot_loops(&all, 5);
        assert_eq!(hot.len(), 1, "{hot:?}");
        assert_eq!(hot[0].peak_per_second, 6);
        assert!(hot[0].object.ends_with("/ns/a"), "{hot:?}");
        assert!(hot[0].is_about(&burst[0]) && !hot[0].is_about(&spread[0]));
    }

    #[test]
    fn a_status_write_is_about_the_status_not_the_object() {
        let mut status = at(0, "a");
        status.subresource = "status".into();
        let all: Vec<RequestRecord> = (0..6)
            .map(|i| {
                let mut r = status.clone();
                r.time = chrono::DateTime::from_timestamp_millis(i * 100).unwrap_or_default();
                r
            })
            .collect();
        let refs: Vec<&RequestRecord> = all.iter().collect();
        let hot = hot_loops(&refs, 5);
        assert_eq!(hot.len(), 1, "{hot:?}");
        assert!(hot[0].is_about(&status));
        assert!(
            !hot[0].is_about(&at(0, "a")),
            "the object itself is another one"
        );
    }
}
