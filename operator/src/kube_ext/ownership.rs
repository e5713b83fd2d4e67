//! The ownership label of a child projected onto a target cluster, where an ownerReference to
//! the Cinder on the management cluster cannot point: `OWNER_LABEL=<namespace>.<name>`.

/// The ownership label of a child projected onto a target cluster: `<namespace>.<name>` of
/// the owning Cinder.
pub const OWNER_LABEL: &str = "cinder.openstack.c5c3.io/owner";

/// The value of [`OWNER_LABEL`] for the Cinder `namespace`/`name`.
pub(crate) fn owner_value(namespace: &str, name: &str) -> String {
    format!("{namespace}.{name}")
}

/// The owner an [`OWNER_LABEL`] value names (namespaces hold no dots, so the first one splits).
pub(crate) fn owner_of<K>(value: &str) -> Option<kube::runtime::reflector::ObjectRef<K>>
where
    K: kube::Resource,
    K::DynamicType: Default,
{
    let (namespace, name) = value.split_once('.')?;
    (!namespace.is_empty() && !name.is_empty())
        .then(|| kube::runtime::reflector::ObjectRef::new(name).within(namespace))
}
