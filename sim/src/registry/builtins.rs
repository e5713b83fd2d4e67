//! The built-in kinds the embedded cluster serves (stored without schema validation).

use super::ResourceInfo;

struct B {
    group: &'static str,
    version: &'static str,
    resource: &'static str,
    kind: &'static str,
    namespaced: bool,
    short: &'static [&'static str],
    all_category: bool,
    status: bool,
}

const BUILTINS: &[B] = &[
    B { group: "", version: "v1", resource: "namespaces", kind: "Namespace", namespaced: false, short: &["ns"], all_category: false, status: true },
    B { group: "", version: "v1", resource: "secrets", kind: "Secret", namespaced: true, short: &[], all_category: false, status: false },
    B { group: "", version: "v1", resource: "configmaps", kind: "ConfigMap", namespaced: true, short: &["cm"], all_category: false, status: false },
    B { group: "", version: "v1", resource: "services", kind: "Service", namespaced: true, short: &["svc"], all_category: true, status: true },
    B { group: "", version: "v1", resource: "pods", kind: "Pod", namespaced: true, short: &["po"], all_category: true, status: true },
    B { group: "", version: "v1", resource: "events", kind: "Event", namespaced: true, short: &["ev"], all_category: false, status: false },
    B { group: "", version: "v1", resource: "serviceaccounts", kind: "ServiceAccount", namespaced: true, short: &["sa"], all_category: false, status: false },
    B { group: "", version: "v1", resource: "persistentvolumeclaims", kind: "PersistentVolumeClaim", namespaced: true, short: &["pvc"], all_category: false, status: true },
    B { group: "apps", version: "v1", resource: "deployments", kind: "Deployment", namespaced: true, short: &["deploy"], all_category: true, status: true },
    B { group: "apps", version: "v1", resource: "replicasets", kind: "ReplicaSet", namespaced: true, short: &["rs"], all_category: true, status: true },
    B { group: "apps", version: "v1", resource: "statefulsets", kind: "StatefulSet", namespaced: true, short: &["sts"], all_category: true, status: true },
    B { group: "batch", version: "v1", resource: "jobs", kind: "Job", namespaced: true, short: &[], all_category: true, status: true },
    B { group: "batch", version: "v1", resource: "cronjobs", kind: "CronJob", namespaced: true, short: &["cj"], all_category: true, status: true },
    B { group: "policy", version: "v1", resource: "poddisruptionbudgets", kind: "PodDisruptionBudget", namespaced: true, short: &["pdb"], all_category: false, status: true },
    B { group: "autoscaling", version: "v2", resource: "horizontalpodautoscalers", kind: "HorizontalPodAutoscaler", namespaced: true, short: &["hpa"], all_category: true, status: true },
    B { group: "networking.k8s.io", version: "v1", resource: "networkpolicies", kind: "NetworkPolicy", namespaced: true, short: &["netpol"], all_category: false, status: false },
    B { group: "coordination.k8s.io", version: "v1", resource: "leases", kind: "Lease", namespaced: true, short: &[], all_category: false, status: false },
    B { group: "apiextensions.k8s.io", version: "v1", resource: "customresourcedefinitions", kind: "CustomResourceDefinition", namespaced: false, short: &["crd", "crds"], all_category: false, status: true },
    B { group: "events.k8s.io", version: "v1", resource: "events", kind: "Event", namespaced: true, short: &["ev"], all_category: false, status: false },
    B { group: "rbac.authorization.k8s.io", version: "v1", resource: "roles", kind: "Role", namespaced: true, short: &[], all_category: false, status: false },
    B { group: "rbac.authorization.k8s.io", version: "v1", resource: "rolebindings", kind: "RoleBinding", namespaced: true, short: &[], all_category: false, status: false },
    B { group: "rbac.authorization.k8s.io", version: "v1", resource: "clusterroles", kind: "ClusterRole", namespaced: false, short: &[], all_category: false, status: false },
    B { group: "rbac.authorization.k8s.io", version: "v1", resource: "clusterrolebindings", kind: "ClusterRoleBinding", namespaced: false, short: &[], all_category: false, status: false },
];

/// The built-in resources, in discovery order.
pub fn all() -> Vec<ResourceInfo> {
    BUILTINS
        .iter()
        .map(|b| ResourceInfo {
            group: b.group.to_string(),
            versions: vec![b.version.to_string()],
            resource: b.resource.to_string(),
            kind: b.kind.to_string(),
            singular: b.kind.to_lowercase(),
            list_kind: format!("{}List", b.kind),
            namespaced: b.namespaced,
            short_names: b.short.iter().map(|s| s.to_string()).collect(),
            categories: if b.all_category { vec!["all".to_string()] } else { Vec::new() },
            has_status: b.status,
            has_proxy: b.resource == "services" && b.group.is_empty(),
            crd: None,
        })
        .collect()
}
