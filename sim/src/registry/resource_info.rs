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
}

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
