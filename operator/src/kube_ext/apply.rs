//! Server-side apply as the operator's field manager, taking ownership of every field the
//! desired object sets (`force`): the way the operator writes the children it fully owns.

use kube::Api;
use kube::api::{Patch, PatchParams};
use serde::Serialize;
use serde::de::DeserializeOwned;

/// The field manager of every server-side apply and status write the operator makes.
pub(crate) const FIELD_MANAGER: &str = "cinder-operator";

/// Applies `desired` as `name`; returns the object as stored.
pub(crate) async fn apply<K, D>(api: &Api<K>, name: &str, desired: &D) -> Result<K, kube::Error>
where
    K: kube::Resource + Clone + DeserializeOwned + std::fmt::Debug,
    D: Serialize + std::fmt::Debug,
{
    let params = PatchParams::apply(FIELD_MANAGER).force();
    api.patch(name, &params, &Patch::Apply(desired)).await
}
