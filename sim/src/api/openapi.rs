//! The OpenAPI surface: the `/openapi/v3` index of served group-versions and, per
//! group-version, a document with PUT and PATCH operations per kind (tagged with
//! x-kubernetes-group-version-kind and the `fieldValidation` parameter, which is how kubectl
//! learns that the server validates fields itself) and the schemas of its kinds (built-ins from
//! `builtin_schemas`, CRDs' structural schemas) for `kubectl explain`; and `/openapi/v2`, the
//! aggregated v2 document with every kind's definition, which kubectl's client-side validation
//! reads (a kind missing from it is then reported by kubectl as "no matches for kind").

use super::builtin_schemas::{self, Schemas};
use crate::registry::{Registry, ResourceInfo};
use serde_json::{Map, Value, json};

fn gv_path(group: &str, version: &str) -> String {
    if group.is_empty() {
        format!("api/{version}")
    } else {
        format!("apis/{group}/{version}")
    }
}

/// The `/openapi/v3` index.
pub fn index(registry: &Registry, hash: u64) -> Value {
    let mut paths = Map::new();
    let mut seen = Vec::new();
    for r in registry.all() {
        for v in &r.versions {
            let p = gv_path(&r.group, v);
            if !seen.contains(&p) {
                paths.insert(
                    p.clone(),
                    json!({"serverRelativeURL": format!("/openapi/v3/{p}?hash={hash}")}),
                );
                seen.push(p);
            }
        }
    }
    json!({"paths": paths})
}

fn schema_name(r: &ResourceInfo, version: &str) -> String {
    let mut group: Vec<&str> = r.group.split('.').collect();
    group.reverse();
    let g = if r.group.is_empty() {
        "io.k8s.api.core".to_string()
    } else {
        group.join(".")
    };
    format!("{g}.{version}.{}", r.kind)
}

/// The document of one group-version (None when nothing is served there).
pub fn group_version(registry: &Registry, path: &str) -> Option<Value> {
    let segs: Vec<&str> = path.split('/').collect();
    let (group, version) = match segs.as_slice() {
        ["api", v] => ("", *v),
        ["apis", g, v] => (*g, *v),
        _ => return None,
    };
    let resources = registry.resources_in(group, version);
    if resources.is_empty() {
        return None;
    }
    let mut paths = Map::new();
    let mut schemas = Map::new();
    for r in &resources {
        let gvk = json!({"group": r.group, "version": version, "kind": r.kind});
        let prefix = if group.is_empty() {
            format!("/api/{version}")
        } else {
            format!("/apis/{group}/{version}")
        };
        let item = if r.namespaced {
            format!("{prefix}/namespaces/{{namespace}}/{}/{{name}}", r.resource)
        } else {
            format!("{prefix}/{}/{{name}}", r.resource)
        };
        let params: Vec<Value> = ["dryRun", "fieldManager", "fieldValidation", "force"]
            .iter()
            .map(|n| json!({"name": n, "in": "query", "schema": {"type": "string", "uniqueItems": true}}))
            .collect();
        let name = kind_name(r, version, &builtin_schemas::V3);
        let op = |verb: &str| {
            json!({
                "operationId": format!("{verb}{}", r.kind),
                "parameters": params,
                "responses": {"200": {"description": "OK", "content": {"application/json": {"schema": {"$ref": format!("#/components/schemas/{name}")}}}}},
                "x-kubernetes-action": verb,
                "x-kubernetes-group-version-kind": gvk,
            })
        };
        paths.insert(item, json!({"patch": op("patch"), "put": op("put")}));
        let (name, schema) = kind_schema(r, version, &builtin_schemas::V3, &mut schemas);
        schemas.insert(name, schema);
    }
    Some(json!({
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes (cinder-sim)", "version": "v1.32.0"},
        "paths": paths,
        "components": {"schemas": schemas}
    }))
}

/// The definition name of a kind: the upstream name of a built-in, else a reversed-group name.
fn kind_name(r: &ResourceInfo, version: &str, builtins: &Schemas) -> String {
    builtins
        .name_of(&r.group, version, &r.kind)
        .map(str::to_string)
        .unwrap_or_else(|| schema_name(r, version))
}

/// The schema of a kind (with its x-kubernetes-group-version-kind) and its name; the
/// definitions a built-in's schema refers to are added to `defs`.
fn kind_schema(
    r: &ResourceInfo,
    version: &str,
    builtins: &Schemas,
    defs: &mut Map<String, Value>,
) -> (String, Value) {
    let gvk = json!({"group": r.group, "version": version, "kind": r.kind});
    let name = kind_name(r, version, builtins);
    let mut schema = match (&r.crd, builtins.name_of(&r.group, version, &r.kind)) {
        (Some(crd), _) => crd.schemas.get(version).cloned(),
        (None, Some(builtin)) => {
            defs.extend(builtins.closure(&[builtin]));
            builtins.definitions.get(builtin).cloned()
        }
        (None, None) => None,
    }
    .unwrap_or_else(|| json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true}));
    if let Some(m) = schema.as_object_mut() {
        m.insert("x-kubernetes-group-version-kind".into(), json!([gvk]));
    }
    (name, schema)
}

/// A schema as OpenAPI v2 can say it: `nullable` becomes `x-nullable`, and the v3-only
/// keywords (anyOf, oneOf, not) are dropped, as a real server publishes CRD schemas in v2.
fn v2_schema(v: &Value) -> Value {
    match v {
        Value::Object(m) => {
            let mut out = Map::new();
            for (k, x) in m {
                match k.as_str() {
                    "anyOf" | "oneOf" | "not" => {}
                    "nullable" => {
                        out.insert("x-nullable".into(), x.clone());
                    }
                    _ => {
                        out.insert(k.clone(), v2_schema(x));
                    }
                }
            }
            Value::Object(out)
        }
        Value::Array(a) => Value::Array(a.iter().map(v2_schema).collect()),
        other => other.clone(),
    }
}

/// The `/openapi/v2` document: every served kind's definition and its write operations.
pub fn v2(registry: &Registry) -> Value {
    let builtins = &*builtin_schemas::V2;
    let mut definitions = Map::new();
    let mut paths = Map::new();
    for r in registry.all() {
        for version in &r.versions {
            let (name, schema) = kind_schema(&r, version, builtins, &mut definitions);
            definitions.insert(name.clone(), v2_schema(&schema));
            let prefix = if r.group.is_empty() {
                format!("/api/{version}")
            } else {
                format!("/apis/{}/{version}", r.group)
            };
            let item = if r.namespaced {
                format!("{prefix}/namespaces/{{namespace}}/{}/{{name}}", r.resource)
            } else {
                format!("{prefix}/{}/{{name}}", r.resource)
            };
            let gvk = json!({"group": r.group, "version": version, "kind": r.kind});
            let op = |verb: &str| {
                json!({
                    "operationId": format!("{verb}{}", r.kind),
                    "parameters": [{"name": "fieldValidation", "in": "query", "type": "string", "uniqueItems": true}],
                    "responses": {"200": {"description": "OK", "schema": {"$ref": format!("#/definitions/{name}")}}},
                    "x-kubernetes-action": verb,
                    "x-kubernetes-group-version-kind": gvk,
                })
            };
            paths.insert(item, json!({"patch": op("patch"), "put": op("put")}));
        }
    }
    json!({
        "swagger": "2.0",
        "info": {"title": "Kubernetes (cinder-sim)", "version": "v1.32.0"},
        "paths": paths,
        "definitions": definitions,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn v2_has_builtins_and_no_v3_keywords() {
        let doc = v2(&Registry::with_builtins());
        let defs = doc["definitions"].as_object().unwrap();
        let d = &defs["io.k8s.api.apps.v1.Deployment"];
        assert_eq!(
            d["x-kubernetes-group-version-kind"][0]["kind"],
            "Deployment"
        );
        assert!(defs.contains_key("io.k8s.api.core.v1.PodSpec"));
        assert_eq!(
            v2_schema(&json!({"nullable": true, "anyOf": [{}], "type": "string"})),
            json!({"x-nullable": true, "type": "string"})
        );
    }

    #[test]
    fn v3_group_document_has_builtin_schemas() {
        let doc = group_version(&Registry::with_builtins(), "apis/apps/v1").unwrap();
        let schemas = doc["components"]["schemas"].as_object().unwrap();
        assert!(schemas["io.k8s.api.apps.v1.Deployment"]["properties"]["spec"].is_object());
        assert!(schemas.contains_key("io.k8s.api.core.v1.PodTemplateSpec"));
    }
}
