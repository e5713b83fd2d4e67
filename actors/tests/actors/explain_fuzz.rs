//! Fuzzing of `lock-plan` (explain) input: arbitrary JSON documents and mutated valid documents
//! always give an explanation (each phase a plan or a coded refusal) or an input error naming a
//! field, never a panic. `PROPTEST_CASES` sets the number of cases per property (256 by default;
//! the longer run is `PROPTEST_CASES=20000 cargo test -p cinder-actors --test actors explain_fuzz`).

use cinder_actors::{Schema, explain_str};
use proptest::prelude::*;
use serde_json::{Map, Value, json};

/// The calls of the vocabulary with how many string arguments each takes.
const CALLS: &[(&str, usize)] = &[
    ("ListBackends", 0),
    ("ListVolumes", 0),
    ("ListNodes", 0),
    ("ListDevices", 0),
    ("ReadBackend", 1),
    ("ReadVolume", 1),
    ("ReadNode", 1),
    ("ReadDevice", 1),
    ("ReadSnapshot", 1),
    ("InconsistentReadVolume", 1),
    ("UpsertBackend", 3),
    ("UpsertVolume", 2),
    ("UpsertNode", 1),
    ("UpsertDevice", 1),
    ("UpsertVolumePublication", 2),
    ("UpsertSnapshot", 2),
    ("UpsertSubordinateVolume", 2),
    ("DeleteVolume", 1),
    ("DeleteBackend", 1),
    ("ListVolumesForBackend", 1),
    ("ListVolumePublicationsForVolume", 1),
    ("ListSnapshotsForVolume", 1),
];

fn any_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<f64>().prop_map(|f| json!(f)),
        "[a-zA-Z0-9 ._\\-\\[\\]{}\"\\\\]{0,12}".prop_map(Value::String),
        prop::sample::select(vec![
            "cache", "queries", "nested", "call", "args", "id", "backend", "volume", "node",
        ])
        .prop_map(|s| Value::String(s.to_string())),
    ];
    leaf.prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::vec(
                (
                    prop::sample::select(vec![
                        "cache", "queries", "nested", "call", "args", "id", "name", "backend",
                        "volume", "node", "x"
                    ]),
                    inner
                ),
                0..5
            )
            .prop_map(|kv| Value::Object(
                kv.into_iter().map(|(k, v)| (k.to_string(), v)).collect()
            )),
        ]
    })
}

fn id() -> impl Strategy<Value = String> {
    prop::sample::select(vec!["backend1", "volume1", "node1", "v2", "b1"]).prop_map(str::to_string)
}

fn query_call() -> impl Strategy<Value = Value> {
    (
        prop::sample::select(CALLS.to_vec()),
        prop::collection::vec(id(), 3),
    )
        .prop_map(|((call, arity), args)| json!({"call": call, "args": args[..arity]}))
}

/// A document the explainer understands (its phases may still be refused).
fn valid_doc() -> impl Strategy<Value = Value> {
    (
        prop::collection::vec(prop::collection::vec(query_call(), 0..4), 0..3),
        prop::option::of(prop::collection::vec(
            prop::collection::vec(query_call(), 0..3),
            0..2,
        )),
    )
        .prop_map(|(queries, nested)| {
            let mut doc = json!({
                "cache": {
                    "backend": [{"id": "backend1", "name": "b1"}],
                    "node": [{"id": "node1"}],
                    "volume": [{"id": "volume1", "backend": "backend1"}]
                },
                "queries": queries,
            });
            if let (Some(nested), Some(obj)) = (nested, doc.as_object_mut()) {
                obj.insert("nested".into(), json!(nested));
            }
            doc
        })
}

/// Every path (as indexes into objects and arrays) of `v`.
fn paths(v: &Value, here: Vec<PathStep>, out: &mut Vec<Vec<PathStep>>) {
    out.push(here.clone());
    match v {
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                let mut p = here.clone();
                p.push(PathStep::Index(i));
                paths(item, p, out);
            }
        }
        Value::Object(map) => {
            for (k, item) in map {
                let mut p = here.clone();
                p.push(PathStep::Key(k.clone()));
                paths(item, p, out);
            }
        }
        _ => {}
    }
}

#[derive(Clone, Debug)]
enum PathStep {
    Key(String),
    Index(usize),
}

fn at_mut<'a>(v: &'a mut Value, path: &[PathStep]) -> Option<&'a mut Value> {
    path.iter().try_fold(v, |v, step| match step {
        PathStep::Key(k) => v.get_mut(k.as_str()),
        PathStep::Index(i) => v.get_mut(*i),
    })
}

/// Replaces the value at one path of `doc` with `with`, or removes it from its parent.
fn mutate(mut doc: Value, pick: prop::sample::Index, with: Value, remove: bool) -> Value {
    let mut all = Vec::new();
    paths(&doc, Vec::new(), &mut all);
    let path = pick.get(&all).clone();
    match (remove, path.split_last()) {
        (true, Some((last, parent))) => {
            if let Some(parent) = at_mut(&mut doc, parent) {
                match (parent, last) {
                    (Value::Object(m), PathStep::Key(k)) => {
                        m.remove(k);
                    }
                    (Value::Array(a), PathStep::Index(i)) if *i < a.len() => {
                        a.remove(*i);
                    }
                    _ => {}
                }
            }
        }
        _ => {
            if let Some(slot) = at_mut(&mut doc, &path) {
                *slot = with;
            }
        }
    }
    doc
}

/// The property: an explanation whose phases are each a plan or a coded refusal, or an input
/// error naming a field.
fn explains_or_names_the_field(text: &str) -> Result<(), TestCaseError> {
    match explain_str(&Schema::standard(), text) {
        Ok(out) => {
            let out: Value = serde_json::from_str(&out)
                .map_err(|e| TestCaseError::fail(format!("output is not JSON: {e}")))?;
            let phases: &Map<String, Value> = out
                .as_object()
                .ok_or_else(|| TestCaseError::fail("output is not an object"))?;
            prop_assert!(phases.contains_key("lock"), "{out}");
            for (name, phase) in phases {
                let planned = phase.get("plan").is_some_and(Value::is_array);
                let refused = phase
                    .pointer("/error/code")
                    .and_then(Value::as_str)
                    .is_some_and(|c| !c.is_empty() && !c.contains(' '));
                prop_assert!(planned || refused, "phase {name}: {phase}");
            }
        }
        Err(e) => prop_assert!(!e.field.is_empty() && !e.message.is_empty(), "{e:?}"),
    }
    Ok(())
}

#[test]
fn the_generators_vocabulary_is_understood() {
    for (call, arity) in CALLS {
        let args = vec!["volume1"; *arity];
        let doc = json!({"queries": [[{"call": call, "args": args}]]});
        if let Err(e) = explain_str(&Schema::standard(), &doc.to_string()) {
            panic!("{call} with {arity} arguments: {e}");
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::default())]

    #[test]
    fn arbitrary_json_never_panics(doc in any_json()) {
        explains_or_names_the_field(&doc.to_string())?;
    }

    #[test]
    fn arbitrary_text_never_panics(text in "\\PC{0,64}") {
        explains_or_names_the_field(&text)?;
    }

    #[test]
    fn valid_documents_explain(doc in valid_doc()) {
        let text = doc.to_string();
        prop_assert!(explain_str(&Schema::standard(), &text).is_ok(), "{text}");
        explains_or_names_the_field(&text)?;
    }

    #[test]
    fn mutated_valid_documents_never_panic(
        doc in valid_doc(),
        pick in any::<prop::sample::Index>(),
        with in any_json(),
        remove in any::<bool>(),
    ) {
        explains_or_names_the_field(&mutate(doc, pick, with, remove).to_string())?;
    }
}
