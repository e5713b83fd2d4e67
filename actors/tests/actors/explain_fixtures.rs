//! `lock-plan` (explain) on the reference design's two worked examples from JSON fixtures, comparing whole outputs,
//! plus input errors naming the bad field and refused phases.

use cinder_actors::{Schema, explain, explain_str};
use serde_json::{Value, json};

/// A fixture, compiled in: cargo tracks an included file, so a test binary is never run
/// against fixtures of another checkout.
fn fixture(name: &str) -> Value {
    let text = match name {
        "example1.json" => include_str!("fixtures/example1.json"),
        "example1.expected.json" => include_str!("fixtures/example1.expected.json"),
        "example2.json" => include_str!("fixtures/example2.json"),
        "example2.expected.json" => include_str!("fixtures/example2.expected.json"),
        other => panic!("no fixture {other}"),
    };
    serde_json::from_str(text).unwrap()
}

#[test]
fn example1_whole_output() {
    let out = explain(&Schema::standard(), &fixture("example1.json")).unwrap();
    assert_eq!(out, fixture("example1.expected.json"));
    assert!(out.get("nested").is_none());
}

#[test]
fn example2_whole_output() {
    let out = explain(&Schema::standard(), &fixture("example2.json")).unwrap();
    assert_eq!(out, fixture("example2.expected.json"));
    assert_eq!(
        out["nested"]["context"]["lastLockHeld"],
        json!({"op": "upsert", "kind": "volume", "id": "volume3"})
    );
}

fn field_of(doc: &str) -> String {
    explain_str(&Schema::standard(), doc).unwrap_err().field
}

#[test]
fn input_errors_name_the_field() {
    assert_eq!(field_of("[1"), "document");
    assert_eq!(field_of("[]"), "document");
    assert_eq!(field_of(r#"{"cache": {}}"#), "queries");
    assert_eq!(
        field_of(r#"{"queries": [[{"call": "Nope"}]]}"#),
        "queries[0][0].call"
    );
    assert_eq!(
        field_of(r#"{"queries": [[{"call": "ReadVolume", "args": []}]]}"#),
        "queries[0][0].args"
    );
    assert_eq!(
        field_of(r#"{"queries": [[{"call": "ReadVolume", "args": [1]}]]}"#),
        "queries[0][0].args[0]"
    );
    assert_eq!(
        field_of(r#"{"queries": [], "cache": {"gizmo": []}}"#),
        "cache.gizmo"
    );
    assert_eq!(
        field_of(r#"{"queries": [], "cache": {"node": [{}]}}"#),
        "cache.node[0].id"
    );
    assert_eq!(field_of(r#"{"queries": [], "extra": 1}"#), "extra");
}

fn lock_error(doc: Value) -> String {
    let out = explain(&Schema::standard(), &doc).unwrap();
    out["lock"]["error"]["code"]
        .as_str()
        .unwrap_or("none")
        .to_string()
}

#[test]
fn refused_phases_report_codes() {
    assert_eq!(
        lock_error(
            json!({"queries": [[{"call": "ListVolumes"}, {"call": "ListVolumesForBackend", "args": ["b"]}]]})
        ),
        "duplicate_operation"
    );
    assert_eq!(
        lock_error(
            json!({"cache": {"backend": [{"id": "b1", "name": "n1"}, {"id": "b2", "name": "n2"}]},
            "queries": [[{"call": "UpsertBackend", "args": ["b2", "", "n1"]}]]})
        ),
        "key_exists"
    );
    assert_eq!(
        lock_error(json!({"queries": [[{"call": "UpsertVolume", "args": ["v", ""]}]]})),
        "not_found"
    );
    let out = explain(
        &Schema::standard(),
        &json!({"queries": [[{"call": "ReadBackend", "args": ["b"]}]],
                "nested": [[{"call": "UpsertBackend", "args": ["b", "", ""]}]]}),
    )
    .unwrap();
    assert_eq!(out["nested"]["error"]["code"], "lock_upgrade");
    let out = explain(
        &Schema::standard(),
        &json!({"queries": [[{"call": "ReadVolume", "args": ["a"]}, {"call": "ReadVolume", "args": ["b"]}]],
                "nested": []}),
    )
    .unwrap();
    assert_eq!(out["lock"]["error"]["code"], "duplicate_operation");
    assert_eq!(out["nested"]["error"]["code"], "no_lock_context");
}

#[test]
fn rename_takes_a_key_lock_first() {
    let out = explain(
        &Schema::standard(),
        &json!({"cache": {"backend": [{"id": "b1", "name": "old"}]},
                "queries": [[{"call": "UpsertBackend", "args": ["", "old", "new"]}]]}),
    )
    .unwrap();
    assert_eq!(
        out["lock"]["acquire"],
        json!([
            {"mode": "write", "kind": "key:backend", "id": "new"},
            {"mode": "read", "kind": "root", "id": "."},
            {"mode": "write", "kind": "backend", "id": "b1"}
        ])
    );
}

/// The plan of one query alone against the design's example cache: (op, kind, id, synthetic).
fn plan_alone(call: Value) -> Vec<(String, String, String, bool)> {
    let doc = json!({
        "cache": {
            "backend": [{"id": "backend1", "name": "b1"}],
            "node": [{"id": "node1"}],
            "volume": [{"id": "volume1", "backend": "backend1"}]
        },
        "queries": [[call]]
    });
    let out = explain(&Schema::standard(), &doc).unwrap();
    out["lock"]["plan"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["op"].as_str().unwrap().to_string(),
                e["kind"].as_str().unwrap().to_string(),
                e["id"].as_str().unwrap().to_string(),
                e["synthetic"].as_bool().unwrap(),
            )
        })
        .collect()
}

fn row(op: &str, kind: &str, id: &str, synthetic: bool) -> (String, String, String, bool) {
    (op.into(), kind.into(), id.into(), synthetic)
}

#[test]
fn synthetic_parent_reads_are_added_recursively() {
    assert_eq!(
        plan_alone(json!({"call": "UpsertVolumePublication", "args": ["volume1", "node1"]})),
        vec![
            row("read", "root", ".", true),
            row("read", "backend", "backend1", true),
            row("read", "node", "node1", true),
            row("read", "volume", "volume1", true),
            row("upsert", "volumePublication", "volume1.node1", false),
        ]
    );
    assert_eq!(
        plan_alone(json!({"call": "UpsertSnapshot", "args": ["volume1", "snap1"]})),
        vec![
            row("read", "root", ".", true),
            row("read", "backend", "backend1", true),
            row("read", "volume", "volume1", true),
            row("upsert", "snapshot", "snap1", false),
        ]
    );
}
