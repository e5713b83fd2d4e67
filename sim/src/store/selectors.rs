//! Label selectors (`=`, `==`, `!=`, `in`, `notin`, exists, `!` not exists) and field selectors
//! (`=`, `==`, `!=` on dotted paths such as metadata.name or spec.cinderRef.name).

use crate::error::ApiError;
use serde_json::Value;

/// One parsed label requirement.
#[derive(Clone, Debug, PartialEq)]
enum LabelReq {
    Eq(String, String),
    NotEq(String, String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Exists(String),
    NotExists(String),
}

/// A parsed label selector (all requirements must hold).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LabelSelector(Vec<LabelReq>);

/// Splits on commas that are not inside parentheses.
fn split_top(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut depth = 0i32;
    let mut cur = String::new();
    for c in s.chars() {
        match c {
            '(' => {
                depth += 1;
                cur.push(c)
            }
            ')' => {
                depth -= 1;
                cur.push(c)
            }
            ',' if depth == 0 => out.push(std::mem::take(&mut cur)),
            _ => cur.push(c),
        }
    }
    out.push(cur);
    out.into_iter()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .collect()
}

fn valid_key(k: &str) -> bool {
    !k.is_empty()
        && k.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./".contains(c))
}

fn set_values(rest: &str, whole: &str) -> Result<Vec<String>, ApiError> {
    let rest = rest.trim();
    let inner = rest
        .strip_prefix('(')
        .and_then(|r| r.strip_suffix(')'))
        .ok_or_else(|| {
            ApiError::bad_request(format!(
                "unable to parse requirement: {whole:?}: expected a parenthesised set"
            ))
        })?;
    Ok(inner
        .split(',')
        .map(|v| v.trim().to_string())
        .filter(|v| !v.is_empty())
        .collect())
}

impl LabelSelector {
    pub fn parse(s: &str) -> Result<LabelSelector, ApiError> {
        let mut reqs = Vec::new();
        for part in split_top(s) {
            let bad = || ApiError::bad_request(format!("unable to parse requirement: {part:?}"));
            let req = if let Some(k) = part.strip_prefix('!') {
                LabelReq::NotExists(k.trim().to_string())
            } else if let Some((k, v)) = part.split_once("!=") {
                LabelReq::NotEq(k.trim().to_string(), v.trim().to_string())
            } else if let Some((k, v)) = part.split_once("==") {
                LabelReq::Eq(k.trim().to_string(), v.trim().to_string())
            } else if let Some((k, v)) = part.split_once('=') {
                LabelReq::Eq(k.trim().to_string(), v.trim().to_string())
            } else if let Some(idx) = part.find(" notin ") {
                LabelReq::NotIn(
                    part[..idx].trim().to_string(),
                    set_values(&part[idx + 7..], &part)?,
                )
            } else if let Some(idx) = part.find(" in ") {
                LabelReq::In(
                    part[..idx].trim().to_string(),
                    set_values(&part[idx + 4..], &part)?,
                )
            } else if let Some(idx) = part.find("notin(") {
                LabelReq::NotIn(
                    part[..idx].trim().to_string(),
                    set_values(&part[idx + 5..], &part)?,
                )
            } else if let Some(idx) = part.find("in(") {
                LabelReq::In(
                    part[..idx].trim().to_string(),
                    set_values(&part[idx + 2..], &part)?,
                )
            } else {
                LabelReq::Exists(part.trim().to_string())
            };
            let key = match &req {
                LabelReq::Eq(k, _)
                | LabelReq::NotEq(k, _)
                | LabelReq::In(k, _)
                | LabelReq::NotIn(k, _)
                | LabelReq::Exists(k)
                | LabelReq::NotExists(k) => k,
            };
            if !valid_key(key) {
                return Err(bad());
            }
            reqs.push(req);
        }
        Ok(LabelSelector(reqs))
    }

    /// Whether an object's labels satisfy every requirement.
    pub fn matches(&self, obj: &Value) -> bool {
        if self.0.is_empty() {
            return true;
        }
        // by key, not by JSON pointer (a pointer allocates a string per segment)
        let labels = obj.get("metadata").and_then(|m| m.get("labels"));
        let get = |k: &str| labels.and_then(|l| l.get(k)).and_then(Value::as_str);
        self.0.iter().all(|r| match r {
            LabelReq::Eq(k, v) => get(k) == Some(v.as_str()),
            LabelReq::NotEq(k, v) => get(k) != Some(v.as_str()),
            LabelReq::In(k, vs) => get(k).is_some_and(|x| vs.iter().any(|v| v == x)),
            LabelReq::NotIn(k, vs) => get(k).is_none_or(|x| !vs.iter().any(|v| v == x)),
            LabelReq::Exists(k) => get(k).is_some(),
            LabelReq::NotExists(k) => get(k).is_none(),
        })
    }
}

/// Whether a `matchLabels`-style map selects `labels` (empty selector matches nothing, like Services).
pub fn map_selects(selector: &Value, labels: &Value) -> bool {
    let Some(sel) = selector.as_object() else {
        return false;
    };
    if sel.is_empty() {
        return false;
    }
    sel.iter().all(|(k, v)| labels.get(k) == Some(v))
}

/// Whether a `metav1.LabelSelector` (`matchLabels` and `matchExpressions` with In, NotIn,
/// Exists, DoesNotExist) selects `labels`. An empty selector selects everything, a missing one
/// (null) nothing, as for ReplicaSets and PodDisruptionBudgets.
pub fn label_selector_matches(selector: &Value, labels: &Value) -> bool {
    let Some(sel) = selector.as_object() else {
        return false;
    };
    let get = |k: &str| labels.get(k).and_then(Value::as_str);
    let by_label = sel
        .get("matchLabels")
        .and_then(Value::as_object)
        .is_none_or(|m| m.iter().all(|(k, v)| get(k) == v.as_str()));
    let by_expression = sel
        .get("matchExpressions")
        .and_then(Value::as_array)
        .is_none_or(|exprs| {
            exprs.iter().all(|e| {
                let key = e.get("key").and_then(Value::as_str).unwrap_or_default();
                let values: Vec<&str> = e
                    .get("values")
                    .and_then(Value::as_array)
                    .map(|a| a.iter().filter_map(Value::as_str).collect())
                    .unwrap_or_default();
                match e.get("operator").and_then(Value::as_str) {
                    Some("In") => get(key).is_some_and(|v| values.contains(&v)),
                    Some("NotIn") => get(key).is_none_or(|v| !values.contains(&v)),
                    Some("Exists") => get(key).is_some(),
                    Some("DoesNotExist") => get(key).is_none(),
                    _ => false,
                }
            })
        });
    by_label && by_expression
}

/// A parsed field selector.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FieldSelector(Vec<(String, bool, String)>);

fn field_value(obj: &Value, path: &str) -> String {
    let mut cur = obj;
    for part in path.split('.') {
        match cur.get(part) {
            Some(v) => cur = v,
            None => return String::new(),
        }
    }
    match cur {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

impl FieldSelector {
    pub fn parse(s: &str) -> Result<FieldSelector, ApiError> {
        let mut reqs = Vec::new();
        for part in split_top(s) {
            let (k, eq, v) = if let Some((k, v)) = part.split_once("!=") {
                (k, false, v)
            } else if let Some((k, v)) = part.split_once("==") {
                (k, true, v)
            } else if let Some((k, v)) = part.split_once('=') {
                (k, true, v)
            } else {
                return Err(ApiError::bad_request(format!(
                    "invalid field selector: {part:?}"
                )));
            };
            let k = k.trim();
            if k.is_empty()
                || !k
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '.' || c == '_' || c == '-')
            {
                return Err(ApiError::bad_request(format!(
                    "invalid field selector: {part:?}"
                )));
            }
            reqs.push((k.to_string(), eq, v.trim().to_string()));
        }
        Ok(FieldSelector(reqs))
    }

    /// The field labels the selector names.
    pub fn labels(&self) -> impl Iterator<Item = &str> {
        self.0.iter().map(|(k, _, _)| k.as_str())
    }

    pub fn matches(&self, obj: &Value) -> bool {
        self.0
            .iter()
            .all(|(k, eq, v)| (field_value(obj, k) == *v) == *eq)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn label_selector_operators() {
        let o = json!({"metadata": {"labels": {"app": "cinder", "tier": "api"}}});
        for (sel, want) in [
            ("app=cinder", true),
            ("app==cinder", true),
            ("app!=cinder", false),
            ("app in (cinder, glance)", true),
            ("app notin (cinder)", false),
            ("tier", true),
            ("!tier", false),
            ("!missing", true),
            ("app=cinder,tier in (api,volume)", true),
            ("app=cinder,tier=volume", false),
        ] {
            assert_eq!(
                LabelSelector::parse(sel).unwrap().matches(&o),
                want,
                "{sel}"
            );
        }
        assert!(LabelSelector::parse("a in b").is_err());
    }

    #[test]
    fn field_selector_paths() {
        let o = json!({"metadata": {"name": "a", "namespace": "ns"}, "spec": {"cinderRef": {"name": "c"}}, "status": {"phase": "Running"}});
        assert!(FieldSelector::parse("metadata.name=a").unwrap().matches(&o));
        assert!(
            FieldSelector::parse("spec.cinderRef.name==c,metadata.namespace=ns")
                .unwrap()
                .matches(&o)
        );
        assert!(
            !FieldSelector::parse("status.phase!=Running")
                .unwrap()
                .matches(&o)
        );
        assert!(FieldSelector::parse("garbage").is_err());
    }
}
