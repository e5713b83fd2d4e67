//! Creating an object that may exist already: a 409 means another writer (another pass,
//! another replica) created it first, which is as good as creating it.

use super::api_error::ApiErrorExt;
use kube::Api;
use kube::api::PostParams;
use serde::Serialize;
use serde::de::DeserializeOwned;

/// Creates `obj`: `Ok(true)` when this call created it, `Ok(false)` when it existed already
/// (409; the next pass compares it).
pub async fn create_if_absent<K>(api: &Api<K>, obj: &K) -> Result<bool, kube::Error>
where
    K: kube::Resource + Clone + DeserializeOwned + Serialize + std::fmt::Debug,
{
    match api.create(&PostParams::default(), obj).await {
        Ok(_) => Ok(true),
        Err(e) if e.is_conflict() => Ok(false),
        Err(e) => Err(e),
    }
}
