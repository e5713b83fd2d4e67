//! A container's environment as the kubelet computes it: `envFrom` (with prefixes), then `env`
//! in order (`value` with `$(VAR)` expansion, `valueFrom` secretKeyRef, configMapKeyRef,
//! fieldRef, resourceFieldRef), and `$(VAR)` expansion of command and args. A missing reference
//! is the kubelet's CreateContainerConfigError message. Pure: the Secrets and ConfigMaps the
//! container names are fetched beforehand ([`references`]).

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use crate::controllers::pods::quantity;

/// The Secrets' and ConfigMaps' data a container's environment may read (values decoded).
#[derive(Clone, Debug, Default)]
pub struct Sources {
    pub secrets: BTreeMap<String, BTreeMap<String, String>>,
    pub config_maps: BTreeMap<String, BTreeMap<String, String>>,
}

/// What fieldRef and resourceFieldRef read besides the pod.
#[derive(Clone, Debug, Default)]
pub struct PodFacts {
    pub pod_ip: String,
    pub host_ip: String,
    /// The node's allocatable cpu (cores) and memory (bytes): a limit's value when none is set.
    pub node_cpu: f64,
    pub node_memory: f64,
}

/// The Secret and ConfigMap names `container` refers to from env and envFrom.
pub fn references(container: &Value) -> (BTreeSet<String>, BTreeSet<String>) {
    let mut secrets = BTreeSet::new();
    let mut maps = BTreeSet::new();
    for source in array(container, "envFrom") {
        if let Some(name) = source.pointer("/secretRef/name").and_then(Value::as_str) {
            secrets.insert(name.to_owned());
        }
        if let Some(name) = source.pointer("/configMapRef/name").and_then(Value::as_str) {
            maps.insert(name.to_owned());
        }
    }
    for var in array(container, "env") {
        if let Some(name) = var
            .pointer("/valueFrom/secretKeyRef/name")
            .and_then(Value::as_str)
        {
            secrets.insert(name.to_owned());
        }
        if let Some(name) = var
            .pointer("/valueFrom/configMapKeyRef/name")
            .and_then(Value::as_str)
        {
            maps.insert(name.to_owned());
        }
    }
    (secrets, maps)
}

fn array<'a>(value: &'a Value, key: &str) -> &'a [Value] {
    value
        .get(key)
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

/// The environment of `container` of `pod`, in order, or the CreateContainerConfigError message.
pub fn resolve(
    pod: &Value,
    container: &Value,
    sources: &Sources,
    facts: &PodFacts,
) -> Result<Vec<(String, String)>, String> {
    let namespace = pod
        .pointer("/metadata/namespace")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let mut env: Vec<(String, String)> = Vec::new();
    let set = |env: &mut Vec<(String, String)>, name: String, value: String| match env
        .iter_mut()
        .find(|(n, _)| *n == name)
    {
        Some(entry) => entry.1 = value,
        None => env.push((name, value)),
    };
    for source in array(container, "envFrom") {
        let prefix = source["prefix"].as_str().unwrap_or_default();
        let (data, kind, reference) = if let Some(r) = source.get("secretRef") {
            (
                r["name"].as_str().and_then(|n| sources.secrets.get(n)),
                "secret",
                r,
            )
        } else if let Some(r) = source.get("configMapRef") {
            (
                r["name"].as_str().and_then(|n| sources.config_maps.get(n)),
                "configmap",
                r,
            )
        } else {
            continue;
        };
        match data {
            Some(data) => {
                for (key, value) in data {
                    set(&mut env, format!("{prefix}{key}"), value.clone());
                }
            }
            None if reference["optional"] == true => {}
            None => {
                return Err(format!(
                    "{kind} \"{}\" not found",
                    reference["name"].as_str().unwrap_or_default()
                ));
            }
        }
    }
    for var in array(container, "env") {
        let Some(name) = var["name"].as_str() else {
            continue;
        };
        let value = match var.get("valueFrom") {
            None => {
                let raw = var["value"].as_str().unwrap_or_default();
                Some(expand(raw, |n| {
                    env.iter().find(|(k, _)| k == n).map(|(_, v)| v.clone())
                }))
            }
            Some(from) => value_from(pod, container, from, namespace, sources, facts)?,
        };
        if let Some(value) = value {
            set(&mut env, name.to_owned(), value);
        }
    }
    Ok(env)
}

fn value_from(
    pod: &Value,
    container: &Value,
    from: &Value,
    namespace: &str,
    sources: &Sources,
    facts: &PodFacts,
) -> Result<Option<String>, String> {
    let keyed = |reference: &Value,
                 data: Option<&BTreeMap<String, String>>,
                 kind: &str,
                 kind_title: &str|
     -> Result<Option<String>, String> {
        let name = reference["name"].as_str().unwrap_or_default();
        let key = reference["key"].as_str().unwrap_or_default();
        let optional = reference["optional"] == true;
        match data {
            None if optional => Ok(None),
            None => Err(format!("{kind} \"{name}\" not found")),
            Some(data) => match data.get(key) {
                Some(value) => Ok(Some(value.clone())),
                None if optional => Ok(None),
                None => Err(format!(
                    "couldn't find key {key} in {kind_title} {namespace}/{name}"
                )),
            },
        }
    };
    if let Some(r) = from.get("secretKeyRef") {
        let data = r["name"].as_str().and_then(|n| sources.secrets.get(n));
        return keyed(r, data, "secret", "Secret");
    }
    if let Some(r) = from.get("configMapKeyRef") {
        let data = r["name"].as_str().and_then(|n| sources.config_maps.get(n));
        return keyed(r, data, "configmap", "ConfigMap");
    }
    if let Some(r) = from.get("fieldRef") {
        let path = r["fieldPath"].as_str().unwrap_or_default();
        return field_ref(pod, path, facts).map(Some);
    }
    if let Some(r) = from.get("resourceFieldRef") {
        return resource_field_ref(container, r, facts).map(Some);
    }
    Ok(None)
}

/// The value of a downward-API `fieldPath` (env and downwardAPI volumes).
pub fn field_ref(pod: &Value, path: &str, facts: &PodFacts) -> Result<String, String> {
    let text = |pointer: &str| {
        pod.pointer(pointer)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned()
    };
    let keyed = |map: &str, rest: &str| -> Option<String> {
        let key = rest.strip_prefix("['")?.strip_suffix("']")?;
        Some(
            pod.pointer(&format!("/metadata/{map}"))
                .and_then(|m| m.get(key))
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned(),
        )
    };
    let map_text = |map: &str| {
        let mut lines: Vec<String> = pod
            .pointer(&format!("/metadata/{map}"))
            .and_then(Value::as_object)
            .map(|m| {
                m.iter()
                    .map(|(k, v)| format!("{k}=\"{}\"", v.as_str().unwrap_or_default()))
                    .collect()
            })
            .unwrap_or_default();
        lines.sort();
        lines.join("\n")
    };
    Ok(match path {
        "metadata.name" => text("/metadata/name"),
        "metadata.namespace" => text("/metadata/namespace"),
        "metadata.uid" => text("/metadata/uid"),
        "metadata.labels" => map_text("labels"),
        "metadata.annotations" => map_text("annotations"),
        "spec.nodeName" => text("/spec/nodeName"),
        "spec.serviceAccountName" => text("/spec/serviceAccountName"),
        "status.hostIP" | "status.hostIPs" => facts.host_ip.clone(),
        "status.podIP" | "status.podIPs" => facts.pod_ip.clone(),
        other => {
            if let Some(value) = other
                .strip_prefix("metadata.labels")
                .and_then(|rest| keyed("labels", rest))
                .or_else(|| {
                    other
                        .strip_prefix("metadata.annotations")
                        .and_then(|rest| keyed("annotations", rest))
                })
            {
                value
            } else {
                return Err(format!("unsupported fieldPath: {other}"));
            }
        }
    })
}

/// The value of a `resourceFieldRef` for `container`: the limit (the node's allocatable when
/// unset) or request, divided by the divisor and rounded up, as the kubelet does.
pub fn resource_field_ref(
    container: &Value,
    reference: &Value,
    facts: &PodFacts,
) -> Result<String, String> {
    let resource = reference["resource"].as_str().unwrap_or_default();
    let (kind, what) = resource
        .split_once('.')
        .ok_or_else(|| format!("unsupported container resource: {resource}"))?;
    if !matches!(kind, "limits" | "requests") || !matches!(what, "cpu" | "memory") {
        return Err(format!("unsupported container resource: {resource}"));
    }
    let read = |kind: &str| {
        container
            .pointer(&format!("/resources/{kind}/{what}"))
            .and_then(Value::as_str)
            .and_then(quantity::parse)
    };
    let node = if what == "cpu" {
        facts.node_cpu
    } else {
        facts.node_memory
    };
    let amount = match kind {
        "limits" => read("limits").unwrap_or(node),
        _ => read("requests").or_else(|| read("limits")).unwrap_or(0.0),
    };
    let divisor = match &reference["divisor"] {
        Value::String(text) => quantity::parse(text).filter(|d| *d > 0.0).unwrap_or(1.0),
        Value::Number(n) => n.as_f64().filter(|d| *d > 0.0).unwrap_or(1.0),
        _ => 1.0,
    };
    Ok(format!("{}", (amount / divisor).ceil() as i64))
}

/// Kubernetes' `$(VAR)` expansion: a defined `$(NAME)` is replaced, `$$` is a literal `$`, and
/// anything else (an undefined name, an unterminated reference) is left as written.
pub fn expand(input: &str, lookup: impl Fn(&str) -> Option<String>) -> String {
    let mut out = String::with_capacity(input.len());
    let mut rest = input;
    while let Some(i) = rest.find('$') {
        out.push_str(&rest[..i]);
        let after = &rest[i + 1..];
        if let Some(tail) = after.strip_prefix('$') {
            out.push('$');
            rest = tail;
        } else if let Some(body) = after.strip_prefix('(') {
            match body.find(')') {
                Some(end) => {
                    let name = &body[..end];
                    match lookup(name) {
                        Some(value) => out.push_str(&value),
                        None => {
                            out.push_str("$(");
                            out.push_str(name);
                            out.push(')');
                        }
                    }
                    rest = &body[end + 1..];
                }
                None => {
                    out.push_str("$(");
                    rest = body;
                }
            }
        } else {
            out.push('$');
            rest = after;
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod() -> Value {
        json!({"metadata": {"name": "p", "namespace": "ns", "uid": "u1", "labels": {"app": "a"}},
               "spec": {"nodeName": "n1", "serviceAccountName": "sa"}})
    }

    fn sources() -> Sources {
        let mut s = Sources::default();
        s.secrets.insert(
            "db".into(),
            [("password".to_owned(), "pw".to_owned())].into(),
        );
        s.config_maps.insert(
            "cfg".into(),
            [
                ("mode".to_owned(), "fast".to_owned()),
                ("x".to_owned(), "1".to_owned()),
            ]
            .into(),
        );
        s
    }

    #[test]
    fn env_from_then_env_with_expansion_and_references() {
        let container = json!({
            "envFrom": [{"configMapRef": {"name": "cfg"}, "prefix": "C_"}],
            "env": [
                {"name": "A", "value": "1"},
                {"name": "B", "value": "$(A)-$(C_mode)-$(NOPE)-$$(A)"},
                {"name": "PW", "valueFrom": {"secretKeyRef": {"name": "db", "key": "password"}}},
                {"name": "NODE", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
                {"name": "APP", "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels['app']"}}},
                {"name": "IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
                {"name": "MEM", "valueFrom": {"resourceFieldRef": {"resource": "limits.memory", "divisor": "1Mi"}}},
                {"name": "OPT", "valueFrom": {"secretKeyRef": {"name": "gone", "key": "k", "optional": true}}},
                {"name": "C_x", "value": "override"},
            ],
            "resources": {"limits": {"memory": "64Mi"}},
        });
        let facts = PodFacts {
            pod_ip: "10.200.1.2".into(),
            ..PodFacts::default()
        };
        let env = resolve(&pod(), &container, &sources(), &facts).unwrap();
        let get = |n: &str| env.iter().find(|(k, _)| k == n).map(|(_, v)| v.as_str());
        assert_eq!(get("B"), Some("1-fast-$(NOPE)-$(A)"));
        assert_eq!(get("PW"), Some("pw"));
        assert_eq!(get("NODE"), Some("n1"));
        assert_eq!(get("APP"), Some("a"));
        assert_eq!(get("IP"), Some("10.200.1.2"));
        assert_eq!(get("MEM"), Some("64"));
        assert_eq!(get("OPT"), None);
        assert_eq!(get("C_x"), Some("override"));
        assert_eq!(env[0].0, "C_mode");
    }

    #[test]
    fn missing_references_give_the_kubelet_messages() {
        let facts = PodFacts::default();
        let missing =
            |env: Value| resolve(&pod(), &json!({"env": env}), &sources(), &facts).unwrap_err();
        assert_eq!(
            missing(
                json!([{"name": "X", "valueFrom": {"secretKeyRef": {"name": "nope", "key": "k"}}}])
            ),
            "secret \"nope\" not found"
        );
        assert_eq!(
            missing(
                json!([{"name": "X", "valueFrom": {"secretKeyRef": {"name": "db", "key": "user"}}}])
            ),
            "couldn't find key user in Secret ns/db"
        );
        assert_eq!(
            missing(
                json!([{"name": "X", "valueFrom": {"configMapKeyRef": {"name": "cfg", "key": "k"}}}])
            ),
            "couldn't find key k in ConfigMap ns/cfg"
        );
        let from = json!({"envFrom": [{"configMapRef": {"name": "none"}}]});
        assert_eq!(
            resolve(&pod(), &from, &sources(), &facts).unwrap_err(),
            "configmap \"none\" not found"
        );
    }

    #[test]
    fn expansion_rules() {
        let lookup = |n: &str| (n == "A").then(|| "x".to_owned());
        assert_eq!(expand("$(A)$(A)", lookup), "xx");
        assert_eq!(expand("$$A $(A", lookup), "$A $(A");
        assert_eq!(expand("cost $5", lookup), "cost $5");
        let (secrets, maps) = references(&json!({"envFrom": [{"secretRef": {"name": "s"}}],
            "env": [{"name": "a", "valueFrom": {"configMapKeyRef": {"name": "m", "key": "k"}}}]}));
        assert!(secrets.contains("s") && maps.contains("m"));
    }
}
