//! What the registry knows of one served resource: its discovery facts and, for a CRD, the
//! schemas and printer columns per version.

use serde_json::Value;
use std::collections::HashMap;

/// One served resource (e.g. `apps/v1 deployments`).
#[derive(Clone, Debug)]
pub struct ResourceInfo {
    /// API group; empty for the core group.
    pub group: String,
    /// Served versions, the preferred (storage) one first.
    pub versions: Vec<String>,
    pub resource: String,
    pub kind: String,
    pub singular: String,
    pub list_kind: String,
    pub namespaced: bool,
    pub short_names: Vec<String>,
    pub categories: Vec<String>,
    /// Whether `/status` is a subresource (status changes only through it).
    pub has_status: bool,
    /// Whether `/proxy` is a subresource (Services).
    pub has_proxy: bool,
    /// CRD facts: schema and printer columns per version.
    pub crd: Option<CrdFacts>,
}

/// What a CustomResourceDefinition adds to its resource.
#[derive(Clone, Debug, Default)]
pub struct CrdFacts {
    pub schemas: HashMap<String, Value>,
    pub columns: HashMap<String, Vec<PrinterColumn>>,
    /// The field labels of `selectableFields` per version (`spec.color` for `.spec.color`).
    pub selectable_fields: HashMap<String, Vec<String>>,
}

/// A subresource beyond status and proxy that a built-in kind serves (`pods/log`, ...).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ExtraSubresource {
    pub name: &'static str,
    /// The group, version and kind of its request or answer body.
    pub group: &'static str,
    pub version: &'static str,
    pub kind: &'static str,
    pub verbs: &'static [&'static str],
}

const POD_SUBRESOURCES: &[ExtraSubresource] = &[
    ExtraSubresource {
        name: "binding",
        group: "",
        version: "v1",
        kind: "Binding",
        verbs: &["create"],
    },
    ExtraSubresource {
        name: "eviction",
        group: "policy",
        version: "v1",
        kind: "Eviction",
        verbs: &["create"],
    },
    ExtraSubresource {
        name: "log",
        group: "",
        version: "v1",
        kind: "Pod",
        verbs: &["get"],
    },
];

impl ResourceInfo {
    /// The subresources served besides status and proxy (for discovery).
    pub fn extra_subresources(&self) -> &'static [ExtraSubresource] {
        if self.is("", "pods") {
            POD_SUBRESOURCES
        } else {
            &[]
        }
    }

    pub fn preferred_version(&self) -> &str {
        self.versions.first().map(String::as_str).unwrap_or("v1")
    }

    pub fn api_version(&self, version: &str) -> String {
        if self.group.is_empty() {
            version.to_string()
        } else {
            format!("{}/{version}", self.group)
        }
    }

    pub fn serves(&self, version: &str) -> bool {
        self.versions.iter().any(|v| v == version)
    }

    pub fn is(&self, group: &str, resource: &str) -> bool {
        self.group == group && self.resource == resource
    }

    /// Whether a field selector may name `label` for this resource at `version`: the metadata
    /// fields every kind has, the fields a built-in kind adds (its strategy's field set), a
    /// custom resource's `selectableFields`. Anything else a real server refuses with 400
    /// `field label not supported`.
    pub fn supports_field_label(&self, version: &str, label: &str) -> bool {
        if label == "metadata.name" || (self.namespaced && label == "metadata.namespace") {
            return true;
        }
        match &self.crd {
            Some(facts) => facts
                .selectable_fields
                .get(version)
                .is_some_and(|fields| fields.iter().any(|f| f == label)),
            None => BUILTIN_FIELD_LABELS
                .iter()
                .find(|(group, resource, _)| self.is(group, resource))
                .is_some_and(|(_, _, labels)| labels.contains(&label)),
        }
    }

    /// Whether a DELETE that removes the object at once answers with the object (custom
    /// resources and the registries that set `ReturnDeletedObject`: Pods, Services,
    /// PersistentVolumes and their claims, Namespaces) rather than a Success Status.
    pub fn returns_deleted_object(&self) -> bool {
        self.crd.is_some()
            || (self.group.is_empty()
                && matches!(
                    self.resource.as_str(),
                    "pods"
                        | "services"
                        | "persistentvolumes"
                        | "persistentvolumeclaims"
                        | "namespaces"
                ))
    }

    /// Whether the server keeps `metadata.generation` for this kind: custom resources and the
    /// built-in kinds whose strategy sets it at creation and bumps it on a spec change (a real
    /// API server gives ConfigMaps, Secrets, Services, Namespaces, Leases, RBAC and the like
    /// none).
    pub fn tracks_generation(&self) -> bool {
        self.crd.is_some()
            || GENERATION_KINDS.contains(&(self.group.as_str(), self.resource.as_str()))
    }
}

/// The field labels built-in kinds add to `metadata.name` and `metadata.namespace`
/// (kube-apiserver v1.37.2's `GetAttrs` of each strategy).
const BUILTIN_FIELD_LABELS: &[(&str, &str, &[&str])] = &[
    (
        "",
        "pods",
        &[
            "spec.nodeName",
            "spec.restartPolicy",
            "spec.schedulerName",
            "spec.serviceAccountName",
            "spec.hostNetwork",
            "status.phase",
            "status.podIP",
            "status.podIPs",
            "status.nominatedNodeName",
        ],
    ),
    ("", "events", EVENT_FIELD_LABELS),
    ("events.k8s.io", "events", EVENT_FIELD_LABELS),
    ("", "secrets", &["type"]),
    ("", "namespaces", &["status.phase"]),
    ("", "nodes", &["spec.unschedulable"]),
    ("", "replicationcontrollers", &["status.replicas"]),
    ("", "services", &["spec.clusterIP", "spec.type"]),
    ("", "persistentvolumeclaims", &[]),
    ("apps", "replicasets", &["status.replicas"]),
    ("batch", "jobs", &["status.successful"]),
    (
        "certificates.k8s.io",
        "certificatesigningrequests",
        &["spec.signerName"],
    ),
];

const EVENT_FIELD_LABELS: &[&str] = &[
    "involvedObject.kind",
    "involvedObject.namespace",
    "involvedObject.name",
    "involvedObject.uid",
    "involvedObject.apiVersion",
    "involvedObject.resourceVersion",
    "involvedObject.fieldPath",
    "reason",
    "reportingComponent",
    "source",
    "type",
];

/// The built-in kinds with `metadata.generation` (seen on kube-apiserver v1.37.2).
const GENERATION_KINDS: &[(&str, &str)] = &[
    ("", "pods"),
    ("", "replicationcontrollers"),
    ("apps", "deployments"),
    ("apps", "replicasets"),
    ("apps", "statefulsets"),
    ("apps", "daemonsets"),
    ("batch", "jobs"),
    ("batch", "cronjobs"),
    ("autoscaling", "horizontalpodautoscalers"),
    ("policy", "poddisruptionbudgets"),
    ("networking.k8s.io", "networkpolicies"),
    ("networking.k8s.io", "ingresses"),
    ("discovery.k8s.io", "endpointslices"),
    ("scheduling.k8s.io", "priorityclasses"),
    (
        "admissionregistration.k8s.io",
        "validatingwebhookconfigurations",
    ),
    (
        "admissionregistration.k8s.io",
        "mutatingwebhookconfigurations",
    ),
    (
        "admissionregistration.k8s.io",
        "validatingadmissionpolicies",
    ),
    ("apiextensions.k8s.io", "customresourcedefinitions"),
];

/// An `additionalPrinterColumns` entry.
#[derive(Clone, Debug, PartialEq)]
pub struct PrinterColumn {
    pub name: String,
    pub type_: String,
    pub format: String,
    pub description: String,
    pub json_path: String,
    pub priority: i64,
}
