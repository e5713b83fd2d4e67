//! [`CinderKey`]: how the engine names one Cinder (its pipeline actor, its record in the
//! `/pipelines` view, what the step actors remember of it).

use crate::crd::Cinder;

/// `(namespace, name)` of a Cinder.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct CinderKey {
    pub namespace: String,
    pub name: String,
}

impl CinderKey {
    pub fn of(cinder: &Cinder) -> Self {
        CinderKey {
            namespace: cinder.metadata.namespace.clone().unwrap_or_default(),
            name: cinder.metadata.name.clone().unwrap_or_default(),
        }
    }
}
