//! The resource registry: which kinds the server serves (built-ins and registered CRDs), with the
//! discovery facts (plural, kind, scope, short names, subresources) and, for CRDs, schemas and
//! printer columns per version.

mod builtins;
mod crd;
mod resource_info;

pub use crd::{crd_status, resource_from_crd};
pub use resource_info::{CrdFacts, ExtraSubresource, PrinterColumn, ResourceInfo};

use serde_json::Value;
use std::sync::{Arc, RwLock};

/// Thread-safe set of served resources.
#[derive(Clone, Debug)]
pub struct Registry {
    inner: Arc<RwLock<Vec<Arc<ResourceInfo>>>>,
}

impl Default for Registry {
    fn default() -> Self {
        Registry::with_builtins()
    }
}

impl Registry {
    /// A registry holding the built-in kinds.
    pub fn with_builtins() -> Registry {
        Registry {
            inner: Arc::new(RwLock::new(
                builtins::all()
                    .into_iter()
                    .chain(crate::auth::review_resources())
                    .map(Arc::new)
                    .collect(),
            )),
        }
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Vec<Arc<ResourceInfo>>> {
        self.inner.read().unwrap_or_else(|e| e.into_inner())
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, Vec<Arc<ResourceInfo>>> {
        self.inner.write().unwrap_or_else(|e| e.into_inner())
    }

    /// The resource `resource` served at `group/version`.
    pub fn find(&self, group: &str, version: &str, resource: &str) -> Option<Arc<ResourceInfo>> {
        self.read()
            .iter()
            .find(|r| r.group == group && r.resource == resource && r.serves(version))
            .cloned()
    }

    /// Whether any resource is served at `group/version` (a real server answers requests
    /// below an unserved group version from its plain-text not-found handler).
    pub fn serves_group_version(&self, group: &str, version: &str) -> bool {
        self.read()
            .iter()
            .any(|r| r.group == group && r.serves(version))
    }

    /// The resource of `group` whose plural is `resource`, any version.
    pub fn find_resource(&self, group: &str, resource: &str) -> Option<Arc<ResourceInfo>> {
        self.read()
            .iter()
            .find(|r| r.group == group && r.resource == resource)
            .cloned()
    }

    /// The resource of kind `kind` in `group`.
    pub fn find_kind(&self, group: &str, kind: &str) -> Option<Arc<ResourceInfo>> {
        self.read()
            .iter()
            .find(|r| r.group == group && r.kind == kind)
            .cloned()
    }

    /// Every served resource.
    pub fn all(&self) -> Vec<Arc<ResourceInfo>> {
        self.read().clone()
    }

    /// Groups with their served versions (preferred first), in registration order; core excluded.
    pub fn groups(&self) -> Vec<(String, Vec<String>)> {
        let mut out: Vec<(String, Vec<String>)> = Vec::new();
        for r in self.read().iter().filter(|r| !r.group.is_empty()) {
            match out.iter_mut().find(|(g, _)| *g == r.group) {
                Some((_, versions)) => {
                    for v in &r.versions {
                        if !versions.contains(v) {
                            versions.push(v.clone());
                        }
                    }
                }
                None => out.push((r.group.clone(), r.versions.clone())),
            }
        }
        out
    }

    /// The resources served at `group/version`.
    pub fn resources_in(&self, group: &str, version: &str) -> Vec<Arc<ResourceInfo>> {
        self.read()
            .iter()
            .filter(|r| r.group == group && r.serves(version))
            .cloned()
            .collect()
    }

    /// Registers (or re-registers) the resource a CRD object defines.
    pub fn register_crd(&self, crd: &Value) -> Result<Arc<ResourceInfo>, crate::error::ApiError> {
        let info = Arc::new(crd::resource_from_crd(crd)?);
        let mut all = self.write();
        all.retain(|r| !(r.crd.is_some() && r.group == info.group && r.resource == info.resource));
        all.push(info.clone());
        Ok(info)
    }

    /// Unregisters the resource of a CRD (group, plural).
    pub fn unregister_crd(&self, group: &str, resource: &str) {
        self.write()
            .retain(|r| !(r.crd.is_some() && r.group == group && r.resource == resource));
    }
}
