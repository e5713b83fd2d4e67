//! The counted marker of Jobs: the `cinder_operator_{db_sync,db_purge,service_remove}_*` pairs
//! count a terminal Job once, and that "once" has to survive a restart or a failover to another
//! replica. The process that counts a Job first writes the annotation [`COUNTED_ANNOTATION`] on
//! it, guarded by the resourceVersion it read, and counts only when its write placed the marker;
//! a Job that carries the marker is never counted again by any process.

use crate::kube_ext::ApiErrorExt;
use k8s_openapi::api::batch::v1::Job;
use kube::api::{Patch, PatchParams};
use kube::{Api, Client};

/// The marker annotation (its value: the result counted).
pub(crate) const COUNTED_ANNOTATION: &str = "cinder.c5c3.io/counted";

/// What claiming a Job's count came to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Claim {
    /// This call placed the marker: count the Job now.
    Mine,
    /// The Job was counted before (or is gone, or is another Job of that name).
    Counted,
    /// The Job changed under the write: ask again on a later pass.
    Retry,
}

/// Whether `job` carries the marker.
pub(crate) fn is_counted(job: &Job) -> bool {
    job.metadata
        .annotations
        .as_ref()
        .is_some_and(|a| a.contains_key(COUNTED_ANNOTATION))
}

/// A terminal Job to count once: where it lives and who it is.
pub(crate) struct CountedJob<'a> {
    pub client: &'a Client,
    pub name: &'a str,
    pub uid: &'a str,
}

impl CountedJob<'_> {
    /// Claims the count of this Job in `namespace` (the one of its name with its UID), marking
    /// it with `result`.
    pub(crate) async fn claim(
        &self,
        namespace: &str,
        result: crate::metrics::JobResult,
    ) -> Result<Claim, kube::Error> {
        let api: Api<Job> = Api::namespaced(self.client.clone(), namespace);
        let Some(job) = api.get_opt(self.name).await? else {
            return Ok(Claim::Counted);
        };
        if job.metadata.uid.as_deref() != Some(self.uid) || is_counted(&job) {
            return Ok(Claim::Counted);
        }
        let patch = serde_json::json!({
            "metadata": {
                "resourceVersion": job.metadata.resource_version,
                "annotations": {COUNTED_ANNOTATION: result.as_str()},
            }
        });
        match api
            .patch(self.name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(_) => Ok(Claim::Mine),
            Err(e) if e.is_conflict() => Ok(Claim::Retry),
            Err(e) if e.is_not_found() => Ok(Claim::Counted),
            Err(e) => Err(e),
        }
    }
}

/// Counts a Job through `count` once across processes: `first_time` is the caller's in-memory
/// fast path (false: this process counted or claimed it already), `claim` the marker write
/// (only asked when `first_time`), `unsee` gives the key back when the claim has to be
/// retried. Returns whether it counted.
pub(crate) async fn count_once<C>(
    first_time: bool,
    claim: impl FnOnce() -> C,
    unsee: impl FnOnce(),
    count: impl FnOnce(),
) -> bool
where
    C: std::future::Future<Output = Result<Claim, kube::Error>>,
{
    if !first_time {
        return false;
    }
    match claim().await {
        Ok(Claim::Mine) => {
            count();
            true
        }
        Ok(Claim::Counted) => false,
        Ok(Claim::Retry) => {
            unsee();
            false
        }
        Err(e) => {
            tracing::warn!(error = %e, "marking a Job counted failed; retrying after a pause");
            unsee();
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    async fn run(first_time: bool, claim: Result<Claim, kube::Error>) -> (bool, bool, bool) {
        let (unseen, counted) = (Cell::new(false), Cell::new(false));
        let asked = Cell::new(false);
        let result = count_once(
            first_time,
            || {
                asked.set(true);
                async { claim }
            },
            || unseen.set(true),
            || counted.set(true),
        )
        .await;
        assert_eq!(result, counted.get());
        if !first_time {
            assert!(!asked.get(), "the marker is not read again in this process");
        }
        (counted.get(), unseen.get(), asked.get())
    }

    #[tokio::test]
    async fn only_the_write_that_places_the_marker_counts() {
        assert_eq!(run(true, Ok(Claim::Mine)).await, (true, false, true));
        // Counted before, by this process or another one.
        assert_eq!(run(true, Ok(Claim::Counted)).await, (false, false, true));
        assert_eq!(run(false, Ok(Claim::Mine)).await, (false, false, false));
        // The Job changed under the write, or the API failed: asked again later.
        assert_eq!(run(true, Ok(Claim::Retry)).await, (false, true, true));
        let error = kube::Error::Service("connection refused".into());
        assert_eq!(run(true, Err(error)).await, (false, true, true));
    }

    #[test]
    fn the_marker_is_read_from_the_annotations() {
        let mut job = Job::default();
        assert!(!is_counted(&job));
        job.metadata.annotations =
            Some([(COUNTED_ANNOTATION.to_string(), "succeeded".into())].into());
        assert!(is_counted(&job));
    }
}
