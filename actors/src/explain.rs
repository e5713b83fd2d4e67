//! `lock-plan`, like SQL EXPLAIN: a pure function from the JSON document of design section 3
//! (`{cache, queries, nested}`) to what Lock and NestedLock would do (plan, acquisitions, releases,
//! lock context), or an input error naming the bad field.

use crate::error::LockError;
use crate::plan::{self, LockContext, MapView, Plan};
use crate::query::{Query, parse_call};
use crate::schema::Schema;
use serde_json::{Map, Value, json};

/// A document that cannot be explained; `field` names the bad part (e.g. `queries[0][1].call`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct ExplainInputError {
    /// The JSON path of the bad field.
    pub field: String,
    /// What is wrong with it.
    pub message: String,
}

fn bad(field: impl Into<String>, message: impl Into<String>) -> ExplainInputError {
    ExplainInputError {
        field: field.into(),
        message: message.into(),
    }
}

/// Explains a document given as text; the output is pretty JSON.
pub fn explain_str(schema: &Schema, text: &str) -> Result<String, ExplainInputError> {
    let doc: Value =
        serde_json::from_str(text).map_err(|e| bad("document", format!("not JSON: {e}")))?;
    let out = explain(schema, &doc)?;
    serde_json::to_string_pretty(&out)
        .map_err(|e| bad("document", format!("output cannot be written: {e}")))
}

/// Explains a parsed document: `{"lock": {...}, "nested": {...}}` (`nested` only when asked).
pub fn explain(schema: &Schema, doc: &Value) -> Result<Value, ExplainInputError> {
    let obj = doc
        .as_object()
        .ok_or_else(|| bad("document", "must be a JSON object"))?;
    for k in obj.keys() {
        if !matches!(k.as_str(), "cache" | "queries" | "nested") {
            return Err(bad(
                k.clone(),
                "unknown field (expected cache, queries, nested)",
            ));
        }
    }
    let view = parse_cache(schema, obj.get("cache"))?;
    let queries = parse_queries(
        schema,
        "queries",
        obj.get("queries")
            .ok_or_else(|| bad("queries", "missing"))?,
    )?;
    let nested = match obj.get("nested") {
        Some(v) => Some(parse_queries(schema, "nested", v)?),
        None => None,
    };

    let mut out = Map::new();
    let lock = plan::plan(schema, &view, &queries, None);
    out.insert("lock".to_string(), phase_json(&lock));
    if let Some(nested) = nested {
        let phase = match &lock {
            Ok(p) => phase_json(&plan::plan(schema, &view, &nested, Some(&p.context_after))),
            Err(_) => {
                json!({"error": {"code": "no_lock_context", "message": "the lock phase was refused, so there is no lock context to nest in"}})
            }
        };
        out.insert("nested".to_string(), phase);
    }
    Ok(Value::Object(out))
}

fn phase_json(p: &Result<Plan, LockError>) -> Value {
    match p {
        Err(e) => json!({"error": {"code": e.code(), "message": e.to_string()}}),
        Ok(p) => json!({
            "plan": p.entries.iter().map(|e| json!({
                "op": e.op.as_str(),
                "kind": e.kind,
                "id": e.id,
                "query": e.query,
                "synthetic": e.synthetic,
            })).collect::<Vec<_>>(),
            "acquire": p.acquisitions(),
            "release": p.releases(),
            "context": context_json(&p.context_after),
        }),
    }
}

fn context_json(c: &LockContext) -> Value {
    json!({
        "held": c.held.iter().map(|((kind, id), mode)| json!({"mode": mode, "kind": kind, "id": id})).collect::<Vec<_>>(),
        "holdsRoot": c.holds_root,
        "lastLockHeld": c.last_lock_held.as_ref().map(|l| json!({"op": l.op.as_str(), "kind": l.kind, "id": l.id})),
    })
}

fn parse_cache(schema: &Schema, cache: Option<&Value>) -> Result<MapView, ExplainInputError> {
    let mut view = MapView::new();
    let Some(cache) = cache else { return Ok(view) };
    let cache = cache
        .as_object()
        .ok_or_else(|| bad("cache", "must be an object of kind -> list of values"))?;
    for (kind, values) in cache {
        let field = format!("cache.{kind}");
        if schema.kind(kind).is_none() {
            return Err(bad(field, format!("unknown kind {kind:?}")));
        }
        let values = values
            .as_array()
            .ok_or_else(|| bad(&field, "must be a list of values"))?;
        for (i, v) in values.iter().enumerate() {
            let vf = format!("{field}[{i}]");
            if !v.is_object() {
                return Err(bad(vf, "must be an object"));
            }
            let id = v
                .get("id")
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
                .ok_or_else(|| bad(format!("{vf}.id"), "missing or not a non-empty string"))?;
            view.insert(schema, kind, id, v.clone());
        }
    }
    Ok(view)
}

fn parse_queries(schema: &Schema, field: &str, v: &Value) -> Result<Vec<Query>, ExplainInputError> {
    let qs = v
        .as_array()
        .ok_or_else(|| bad(field, "must be a list of queries (lists of calls)"))?;
    let mut out = Vec::with_capacity(qs.len());
    for (i, q) in qs.iter().enumerate() {
        let qf = format!("{field}[{i}]");
        let calls = q
            .as_array()
            .ok_or_else(|| bad(&qf, "must be a list of calls"))?;
        let mut subs = Vec::with_capacity(calls.len());
        for (j, c) in calls.iter().enumerate() {
            let cf = format!("{qf}[{j}]");
            let c = c
                .as_object()
                .ok_or_else(|| bad(&cf, "must be an object {\"call\", \"args\"}"))?;
            for k in c.keys() {
                if k != "call" && k != "args" {
                    return Err(bad(
                        format!("{cf}.{k}"),
                        "unknown field (expected call, args)",
                    ));
                }
            }
            let call = c
                .get("call")
                .and_then(Value::as_str)
                .ok_or_else(|| bad(format!("{cf}.call"), "missing or not a string"))?;
            let args = match c.get("args") {
                None => Vec::new(),
                Some(a) => {
                    let a = a
                        .as_array()
                        .ok_or_else(|| bad(format!("{cf}.args"), "must be a list of strings"))?;
                    a.iter()
                        .enumerate()
                        .map(|(k, x)| {
                            x.as_str()
                                .map(str::to_string)
                                .ok_or_else(|| bad(format!("{cf}.args[{k}]"), "must be a string"))
                        })
                        .collect::<Result<Vec<_>, _>>()?
                }
            };
            let sub = parse_call(schema, call, &args).map_err(|e| match e {
                crate::query::CallError::UnknownCall(_) => bad(format!("{cf}.call"), e.to_string()),
                crate::query::CallError::WrongArgumentCount { .. } => {
                    bad(format!("{cf}.args"), e.to_string())
                }
            })?;
            subs.push(sub);
        }
        out.push(Query(subs));
    }
    Ok(out)
}
