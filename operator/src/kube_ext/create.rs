//! Writing an object another writer may touch at the same time: creating one that may exist
//! already (a 409 AlreadyExists means another pass or replica created it first, as good as
//! creating it; any other 409 is an error like any other), and replacing one at the
//! resourceVersion it was read at (a 409 means it changed since: its watch event brings the next
//! pass, which compares again).

use super::api_error::{ApiErrorExt, ExpectedRefusal};
use kube::Api;
use kube::api::PostParams;
use serde::Serialize;
use serde::de::DeserializeOwned;

/// Creates `obj`: `Ok(true)` when this call created it, `Ok(false)` when it existed already
/// (409 AlreadyExists; the next pass compares it).
pub async fn create_if_absent<K>(api: &Api<K>, obj: &K) -> Result<bool, kube::Error>
where
    K: kube::Resource + Clone + DeserializeOwned + Serialize + std::fmt::Debug,
{
    api.create(&PostParams::default(), obj)
        .await
        .done_unless(ApiErrorExt::is_already_exists)
}

/// Replaces `name` with `obj` (which carries the resourceVersion it was read at): `Ok(true)`
/// when written, `Ok(false)` when it changed since (409; the next pass compares again).
pub(crate) async fn replace_unless_changed<K>(
    api: &Api<K>,
    name: &str,
    obj: &K,
) -> Result<bool, kube::Error>
where
    K: kube::Resource + Clone + DeserializeOwned + Serialize + std::fmt::Debug,
{
    api.replace(name, &PostParams::default(), obj)
        .await
        .done_unless(ApiErrorExt::is_conflict)
}
