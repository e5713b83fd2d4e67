//! The APIService objects a real API server keeps for the group versions it serves itself
//! (`kube-aggregator.kubernetes.io/automanaged: onstart`) and for each custom resource group
//! version (`automanaged: "true"`, written when a CRD serves it, removed when none does), both
//! written by `kube-apiserver` and `Local`: always Available. Pure: the objects and where they
//! are stored.

use super::meta;
use crate::registry::Registry;
use crate::store::{ObjKey, Txn};
use serde_json::{Value, json};

const GROUP: &str = "apiregistration.k8s.io";
const RESOURCE: &str = "apiservices";
const AUTOMANAGED: &str = "kube-aggregator.kubernetes.io/automanaged";

/// `groupPriorityMinimum` and `versionPriority` of the built-in group versions, as
/// kube-apiserver v1.37.2 lists them (`kubectl get apiservices`).
const PRIORITIES: &[(&str, &str, u32, u32)] = &[
    ("", "v1", 18000, 1),
    ("admissionregistration.k8s.io", "v1", 16700, 15),
    ("apiextensions.k8s.io", "v1", 16700, 15),
    ("apps", "v1", 17800, 15),
    ("authentication.k8s.io", "v1", 17700, 15),
    ("authorization.k8s.io", "v1", 17600, 15),
    ("autoscaling", "v1", 17500, 15),
    ("autoscaling", "v2", 17500, 30),
    ("batch", "v1", 17400, 15),
    ("certificates.k8s.io", "v1", 17300, 15),
    ("coordination.k8s.io", "v1", 16500, 15),
    ("discovery.k8s.io", "v1", 16200, 15),
    ("events.k8s.io", "v1", 17750, 15),
    ("flowcontrol.apiserver.k8s.io", "v1", 16100, 21),
    ("networking.k8s.io", "v1", 17200, 15),
    ("node.k8s.io", "v1", 16300, 15),
    ("policy", "v1", 17100, 15),
    ("rbac.authorization.k8s.io", "v1", 17000, 15),
    ("resource.k8s.io", "v1", 16200, 21),
    ("scheduling.k8s.io", "v1", 16600, 15),
    ("storage.k8s.io", "v1", 16800, 15),
    ("storagemigration.k8s.io", "v1", 15800, 15),
];

/// What a custom resource group version gets.
const CUSTOM_PRIORITIES: (u32, u32) = (1000, 100);

/// The APIService name of `group/version` (`v1.apps`, `v1.` for the core group).
pub fn name(group: &str, version: &str) -> String {
    format!("{version}.{group}")
}

fn key(group: &str, version: &str) -> ObjKey {
    ObjKey::new(GROUP, RESOURCE, "", &name(group, version))
}

/// The APIService of `group/version`; `automanaged` is `onstart` or `true`.
pub fn object(group: &str, version: &str, automanaged: &str) -> Value {
    let (group_minimum, version_priority) = PRIORITIES
        .iter()
        .find(|(g, v, _, _)| *g == group && *v == version)
        .map(|(_, _, g, v)| (*g, *v))
        .unwrap_or(CUSTOM_PRIORITIES);
    let now = meta::now();
    let mut spec = json!({
        "version": version,
        "groupPriorityMinimum": group_minimum,
        "versionPriority": version_priority,
    });
    let mut spec_fields =
        json!({"f:groupPriorityMinimum": {}, "f:version": {}, "f:versionPriority": {}});
    if !group.is_empty() {
        spec["group"] = json!(group);
        spec_fields["f:group"] = json!({});
    }
    json!({
        "apiVersion": format!("{GROUP}/v1"),
        "kind": "APIService",
        "metadata": {
            "name": name(group, version),
            "uid": uuid::Uuid::new_v4().to_string(),
            "creationTimestamp": now,
            "labels": {AUTOMANAGED: automanaged},
            "managedFields": [{
                "manager": "kube-apiserver",
                "operation": "Update",
                "apiVersion": format!("{GROUP}/v1"),
                "time": now,
                "fieldsType": "FieldsV1",
                "fieldsV1": {
                    "f:metadata": {"f:labels": {".": {}, format!("f:{AUTOMANAGED}"): {}}},
                    "f:spec": spec_fields,
                },
            }],
        },
        "spec": spec,
        "status": {"conditions": [{
            "type": "Available", "status": "True", "reason": "Local",
            "message": "Local APIServices are always available",
            "lastTransitionTime": now,
        }]},
    })
}

/// Stores the APIServices of every group version the registry serves (at start).
pub fn put_local(txn: &mut Txn<'_>, registry: &Registry) {
    for (group, versions) in registry.groups() {
        for version in versions {
            txn.put(key(&group, &version), object(&group, &version, "onstart"));
        }
    }
}

/// Stores the APIService of each version a CRD serves (unless there is one).
pub fn put_custom(txn: &mut Txn<'_>, group: &str, versions: &[String]) {
    for version in versions {
        let key = key(group, version);
        if txn.get(&key).is_none() {
            txn.put(key, object(group, version, "true"));
        }
    }
}

/// Removes the APIServices of `group` that no registered resource serves any more.
pub fn remove_unserved(txn: &mut Txn<'_>, registry: &Registry, group: &str, versions: &[String]) {
    for version in versions {
        if !registry.serves_group_version(group, version) {
            txn.remove(&key(group, version));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn built_in_and_custom_group_versions() {
        let apps = object("apps", "v1", "onstart");
        assert_eq!(apps["metadata"]["name"], "v1.apps");
        assert_eq!(apps["spec"]["groupPriorityMinimum"], 17800);
        assert_eq!(apps["status"]["conditions"][0]["reason"], "Local");
        let core = object("", "v1", "onstart");
        assert_eq!(core["metadata"]["name"], "v1.");
        assert!(core["spec"].get("group").is_none());
        let custom = object("cinder.openstack.c5c3.io", "v1alpha1", "true");
        assert_eq!(custom["spec"]["versionPriority"], 100);
    }
}
