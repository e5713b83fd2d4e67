//! Optional children the spec does not ask for (an HPA, a VPA, an HTTPRoute, a NetworkPolicy):
//! what each one stands for in the status, and the step ending that removes one and reports it
//! not required.

use crate::conditions::not_required;
use crate::crd::Cinder;
use crate::kube_ext::ApiErrorExt;
use crate::kube_ext::delete_if_present;
use crate::pipeline::{Doing, StepContext, StepResult};
use kube::Api;
use kube::Resource;
use kube::api::DeleteParams;

/// An optional child the spec does not ask for: what it is ("HPA"), its condition and reason
/// when absent, and the spec field that is unset.
pub(crate) struct NotRequired {
    pub what: &'static str,
    pub condition_type: &'static str,
    pub reason: &'static str,
    pub field: &'static str,
}

impl NotRequired {
    pub(crate) const fn new(
        what: &'static str,
        condition_type: &'static str,
        reason: &'static str,
        field: &'static str,
    ) -> Self {
        NotRequired {
            what,
            condition_type,
            reason,
            field,
        }
    }
}

/// Whether the Cinder's status already holds the True `condition_type` with `reason`: the
/// optional child it stands for was found absent or deleted by the pass that set it, so a
/// pass while the spec still does not ask for it need not read (a kind the stores do not hold
/// would cost a GET answered 404 on every pass).
pub(crate) fn already_not_required(cinder: &Cinder, condition_type: &str, reason: &str) -> bool {
    cinder.status.as_ref().is_some_and(|s| {
        crate::conditions::find(&s.conditions, condition_type)
            .is_some_and(|c| c.status == "True" && c.reason == reason)
    })
}

/// Ends the step of an optional child the spec does not ask for: when the status already says
/// so ([`already_not_required`]) it proceeds at once; otherwise deletes `what` `name` if it
/// exists (a 404, also of its kind, is the goal state) and proceeds with the True condition of
/// `unwanted`. It reads before it deletes, so that a settled Cinder's periodic passes write
/// nothing.
pub(crate) async fn remove_unwanted<K>(
    ctx: &mut StepContext,
    api: &Api<K>,
    name: &str,
    unwanted: NotRequired,
) -> StepResult
where
    K: Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug + Send + Sync + 'static,
    K::DynamicType: Eq + std::hash::Hash + Clone + Send + Sync,
{
    let what = unwanted.what;
    if already_not_required(&ctx.cinder, unwanted.condition_type, unwanted.reason) {
        // The pass that set the condition found `name` absent or deleted it.
        return ctx.proceed(not_required(
            unwanted.condition_type,
            unwanted.reason,
            unwanted.field,
            &format!("{what} {name}"),
            false,
        ));
    }
    let present = match ctx.children_reads().get_opt(api, name).await {
        Ok(found) => found.is_some(),
        Err(e) if e.is_not_found() => false,
        Err(e) => return Err(e).doing(format_args!("reading {what} {name}")),
    };
    let deleted = present
        && delete_if_present(api, name, &DeleteParams::default())
            .await
            .doing(format_args!("deleting {what} {name}"))?;
    ctx.proceed(not_required(
        unwanted.condition_type,
        unwanted.reason,
        unwanted.field,
        &format!("{what} {name}"),
        deleted,
    ))
}
