//! What a request addresses: a resource at a version, in a namespace, by name, maybe a
//! subresource.

use super::validation;
use crate::registry::ResourceInfo;
use crate::store::ObjKey;
use std::sync::Arc;

/// What a request addresses: a resource at a version, a namespace ("" = cluster-scoped or all
/// namespaces), a name ("" = the collection) and a subresource ("" = the object itself).
#[derive(Clone, Debug)]
pub struct Target {
    pub info: Arc<ResourceInfo>,
    pub version: String,
    pub namespace: String,
    pub name: String,
    pub subresource: String,
}

impl Target {
    pub fn key(&self) -> ObjKey {
        ObjKey::new(
            &self.info.group,
            &self.info.resource,
            &self.namespace,
            &self.name,
        )
    }

    pub(super) fn api_version(&self) -> String {
        self.info.api_version(&self.version)
    }

    pub(super) fn name_rule(&self) -> validation::NameRule {
        validation::NameRule::of(&self.info.group, &self.info.resource)
    }
}
