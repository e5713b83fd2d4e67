//! The ownership label of a child projected onto a target cluster, where an ownerReference to
//! the Cinder on the management cluster cannot point: `OWNER_LABEL=<namespace>.<name>`.

/// The ownership label of a child projected onto a target cluster: `<namespace>.<name>` of
/// the owning Cinder.
pub const OWNER_LABEL: &str = "cinder.openstack.c5c3.io/owner";

/// The value of [`OWNER_LABEL`] for the Cinder `namespace`/`name`.
pub fn owner_value(namespace: &str, name: &str) -> String {
    format!("{namespace}.{name}")
}
