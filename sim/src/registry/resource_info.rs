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

impl ResourceInfo {
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
