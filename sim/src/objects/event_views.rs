//! One Event, two APIs: a real server stores an Event once and serves it as `v1` Event and as
//! `events.k8s.io/v1` Event, converting field names. The embedded cluster keeps the other
//! view beside each written Event (same name, uid, metadata and managedFields), so an Event a
//! client writes through either API is read, listed and watched through both; deleting one
//! deletes both. Pure conversions, and the store writes that keep the pair.

use crate::store::{ObjKey, Txn};
use serde_json::{Map, Value};

const CORE: (&str, &str) = ("", "events");
const EVENTS: (&str, &str) = ("events.k8s.io", "events");

/// `(core/v1 field, events.k8s.io/v1 field)` of the fields that are renamed.
const RENAMED: &[(&str, &str)] = &[
    ("involvedObject", "regarding"),
    ("message", "note"),
    ("reportingComponent", "reportingController"),
    ("source", "deprecatedSource"),
    ("firstTimestamp", "deprecatedFirstTimestamp"),
    ("lastTimestamp", "deprecatedLastTimestamp"),
    ("count", "deprecatedCount"),
];

/// The fields both versions carry under one name.
const SHARED: &[&str] = &[
    "metadata",
    "reason",
    "type",
    "action",
    "eventTime",
    "series",
    "related",
    "reportingInstance",
];

/// `event` as the other API presents it: `to_events` converts a core/v1 Event to
/// events.k8s.io/v1, otherwise the reverse.
pub fn convert(event: &Value, to_events: bool) -> Value {
    let mut out = Map::new();
    let Some(from) = event.as_object() else {
        return Value::Object(out);
    };
    for key in SHARED {
        if let Some(v) = from.get(*key) {
            out.insert((*key).into(), v.clone());
        }
    }
    for (core, events) in RENAMED {
        let (src, dst) = if to_events {
            (core, events)
        } else {
            (events, core)
        };
        if let Some(v) = from.get(*src) {
            out.insert((*dst).into(), v.clone());
        }
    }
    if to_events {
        out.insert("apiVersion".into(), "events.k8s.io/v1".into());
        // fields of the typed events.k8s.io Event without omitempty
        out.entry("eventTime").or_insert(Value::Null);
        for (key, value) in [
            ("deprecatedFirstTimestamp", Value::Null),
            ("deprecatedLastTimestamp", Value::Null),
            ("deprecatedSource", Value::Object(Map::new())),
        ] {
            out.entry(key).or_insert(value);
        }
    } else {
        out.insert("apiVersion".into(), "v1".into());
        for key in ["involvedObject", "source"] {
            out.entry(key).or_insert(Value::Object(Map::new()));
        }
        for key in ["firstTimestamp", "lastTimestamp"] {
            out.entry(key).or_insert(Value::Null);
        }
    }
    out.insert("kind".into(), "Event".into());
    Value::Object(out)
}

/// Whether `(group, resource)` is one of the two Event APIs.
pub fn is_event(group: &str, resource: &str) -> bool {
    (group, resource) == CORE || (group, resource) == EVENTS
}

/// The other view's key of the Event stored at `key`, written by the API `group` names.
fn counterpart(group: &str, namespace: &str, name: &str) -> ObjKey {
    let (g, r) = if group == CORE.0 { EVENTS } else { CORE };
    ObjKey::new(g, r, namespace, name)
}

/// Keeps the other view of the Event `stored` (written through the API `group` names).
pub fn mirror(txn: &mut Txn<'_>, group: &str, stored: &Value) {
    let namespace = stored
        .pointer("/metadata/namespace")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let name = stored
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let view = convert(stored, group == CORE.0);
    txn.put(counterpart(group, namespace, name), view);
}

/// Removes the other view of the Event `gone`.
pub fn forget(txn: &mut Txn<'_>, group: &str, gone: &Value) {
    let namespace = gone
        .pointer("/metadata/namespace")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let name = gone
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default();
    txn.remove(&counterpart(group, namespace, name));
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_two_views_rename_the_same_fields() {
        let events = json!({"apiVersion": "events.k8s.io/v1", "kind": "Event",
            "metadata": {"name": "e1", "namespace": "ns"}, "reason": "R", "type": "Normal",
            "note": "hello", "reportingController": "c", "reportingInstance": "i",
            "regarding": {"kind": "Pod", "name": "p"}, "deprecatedCount": 2});
        let core = convert(&events, false);
        assert_eq!(core["message"], "hello");
        assert_eq!(core["involvedObject"]["name"], "p");
        assert_eq!(core["reportingComponent"], "c");
        assert_eq!(core["count"], 2);
        assert_eq!(core["source"], json!({}));
        let back = convert(&core, true);
        assert_eq!(back["note"], "hello");
        assert_eq!(back["regarding"], events["regarding"]);
        assert_eq!(back["deprecatedSource"], json!({}));
    }
}
