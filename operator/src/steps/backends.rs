//! The Backends step: renders every attached, credential-ready CinderBackend (through
//! [`crate::planning::backend_projection::project_backend`]) into its own content-hashed Secret
//! (`{name}-backend-{backend}-{hash}`) and sweeps the projection Secrets nothing projects
//! anymore: a backend that left, and an older hash after a rotation unless a live Deployment of
//! the Cinder still mounts it. Waiting states never short-circuit: a Cinder without backends
//! still converges. An attached backend that is not projected this pass is handed on as held
//! (what its spec says, no Secret), so its running volume service keeps its NetworkPolicy
//! egress and its VPA.
//!
//! BackendsReady reasons: AllBackendsProjected, NoBackends; WaitingForBackends.

use crate::children::projection::{attached_to_pass, project, sweep_projections};
use crate::conditions::{Cond, kind, reason};
use crate::context::OperatorContext;
use crate::crd::CinderBackend;
use crate::pipeline::{Doing, StepContext, StepResult};
use crate::planning::backend_projection::held_backend;
use kube::ResourceExt;
use std::sync::Arc;

/// BackendsReady for `attached` attached backends of which `projected` were projected, the
/// others waiting for the reasons in `waiting` (`backend (why)`).
fn backends_condition(attached: usize, projected: usize, waiting: &[String]) -> Cond {
    if attached == 0 {
        Cond::true_(
            kind::BACKENDS_READY,
            reason::NO_BACKENDS,
            "no CinderBackend is attached",
        )
    } else if waiting.is_empty() {
        Cond::true_(
            kind::BACKENDS_READY,
            reason::ALL_BACKENDS_PROJECTED,
            format!("{projected} backend(s) projected"),
        )
    } else {
        Cond::false_(
            kind::BACKENDS_READY,
            reason::WAITING_FOR_BACKENDS,
            format!("waiting for: {}", waiting.join("; ")),
        )
    }
}

/// Runs the step once for one Cinder.
pub(crate) async fn run(op: Arc<OperatorContext>, ctx: &mut StepContext) -> StepResult {
    let attached: Vec<CinderBackend> = attached_to_pass(&op.client, ctx).await?;

    let mut projected = Vec::new();
    let mut waiting = Vec::new();
    let mut held = Vec::new();
    for b in &attached {
        let bname = b.name_any();
        if b.metadata.deletion_timestamp.is_none() {
            // Until it is projected below, the backend is held as it runs.
            held.push(held_backend(&bname, &b.spec));
        }
        match project(&op.client, ctx, b)
            .await
            .doing(format_args!("projecting {bname}"))?
        {
            Err(why) => waiting.push(format!("{bname} ({why})")),
            Ok(summary) => {
                held.retain(|h| h.name != bname);
                projected.push(summary);
            }
        }
    }

    sweep_projections::<CinderBackend>(&op.client, ctx, &projected)
        .await
        .doing("sweeping backend Secrets")?;

    let condition = backends_condition(attached.len(), projected.len(), &waiting);
    ctx.artefacts.backends = projected;
    ctx.artefacts.held_backends = held;
    // Never short-circuits: a backend's credential flip re-enqueues through the watch.
    ctx.proceed(condition)
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn backends_ready_names_what_waits() {
        let none = backends_condition(0, 0, &[]);
        assert_eq!(
            (none.type_, none.status, none.reason),
            (kind::BACKENDS_READY, true, reason::NO_BACKENDS)
        );
        let all = backends_condition(2, 2, &[]);
        assert_eq!(
            (all.status, all.reason),
            (true, reason::ALL_BACKENDS_PROJECTED)
        );
        assert_eq!(all.message, "2 backend(s) projected");
        let waiting = backends_condition(3, 1, &["a (x)".to_string(), "b (y)".to_string()]);
        assert_eq!(
            (waiting.status, waiting.reason),
            (false, reason::WAITING_FOR_BACKENDS)
        );
        assert_eq!(waiting.message, "waiting for: a (x); b (y)");
    }
}
