//! Structural-schema handling for custom resources: defaulting (`default:`), pruning of unknown
//! fields (unless `x-kubernetes-preserve-unknown-fields`), and validation (type, nullable,
//! required, enum, pattern, minimum/maximum, exclusive bounds, min/maxLength, min/maxItems,
//! min/maxProperties, items, additionalProperties, x-kubernetes-int-or-string, oneOf/anyOf/allOf/not).
//! `x-kubernetes-validations` (CEL) rules are in `cel`; `format` is not checked.

pub mod cel;

use crate::error::Cause;
use serde_json::{Map, Value};

const ROOT_SKIP: &[&str] = &["apiVersion", "kind", "metadata"];

fn preserves(schema: &Value) -> bool {
    schema
        .get("x-kubernetes-preserve-unknown-fields")
        .and_then(Value::as_bool)
        == Some(true)
}

/// Applies defaults and prunes unknown fields of a whole object in place; returns the paths of
/// the pruned fields (`fieldValidation=Strict` refuses them, `Warn` reports them).
pub fn default_and_prune(obj: &mut Value, schema: &Value) -> Vec<String> {
    let mut pruned = Vec::new();
    let Some(map) = obj.as_object_mut() else {
        return pruned;
    };
    let props = schema.get("properties").and_then(Value::as_object);
    let keys: Vec<String> = map.keys().cloned().collect();
    for k in keys {
        if ROOT_SKIP.contains(&k.as_str()) {
            continue;
        }
        match props.and_then(|p| p.get(&k)) {
            Some(sub) => {
                if let Some(v) = map.get_mut(&k) {
                    walk(v, sub, &k, &mut pruned);
                }
            }
            None if preserves(schema) => {}
            None => {
                map.remove(&k);
                pruned.push(k.clone());
            }
        }
    }
    if let Some(props) = props {
        for (k, sub) in props {
            if ROOT_SKIP.contains(&k.as_str()) || map.contains_key(k) {
                continue;
            }
            if let Some(d) = sub.get("default") {
                let mut v = d.clone();
                walk(&mut v, sub, k, &mut Vec::new());
                map.insert(k.clone(), v);
            }
        }
    }
    pruned
}

fn walk(v: &mut Value, schema: &Value, path: &str, pruned: &mut Vec<String>) {
    match v {
        Value::Object(map) => walk_object(map, schema, path, pruned),
        Value::Array(items) => {
            if let Some(item_schema) = schema.get("items") {
                for (i, item) in items.iter_mut().enumerate() {
                    walk(item, item_schema, &format!("{path}[{i}]"), pruned);
                }
            }
        }
        _ => {}
    }
}

fn walk_object(map: &mut Map<String, Value>, schema: &Value, path: &str, pruned: &mut Vec<String>) {
    if schema
        .get("x-kubernetes-embedded-resource")
        .and_then(Value::as_bool)
        == Some(true)
        && preserves(schema)
    {
        return;
    }
    let props = schema.get("properties").and_then(Value::as_object);
    let additional = schema.get("additionalProperties");
    let keys: Vec<String> = map.keys().cloned().collect();
    for k in keys {
        let sub = props
            .and_then(|p| p.get(&k))
            .or(additional.filter(|a| a.is_object()));
        match sub {
            Some(sub) => {
                if let Some(v) = map.get_mut(&k) {
                    walk(v, sub, &format!("{path}.{k}"), pruned);
                }
            }
            None => {
                let keep = preserves(schema)
                    || additional.and_then(Value::as_bool) == Some(true)
                    || schema.get("x-kubernetes-int-or-string").is_some();
                // keep fields only described inside oneOf/anyOf/allOf branches, as a structural schema requires them in properties
                if !keep {
                    map.remove(&k);
                    pruned.push(format!("{path}.{k}"));
                }
            }
        }
    }
    if let Some(props) = props {
        for (k, sub) in props {
            if map.contains_key(k) {
                continue;
            }
            if let Some(d) = sub.get("default") {
                let mut v = d.clone();
                walk(&mut v, sub, &format!("{path}.{k}"), &mut Vec::new());
                map.insert(k.clone(), v);
            }
        }
    }
}

/// Validates a whole object (apiVersion, kind and metadata excepted) against its schema.
pub fn validate_object(obj: &Value, schema: &Value) -> Vec<Cause> {
    let mut causes = Vec::new();
    let Some(map) = obj.as_object() else {
        causes.push(Cause::new(
            "FieldValueTypeInvalid",
            "<root>",
            "must be an object",
        ));
        return causes;
    };
    let props = schema.get("properties").and_then(Value::as_object);
    if let Some(req) = schema.get("required").and_then(Value::as_array) {
        for r in req.iter().filter_map(Value::as_str) {
            if !ROOT_SKIP.contains(&r) && map.get(r).is_none_or(Value::is_null) {
                causes.push(Cause::new("FieldValueRequired", r, "Required value"));
            }
        }
    }
    for (k, v) in map {
        if ROOT_SKIP.contains(&k.as_str()) {
            continue;
        }
        if let Some(sub) = props.and_then(|p| p.get(k)) {
            validate(v, sub, k, &mut causes);
        }
    }
    causes
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn type_ok(v: &Value, ty: &str, schema: &Value) -> bool {
    if schema
        .get("x-kubernetes-int-or-string")
        .and_then(Value::as_bool)
        == Some(true)
    {
        return v.is_string() || type_name(v) == "integer";
    }
    match ty {
        "object" => v.is_object(),
        "array" => v.is_array(),
        "string" => v.is_string(),
        "boolean" => v.is_boolean(),
        "integer" => type_name(v) == "integer" || v.as_f64().is_some_and(|f| f.fract() == 0.0),
        "number" => v.is_number(),
        _ => true,
    }
}

fn quoted(v: &Value) -> String {
    match v {
        Value::String(s) => format!("{s:?}"),
        other => other.to_string(),
    }
}

/// Validates `v` at `path` against `schema`, appending causes.
pub fn validate(v: &Value, schema: &Value, path: &str, causes: &mut Vec<Cause>) {
    if v.is_null() {
        if schema.get("nullable").and_then(Value::as_bool) == Some(true)
            || schema.get("type").is_none()
        {
            return;
        }
        causes.push(Cause::new(
            "FieldValueTypeInvalid",
            path,
            format!(
                "Invalid value: \"null\": {path} in body must be of type {}: \"null\"",
                schema
                    .get("type")
                    .and_then(Value::as_str)
                    .unwrap_or("object")
            ),
        ));
        return;
    }
    if let Some(ty) = schema.get("type").and_then(Value::as_str)
        && !type_ok(v, ty, schema)
    {
        causes.push(Cause::new(
            "FieldValueTypeInvalid",
            path,
            format!(
                "Invalid value: \"{}\": {path} in body must be of type {ty}: \"{}\"",
                type_name(v),
                type_name(v)
            ),
        ));
        return;
    }
    if let Some(allowed) = schema.get("enum").and_then(Value::as_array)
        && !allowed.contains(v)
    {
        let list: Vec<String> = allowed.iter().map(quoted).collect();
        causes.push(Cause::new(
            "FieldValueNotSupported",
            path,
            format!(
                "Unsupported value: {}: supported values: {}",
                quoted(v),
                list.join(", ")
            ),
        ));
    }
    if let Some(s) = v.as_str() {
        let len = s.chars().count() as u64;
        if let Some(max) = schema
            .get("maxLength")
            .and_then(Value::as_u64)
            .filter(|m| len > *m)
        {
            causes.push(Cause::new(
                "FieldValueTooLong",
                path,
                format!("Too long: may not be more than {max} bytes"),
            ));
        }
        if let Some(min) = schema
            .get("minLength")
            .and_then(Value::as_u64)
            .filter(|m| len < *m)
        {
            causes.push(Cause::new(
                "FieldValueInvalid",
                path,
                format!("Invalid value: {s:?}: {path} in body should be at least {min} chars long"),
            ));
        }
        if let Some(p) = schema.get("pattern").and_then(Value::as_str) {
            match regex::Regex::new(p) {
                Ok(re) if !re.is_match(s) => causes.push(Cause::new(
                    "FieldValueInvalid",
                    path,
                    format!("Invalid value: {s:?}: {path} in body should match '{p}'"),
                )),
                _ => {}
            }
        }
    }
    if let Some(n) = v.as_f64().filter(|_| v.is_number()) {
        let excl_min = schema.get("exclusiveMinimum").and_then(Value::as_bool) == Some(true);
        let excl_max = schema.get("exclusiveMaximum").and_then(Value::as_bool) == Some(true);
        if let Some(min) = schema.get("minimum").and_then(Value::as_f64)
            && (n < min || (excl_min && n == min))
        {
            causes.push(Cause::new(
                "FieldValueInvalid",
                path,
                format!(
                    "Invalid value: {v}: {path} in body should be greater than or equal to {min}"
                ),
            ));
        }
        if let Some(max) = schema.get("maximum").and_then(Value::as_f64)
            && (n > max || (excl_max && n == max))
        {
            causes.push(Cause::new(
                "FieldValueInvalid",
                path,
                format!("Invalid value: {v}: {path} in body should be less than or equal to {max}"),
            ));
        }
    }
    if let Some(items) = v.as_array() {
        let len = items.len() as u64;
        if let Some(max) = schema
            .get("maxItems")
            .and_then(Value::as_u64)
            .filter(|m| len > *m)
        {
            causes.push(Cause::new(
                "FieldValueTooMany",
                path,
                format!("Too many: {len}: must have at most {max} items"),
            ));
        }
        if let Some(min) = schema
            .get("minItems")
            .and_then(Value::as_u64)
            .filter(|m| len < *m)
        {
            causes.push(Cause::new(
                "FieldValueInvalid",
                path,
                format!("Invalid value: {len}: {path} in body should have at least {min} items"),
            ));
        }
        if let Some(item_schema) = schema.get("items") {
            for (i, item) in items.iter().enumerate() {
                validate(item, item_schema, &format!("{path}[{i}]"), causes);
            }
        }
    }
    if let Some(map) = v.as_object() {
        let len = map.len() as u64;
        if let Some(max) = schema
            .get("maxProperties")
            .and_then(Value::as_u64)
            .filter(|m| len > *m)
        {
            causes.push(Cause::new(
                "FieldValueTooMany",
                path,
                format!("Too many: {len}: must have at most {max} properties"),
            ));
        }
        if let Some(min) = schema
            .get("minProperties")
            .and_then(Value::as_u64)
            .filter(|m| len < *m)
        {
            causes.push(Cause::new(
                "FieldValueInvalid",
                path,
                format!(
                    "Invalid value: {len}: {path} in body should have at least {min} properties"
                ),
            ));
        }
        if let Some(req) = schema.get("required").and_then(Value::as_array) {
            for r in req.iter().filter_map(Value::as_str) {
                if map.get(r).is_none() {
                    causes.push(Cause::new(
                        "FieldValueRequired",
                        format!("{path}.{r}"),
                        "Required value",
                    ));
                }
            }
        }
        let props = schema.get("properties").and_then(Value::as_object);
        let additional = schema.get("additionalProperties");
        for (k, child) in map {
            let child_path = format!("{path}.{k}");
            if let Some(sub) = props.and_then(|p| p.get(k)) {
                validate(child, sub, &child_path, causes);
            } else if let Some(sub) = additional.filter(|a| a.is_object()) {
                validate(child, sub, &child_path, causes);
            } else if additional.and_then(Value::as_bool) == Some(false) && props.is_some() {
                causes.push(Cause::new(
                    "FieldValueNotSupported",
                    child_path,
                    "field not declared in schema",
                ));
            }
        }
    }
    let branch_ok = |sub: &Value| {
        let mut c = Vec::new();
        validate(v, sub, path, &mut c);
        c.is_empty()
    };
    if let Some(all) = schema.get("allOf").and_then(Value::as_array) {
        for sub in all {
            validate(v, sub, path, causes);
        }
    }
    if let Some(any) = schema.get("anyOf").and_then(Value::as_array)
        && !any.is_empty()
        && !any.iter().any(branch_ok)
    {
        causes.push(Cause::new(
            "FieldValueInvalid",
            path,
            format!(
                "Invalid value: {}: {path} in body must match at least one schema in anyOf",
                quoted(v)
            ),
        ));
    }
    if let Some(one) = schema.get("oneOf").and_then(Value::as_array) {
        let n = one.iter().filter(|s| branch_ok(s)).count();
        if !one.is_empty() && n != 1 {
            causes.push(Cause::new("FieldValueInvalid", path, format!("Invalid value: {}: {path} in body must match exactly one schema in oneOf ({n} matched)", quoted(v))));
        }
    }
    if let Some(not) = schema.get("not")
        && branch_ok(not)
    {
        causes.push(Cause::new(
            "FieldValueInvalid",
            path,
            format!(
                "Invalid value: {}: {path} in body must not match the schema in not",
                quoted(v)
            ),
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema() -> Value {
        json!({"type": "object", "properties": {
            "spec": {"type": "object", "required": ["openStackRelease"], "properties": {
                "openStackRelease": {"type": "string", "enum": ["2024.2", "2025.1"]},
                "replicas": {"type": "integer", "minimum": 1, "maximum": 9, "default": 3},
                "name": {"type": "string", "pattern": "^[a-z]+$", "maxLength": 5},
                "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                "items": {"type": "array", "items": {"type": "integer"}}
            }},
            "status": {"type": "object", "properties": {"phase": {"type": "string", "nullable": true}}}
        }})
    }

    #[test]
    fn defaults_prunes_and_validates() {
        let mut obj = json!({"apiVersion": "x/v1", "kind": "K", "metadata": {"name": "a"},
            "spec": {"openStackRelease": "2025.1", "junk": 1, "free": {"any": {"thing": 1}}, "labels": {"a": "b"}}});
        let pruned = default_and_prune(&mut obj, &schema());
        assert_eq!(pruned, ["spec.junk"]);
        assert_eq!(obj["spec"]["replicas"], 3);
        assert!(obj["spec"].get("junk").is_none());
        assert_eq!(obj["spec"]["free"]["any"]["thing"], 1);
        assert!(validate_object(&obj, &schema()).is_empty());
    }

    #[test]
    fn violations_name_the_field() {
        let obj = json!({"spec": {"openStackRelease": "1999", "replicas": 0, "name": "ABCDEFG", "items": [1, "x"], "labels": {"a": 1}}});
        let causes = validate_object(&obj, &schema());
        let fields: Vec<&str> = causes.iter().map(|c| c.field.as_str()).collect();
        for f in [
            "spec.openStackRelease",
            "spec.replicas",
            "spec.name",
            "spec.items[1]",
            "spec.labels.a",
        ] {
            assert!(fields.contains(&f), "{f} missing in {fields:?}");
        }
        let missing = validate_object(&json!({"spec": {}}), &schema());
        assert_eq!(missing[0].field, "spec.openStackRelease");
    }
}
