//! CEL validation rules of CRD schemas (`x-kubernetes-validations`), evaluated with the `cel`
//! crate (the cel-rust interpreter, formerly published as `cel-interpreter`): every rule (and
//! `messageExpression`) is compiled when a CRD is written (a rule that does not compile
//! refuses the CRD), and evaluated on every write of an
//! instance at each schema node whose value is present, with `self` (the node's value) and, on
//! updates, `oldSelf` (the old value at the same path, correlated through object properties and
//! map keys; a rule that uses `oldSelf` is a transition rule and is skipped on create and where
//! there is no old value). A failing rule gives a cause with its `reason` (default
//! FieldValueInvalid), its field (the node's path plus `fieldPath`) and its message
//! (`messageExpression`, else `message`, else `failed rule: RULE`).
//!
//! Simplified against a real API server: rules are parsed, not type-checked, at CRD creation
//! (a reference to an unknown field fails at evaluation, refusing the write); there is no cost
//! budget (rules run to completion; the CRDs this server sees are small); list items are not
//! correlated with old items (transition rules under arrays are skipped); the Kubernetes CEL
//! extension libraries (quantity, URL, IP, CIDR, semver, format) are not available, the standard
//! CEL functions and macros are.

use crate::error::Cause;
use cel::objects::Key;
use cel::{Context, Program, Value as Cel};
use serde_json::Value;
use std::collections::HashMap;
use std::sync::Arc;

/// A JSON value as a CEL value (integers as `int`, other numbers as `double`).
pub fn to_cel(v: &Value) -> Cel {
    match v {
        Value::Null => Cel::Null,
        Value::Bool(b) => Cel::Bool(*b),
        Value::Number(n) => match n.as_i64() {
            Some(i) => Cel::Int(i),
            None => Cel::Float(n.as_f64().unwrap_or(f64::NAN)),
        },
        Value::String(s) => Cel::String(Arc::new(s.clone())),
        Value::Array(a) => Cel::List(Arc::new(a.iter().map(to_cel).collect())),
        Value::Object(m) => {
            let map: HashMap<Key, Cel> = m
                .iter()
                .map(|(k, v)| (Key::String(Arc::new(k.clone())), to_cel(v)))
                .collect();
            Cel::Map(map.into())
        }
    }
}

fn rules(schema: &Value) -> &[Value] {
    schema
        .get("x-kubernetes-validations")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default()
}

/// The compile errors of every rule in a schema, as causes under `path` (the schema's own path
/// inside the CRD, e.g. `spec.versions[0].schema.openAPIV3Schema`).
pub fn compile_errors(schema: &Value, path: &str) -> Vec<Cause> {
    let mut out = Vec::new();
    compile_walk(schema, path, &mut out);
    out
}

fn compile_walk(schema: &Value, path: &str, out: &mut Vec<Cause>) {
    for (i, rule) in rules(schema).iter().enumerate() {
        let at = format!("{path}.x-kubernetes-validations[{i}]");
        match rule.get("rule").and_then(Value::as_str) {
            Some(text) if !text.trim().is_empty() => {
                if let Err(e) = Program::compile(text) {
                    out.push(Cause::new(
                        "FieldValueInvalid",
                        format!("{at}.rule"),
                        format!("Invalid value: {text:?}: compilation failed: {e}"),
                    ));
                }
            }
            _ => out.push(Cause::new(
                "FieldValueRequired",
                format!("{at}.rule"),
                "Required value",
            )),
        }
        if let Some(expr) = rule.get("messageExpression").and_then(Value::as_str)
            && let Err(e) = Program::compile(expr)
        {
            out.push(Cause::new(
                "FieldValueInvalid",
                format!("{at}.messageExpression"),
                format!("Invalid value: {expr:?}: messageExpression compilation failed: {e}"),
            ));
        }
        if let Some(reason) = rule.get("reason").and_then(Value::as_str)
            && !REASONS.contains(&reason)
        {
            out.push(Cause::new(
                "FieldValueNotSupported",
                format!("{at}.reason"),
                format!(
                    "Unsupported value: {reason:?}: supported values: \"FieldValueDuplicate\", \"FieldValueForbidden\", \"FieldValueInvalid\", \"FieldValueRequired\""
                ),
            ));
        }
    }
    if let Some(props) = schema.get("properties").and_then(Value::as_object) {
        for (k, sub) in props {
            compile_walk(sub, &format!("{path}.properties[{k}]"), out);
        }
    }
    if let Some(items) = schema.get("items").filter(|i| i.is_object()) {
        compile_walk(items, &format!("{path}.items"), out);
    }
    if let Some(extra) = schema.get("additionalProperties").filter(|a| a.is_object()) {
        compile_walk(extra, &format!("{path}.additionalProperties"), out);
    }
}

const REASONS: &[&str] = &[
    "FieldValueInvalid",
    "FieldValueForbidden",
    "FieldValueRequired",
    "FieldValueDuplicate",
];

/// The causes of every failing rule for an object (`old`: its stored state on update).
pub fn validate_object(obj: &Value, old: Option<&Value>, schema: &Value) -> Vec<Cause> {
    let mut out = Vec::new();
    let root = root_view(obj);
    let old_root = old.map(root_view);
    walk(&root, old_root.as_ref(), schema, "", &mut out);
    out
}

/// What root-level rules see: apiVersion, kind, metadata name and generateName, the rest.
fn root_view(obj: &Value) -> Value {
    let mut v = obj.clone();
    if let Some(m) = v.as_object_mut() {
        let meta = obj.get("metadata");
        let mut kept = serde_json::Map::new();
        for k in ["name", "generateName"] {
            if let Some(x) = meta.and_then(|m| m.get(k)) {
                kept.insert(k.to_string(), x.clone());
            }
        }
        m.insert("metadata".into(), Value::Object(kept));
    }
    v
}

fn child(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

fn walk(v: &Value, old: Option<&Value>, schema: &Value, path: &str, out: &mut Vec<Cause>) {
    if v.is_null() {
        return;
    }
    for rule in rules(schema) {
        if let Some(cause) = evaluate(rule, v, old, path) {
            out.push(cause);
        }
    }
    match v {
        Value::Object(map) => {
            let props = schema.get("properties").and_then(Value::as_object);
            let extra = schema.get("additionalProperties").filter(|a| a.is_object());
            for (k, x) in map {
                if path.is_empty() && (k == "metadata" || k == "apiVersion" || k == "kind") {
                    continue;
                }
                let sub = props.and_then(|p| p.get(k)).or(extra);
                if let Some(sub) = sub {
                    let old_x = old.and_then(|o| o.get(k));
                    walk(x, old_x, sub, &child(path, k), out);
                }
            }
        }
        Value::Array(items) => {
            if let Some(sub) = schema.get("items").filter(|i| i.is_object()) {
                for (i, x) in items.iter().enumerate() {
                    walk(x, None, sub, &format!("{path}[{i}]"), out);
                }
            }
        }
        _ => {}
    }
}

fn type_word(v: &Value) -> &'static str {
    match v {
        Value::Object(_) => "object",
        Value::Array(_) => "array",
        Value::String(_) => "string",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::Bool(_) => "boolean",
        Value::Null => "null",
    }
}

/// Evaluates one rule at a node; Some(cause) when it fails (or cannot be evaluated).
fn evaluate(rule: &Value, v: &Value, old: Option<&Value>, path: &str) -> Option<Cause> {
    let text = rule.get("rule").and_then(Value::as_str)?;
    let program = match Program::compile(text) {
        Ok(p) => p,
        Err(e) => {
            return Some(Cause::new(
                "FieldValueInvalid",
                path,
                format!("Invalid value: {:?}: compilation failed: {e}", type_word(v)),
            ));
        }
    };
    let transition = program.references().has_variable("oldSelf");
    if transition && old.is_none() {
        return None;
    }
    let mut ctx = Context::default();
    ctx.add_variable_from_value("self", to_cel(v));
    if let Some(o) = old {
        ctx.add_variable_from_value("oldSelf", to_cel(o));
    }
    let failure = match program.execute(&ctx) {
        Ok(Cel::Bool(true)) => return None,
        Ok(Cel::Bool(false)) => None,
        Ok(other) => Some(format!(
            "rule did not evaluate to a boolean: {:?}",
            other.type_of()
        )),
        Err(e) => Some(format!("evaluation error: {e}")),
    };
    let message = match failure {
        Some(why) => why,
        None => rule_message(rule, &ctx).unwrap_or_else(|| format!("failed rule: {text}")),
    };
    let field = match rule.get("fieldPath").and_then(Value::as_str) {
        Some(fp) if !fp.is_empty() => {
            let fp = fp.strip_prefix('.').unwrap_or(fp);
            child(path, fp)
        }
        _ => path.to_string(),
    };
    let field = if field.is_empty() {
        "<root>".to_string()
    } else {
        field
    };
    let reason = rule
        .get("reason")
        .and_then(Value::as_str)
        .filter(|r| REASONS.contains(r))
        .unwrap_or("FieldValueInvalid");
    let text = match reason {
        "FieldValueForbidden" => format!("Forbidden: {message}"),
        "FieldValueRequired" => format!("Required value: {message}"),
        "FieldValueDuplicate" => format!("Duplicate value: {:?}: {message}", type_word(v)),
        _ => format!("Invalid value: {:?}: {message}", type_word(v)),
    };
    Some(Cause::new(reason, field, text))
}

/// The message of a failed rule: its messageExpression's string (when it evaluates to a
/// non-empty string), else its message.
fn rule_message(rule: &Value, ctx: &Context) -> Option<String> {
    if let Some(expr) = rule.get("messageExpression").and_then(Value::as_str)
        && let Ok(p) = Program::compile(expr)
        && let Ok(Cel::String(s)) = p.execute(ctx)
        && !s.trim().is_empty()
    {
        return Some(s.to_string());
    }
    rule.get("message")
        .and_then(Value::as_str)
        .filter(|m| !m.is_empty())
        .map(str::to_string)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema() -> Value {
        json!({"type": "object", "properties": {"spec": {
            "type": "object",
            "x-kubernetes-validations": [
                {"rule": "self.min <= self.max", "message": "min must not exceed max", "fieldPath": ".min"},
                {"rule": "self.name.size() <= 10", "messageExpression": "'name is ' + string(self.name.size()) + ' characters, at most 10'", "reason": "FieldValueForbidden"}
            ],
            "properties": {
                "min": {"type": "integer"}, "max": {"type": "integer"}, "name": {"type": "string"},
                "mode": {"type": "string", "x-kubernetes-validations": [
                    {"rule": "self == oldSelf", "message": "mode is immutable"}]}
            }
        }}})
    }

    #[test]
    fn rules_accept_and_refuse() {
        let ok = json!({"spec": {"min": 1, "max": 2, "name": "a"}});
        assert!(validate_object(&ok, None, &schema()).is_empty());
        let bad = json!({"spec": {"min": 3, "max": 2, "name": "abcdefghijkl"}});
        let c = validate_object(&bad, None, &schema());
        assert_eq!(c.len(), 2);
        assert_eq!(c[0].field, "spec.min");
        assert_eq!(
            c[0].message,
            "Invalid value: \"object\": min must not exceed max"
        );
        assert_eq!(c[1].reason, "FieldValueForbidden");
        assert_eq!(c[1].message, "Forbidden: name is 12 characters, at most 10");
    }

    #[test]
    fn transition_rules_need_an_old_value() {
        let new = json!({"spec": {"min": 1, "max": 2, "name": "a", "mode": "fast"}});
        assert!(validate_object(&new, None, &schema()).is_empty());
        let old = json!({"spec": {"min": 1, "max": 2, "name": "a", "mode": "slow"}});
        let c = validate_object(&new, Some(&old), &schema());
        assert_eq!(c.len(), 1);
        assert_eq!(c[0].field, "spec.mode");
        assert_eq!(c[0].message, "Invalid value: \"string\": mode is immutable");
        assert!(validate_object(&old, Some(&old), &schema()).is_empty());
    }

    #[test]
    fn broken_rules_do_not_compile() {
        let s = json!({"type": "object", "x-kubernetes-validations": [{"rule": "self.a >"}],
                       "properties": {"a": {"type": "string", "x-kubernetes-validations": [{"rule": "true", "reason": "Nope"}]}}});
        let c = compile_errors(&s, "spec.versions[0].schema.openAPIV3Schema");
        assert_eq!(c.len(), 2);
        assert_eq!(
            c[0].field,
            "spec.versions[0].schema.openAPIV3Schema.x-kubernetes-validations[0].rule"
        );
        assert!(
            c[1].field
                .ends_with("properties[a].x-kubernetes-validations[0].reason")
        );
        assert!(compile_errors(&schema(), "x").is_empty());
    }

    #[test]
    fn evaluation_errors_refuse() {
        let s = json!({"type": "object", "properties": {"spec": {"type": "object",
            "x-kubernetes-validations": [{"rule": "self.missing > 1"}]}}});
        let c = validate_object(&json!({"spec": {}}), None, &s);
        assert_eq!(c.len(), 1);
        assert!(c[0].message.contains("No such key"), "{}", c[0].message);
    }
}
