//! Discovery documents: /version, /api, /apis, /apis/{group}, /api/v1 and /apis/{group}/{version}
//! (APIResourceList with kinds, scope, verbs, short names, categories and subresources). The
//! aggregated (apidiscovery.k8s.io/v2) format is not served: clients get the legacy documents as
//! application/json and fall back to them, as they do with older servers.

use crate::registry::{Registry, ResourceInfo};
use serde_json::{Value, json};

const VERBS: &[&str] = &[
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "update",
    "watch",
];

pub fn version() -> Value {
    json!({
        "major": "1", "minor": "32",
        "gitVersion": "v1.32.0-cinder-sim",
        "gitCommit": "0000000000000000000000000000000000000000",
        "gitTreeState": "clean",
        "buildDate": "2026-01-01T00:00:00Z",
        "goVersion": "none (cinder-sim, Rust)",
        "compiler": "rustc",
        "platform": "linux/amd64"
    })
}

pub fn core_versions(address: &str) -> Value {
    json!({
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": address}]
    })
}

fn group_doc(name: &str, versions: &[String]) -> Value {
    let vs: Vec<Value> = versions
        .iter()
        .map(|v| json!({"groupVersion": format!("{name}/{v}"), "version": v}))
        .collect();
    json!({"name": name, "versions": vs, "preferredVersion": vs.first().cloned().unwrap_or(json!({}))})
}

pub fn groups(registry: &Registry) -> Value {
    let groups: Vec<Value> = registry
        .groups()
        .iter()
        .map(|(g, vs)| group_doc(g, vs))
        .collect();
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
}

pub fn group(registry: &Registry, name: &str) -> Option<Value> {
    registry
        .groups()
        .into_iter()
        .find(|(g, _)| g == name)
        .map(|(g, vs)| {
            let mut doc = group_doc(&g, &vs);
            doc["kind"] = json!("APIGroup");
            doc["apiVersion"] = json!("v1");
            doc
        })
}

fn resource_entries(r: &ResourceInfo) -> Vec<Value> {
    let mut main = json!({
        "name": r.resource,
        "singularName": r.singular,
        "namespaced": r.namespaced,
        "kind": r.kind,
        "verbs": VERBS,
    });
    if !r.short_names.is_empty() {
        main["shortNames"] = json!(r.short_names);
    }
    if !r.categories.is_empty() {
        main["categories"] = json!(r.categories);
    }
    let mut out = vec![main];
    if r.has_status {
        out.push(json!({"name": format!("{}/status", r.resource), "singularName": "", "namespaced": r.namespaced,
                        "kind": r.kind, "verbs": ["get", "patch", "update"]}));
    }
    if r.has_proxy {
        out.push(json!({"name": format!("{}/proxy", r.resource), "singularName": "", "namespaced": r.namespaced,
                        "kind": "ServiceProxyOptions", "verbs": ["create", "delete", "get", "patch", "update"]}));
    }
    out
}

/// The APIResourceList of `group/version`, None when nothing is served there.
pub fn resource_list(registry: &Registry, group: &str, version: &str) -> Option<Value> {
    let resources = registry.resources_in(group, version);
    if resources.is_empty() {
        return None;
    }
    let gv = if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    };
    let list: Vec<Value> = resources.iter().flat_map(|r| resource_entries(r)).collect();
    Some(
        json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": list}),
    )
}
