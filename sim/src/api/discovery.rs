//! Discovery documents: /version, /api, /apis, /apis/{group}, /api/v1 and /apis/{group}/{version}
//! (APIResourceList with kinds, scope, verbs, short names, categories and subresources), and the
//! aggregated form of `/api` and `/apis` (`apidiscovery.k8s.io/v2` APIGroupDiscoveryList) for
//! clients that ask for it in their Accept header, as kubectl and kube-rs do first.

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
    for sub in r.extra_subresources() {
        let mut entry = json!({"name": format!("{}/{}", r.resource, sub.name), "singularName": "",
                               "namespaced": r.namespaced, "kind": sub.kind, "verbs": sub.verbs});
        if !sub.group.is_empty() {
            entry["group"] = json!(sub.group);
            entry["version"] = json!(sub.version);
        }
        out.push(entry);
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

/// The content type of an aggregated discovery answer.
pub const AGGREGATED_CONTENT_TYPE: &str =
    "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";

/// Whether the Accept header asks for aggregated discovery (v2) before anything else it lists.
pub fn wants_aggregated(accept: &str) -> bool {
    accept.split(',').next().is_some_and(|first| {
        let params: Vec<String> = first
            .split(';')
            .map(|p| p.trim().replace(' ', ""))
            .collect();
        params.iter().any(|p| p == "as=APIGroupDiscoveryList")
            && params.iter().any(|p| p == "v=v2")
            && params.iter().any(|p| p == "g=apidiscovery.k8s.io")
    })
}

fn scope(r: &ResourceInfo) -> &'static str {
    if r.namespaced {
        "Namespaced"
    } else {
        "Cluster"
    }
}

fn aggregated_resource(r: &ResourceInfo, version: &str) -> Value {
    let kind = json!({"group": r.group, "version": version, "kind": r.kind});
    let mut doc = json!({
        "resource": r.resource,
        "responseKind": kind,
        "scope": scope(r),
        "singularResource": r.singular,
        "verbs": VERBS,
    });
    if !r.short_names.is_empty() {
        doc["shortNames"] = json!(r.short_names);
    }
    if !r.categories.is_empty() {
        doc["categories"] = json!(r.categories);
    }
    let mut subs = Vec::new();
    if r.has_status {
        subs.push(json!({"subresource": "status", "responseKind": kind, "verbs": ["get", "patch", "update"]}));
    }
    if r.has_proxy {
        subs.push(json!({"subresource": "proxy", "responseKind": {"group": "", "version": "", "kind": "ServiceProxyOptions"},
                         "verbs": ["create", "delete", "get", "patch", "update"]}));
    }
    for sub in r.extra_subresources() {
        subs.push(json!({"subresource": sub.name,
                         "responseKind": {"group": sub.group, "version": sub.version, "kind": sub.kind},
                         "verbs": sub.verbs}));
    }
    if !subs.is_empty() {
        doc["subresources"] = Value::Array(subs);
    }
    doc
}

fn aggregated_group(registry: &Registry, group: &str, versions: &[String]) -> Value {
    let versions: Vec<Value> = versions
        .iter()
        .map(|v| {
            let resources: Vec<Value> = registry
                .resources_in(group, v)
                .iter()
                .map(|r| aggregated_resource(r, v))
                .collect();
            json!({"version": v, "resources": resources, "freshness": "Current"})
        })
        .collect();
    let metadata = if group.is_empty() {
        json!({"creationTimestamp": null})
    } else {
        json!({"name": group, "creationTimestamp": null})
    };
    json!({"metadata": metadata, "versions": versions})
}

/// The aggregated discovery document of `/api` (`core` true) or `/apis`.
pub fn aggregated(registry: &Registry, core: bool) -> Value {
    let items: Vec<Value> = if core {
        vec![aggregated_group(registry, "", &["v1".to_string()])]
    } else {
        registry
            .groups()
            .iter()
            .map(|(g, vs)| aggregated_group(registry, g, vs))
            .collect()
    };
    json!({"kind": "APIGroupDiscoveryList", "apiVersion": "apidiscovery.k8s.io/v2", "metadata": {}, "items": items})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aggregated_accept_headers() {
        assert!(wants_aggregated(AGGREGATED_CONTENT_TYPE));
        assert!(wants_aggregated(
            "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json"
        ));
        assert!(!wants_aggregated("application/json"));
        assert!(!wants_aggregated(
            "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList"
        ));
    }

    #[test]
    fn aggregated_documents() {
        let r = Registry::with_builtins();
        let core = aggregated(&r, true);
        let resources = core["items"][0]["versions"][0]["resources"]
            .as_array()
            .unwrap();
        let pods = resources.iter().find(|x| x["resource"] == "pods").unwrap();
        assert_eq!(pods["responseKind"]["kind"], "Pod");
        assert_eq!(pods["scope"], "Namespaced");
        assert_eq!(pods["subresources"][0]["subresource"], "status");
        let groups = aggregated(&r, false);
        let apps = groups["items"]
            .as_array()
            .unwrap()
            .iter()
            .find(|g| g["metadata"]["name"] == "apps")
            .unwrap();
        assert_eq!(apps["versions"][0]["version"], "v1");
    }
}
