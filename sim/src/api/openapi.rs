//! A minimal OpenAPI v3 surface: the `/openapi/v3` index of served group-versions and, per
//! group-version, a document with one PATCH operation per kind (tagged with
//! x-kubernetes-group-version-kind and the `fieldValidation` parameter, which is how kubectl
//! learns that the server validates fields itself) and the CRD schemas (for `kubectl explain`).
//! Built-in kinds get no schema; `/openapi/v2` is not served.

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
        let name = schema_name(r, version);
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
        let mut schema = r
            .crd
            .as_ref()
            .and_then(|c| c.schemas.get(version).cloned())
            .unwrap_or_else(
                || json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true}),
            );
        if let Some(m) = schema.as_object_mut() {
            m.insert("x-kubernetes-group-version-kind".into(), json!([gvk]));
        }
        schemas.insert(name, schema);
    }
    Some(json!({
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes (cinder-sim)", "version": "v1.32.0"},
        "paths": paths,
        "components": {"schemas": schemas}
    }))
}
