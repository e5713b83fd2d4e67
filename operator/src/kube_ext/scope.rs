//! APIs over namespaced kinds, scoped to the namespace the operator watches (`--namespace`) or
//! to all namespaces.

use kube::api::{ApiResource, DynamicObject};
use kube::core::NamespaceResourceScope;
use kube::{Api, Client, Resource};

/// An API over namespaced `K`: the watched namespace, or all of them.
pub(crate) fn scoped<K>(client: &Client, namespace: Option<&str>) -> Api<K>
where
    K: Resource<Scope = NamespaceResourceScope>,
    K::DynamicType: Default,
{
    match namespace {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    }
}

/// [`scoped`] for a kind known by its [`ApiResource`].
pub(crate) fn scoped_dynamic(
    client: &Client,
    namespace: Option<&str>,
    ar: &ApiResource,
) -> Api<DynamicObject> {
    match namespace {
        Some(ns) => Api::namespaced_with(client.clone(), ns, ar),
        None => Api::all_with(client.clone(), ar),
    }
}
