//! The kinds of the standard schema as a Rust enum, known at compile time: what the typed API
//! (results with a field per kind, [`crate::CoordinatorHandle::load`] / `peek`, interior
//! mutations) names kinds by, so a misspelt kind is a compile error instead of a lookup that finds
//! nothing. The schema's declarations (`schema.rs`) spell the same kinds by [`Kind::name`].

use std::fmt;

/// A kind of the standard schema, in its declared order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Kind {
    /// The synthetic root every consistent lock reads (and shutdown writes).
    Root,
    /// A storage device (device locks).
    Device,
    /// A storage class.
    StorageClass,
    /// A group snapshot.
    GroupSnapshot,
    /// A backend (key: `name`; interior mutations: capacity reservations).
    Backend,
    /// A node.
    Node,
    /// An autogrow policy.
    AutogrowPolicy,
    /// A volume (parent: backend; key: `internalName`).
    Volume,
    /// A subordinate volume (parent: volume).
    SubordinateVolume,
    /// A volume publication (parents: volume, node).
    VolumePublication,
    /// A snapshot (parent: volume).
    Snapshot,
}

impl Kind {
    /// Every kind, in declared order.
    pub const ALL: [Kind; 11] = [
        Kind::Root,
        Kind::Device,
        Kind::StorageClass,
        Kind::GroupSnapshot,
        Kind::Backend,
        Kind::Node,
        Kind::AutogrowPolicy,
        Kind::Volume,
        Kind::SubordinateVolume,
        Kind::VolumePublication,
        Kind::Snapshot,
    ];

    /// The kind's name in the schema, in plans, in `lock-plan` and in inspection.
    pub const fn name(self) -> &'static str {
        match self {
            Kind::Root => "root",
            Kind::Device => "device",
            Kind::StorageClass => "storageClass",
            Kind::GroupSnapshot => "groupSnapshot",
            Kind::Backend => "backend",
            Kind::Node => "node",
            Kind::AutogrowPolicy => "autogrowPolicy",
            Kind::Volume => "volume",
            Kind::SubordinateVolume => "subordinateVolume",
            Kind::VolumePublication => "volumePublication",
            Kind::Snapshot => "snapshot",
        }
    }

    /// The kind named `name` (as the schema spells it), if it is a standard kind.
    pub fn from_name(name: &str) -> Option<Kind> {
        Kind::ALL.into_iter().find(|k| k.name() == name)
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::Schema;

    #[test]
    fn the_enum_is_the_standard_schema_in_declared_order() {
        let schema = Schema::standard();
        let names: Vec<&str> = schema.kinds().iter().map(|k| k.name.as_str()).collect();
        let ours: Vec<&str> = Kind::ALL.iter().map(|k| k.name()).collect();
        assert_eq!(names, ours);
        for k in Kind::ALL {
            assert_eq!(Kind::from_name(k.name()), Some(k));
        }
        assert_eq!(Kind::from_name("volumes"), None);
    }
}
