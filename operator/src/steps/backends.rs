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

use super::children::{ensure_secret, secret};
use super::env::StepEnv;
use super::projection::{
    PROJECTION_LABEL, PROJECTION_VOLUME, attached, credentials_for, sweep_projections,
};
use crate::conditions::{Cond, kind, reason};
use crate::crd::CinderBackend;
use crate::crd::validation::validate_satellite;
use crate::names;
use crate::pipeline::{Doing, StepContext, StepResult};
use crate::planning::backend_projection::{held_backend, project_backend};
use kube::ResourceExt;

/// Runs the step once for one Cinder.
pub async fn run(env: StepEnv, ctx: &mut StepContext) -> StepResult {
    let children = ctx.children(&env.client);
    let cinder = ctx.cinder.clone();
    let ns = ctx.namespace().to_string();
    let cinder_name = ctx.name().to_string();
    let attached: Vec<CinderBackend> = attached(&env.client, &ns, &cinder_name)
        .await
        .doing("listing CinderBackends")?;

    let mut projected = Vec::new();
    let mut waiting = Vec::new();
    let mut held = Vec::new();
    for b in &attached {
        let bname = b.name_any();
        if b.metadata.deletion_timestamp.is_none() {
            // Until it is projected below, the backend is held as it runs.
            held.push(held_backend(&bname, &b.spec));
        }
        if let Err(e) = validate_satellite(&b.spec.satellite) {
            waiting.push(format!("{bname} ({e})"));
            continue;
        }
        let key = match credentials_for(
            &env.client,
            &ns,
            b.spec.satellite.backend_type,
            b.spec.satellite.rbd.as_ref(),
        )
        .await
        .doing(format_args!("reading the key of {bname}"))?
        {
            Err(why) => {
                waiting.push(format!("{bname} ({why})"));
                continue;
            }
            Ok(k) => k,
        };
        let projection = match project_backend(
            &cinder_name,
            &bname,
            &b.spec,
            key.as_ref().map(|k| k.expose()),
        ) {
            Ok(p) => p,
            Err(e) => {
                waiting.push(format!("{bname} ({e})"));
                continue;
            }
        };
        let labels = [
            (names::LABEL_BACKEND, bname.as_str()),
            (PROJECTION_LABEL, PROJECTION_VOLUME),
        ];
        let desired = secret(
            &cinder,
            &projection.secret_name,
            &labels,
            projection.data.into_bytes(),
            true,
        );
        ensure_secret(&children, desired)
            .await
            .doing(format_args!("writing Secret {}", projection.secret_name))?;
        let mut summary = projection.summary;
        summary.deleting = b.metadata.deletion_timestamp.is_some();
        held.retain(|h| h.name != bname);
        projected.push(summary);
    }

    let keep = projected.iter().map(|p| p.secret_name.clone()).collect();
    let swept = sweep_projections(&children, &ns, &cinder_name, PROJECTION_VOLUME, keep);
    swept.await.doing("sweeping backend Secrets")?;

    let condition = if attached.is_empty() {
        Cond::true_(
            kind::BACKENDS_READY,
            reason::NO_BACKENDS,
            "no CinderBackend is attached",
        )
    } else if waiting.is_empty() {
        Cond::true_(
            kind::BACKENDS_READY,
            reason::ALL_BACKENDS_PROJECTED,
            format!("{} backend(s) projected", projected.len()),
        )
    } else {
        Cond::false_(
            kind::BACKENDS_READY,
            reason::WAITING_FOR_BACKENDS,
            format!("waiting for: {}", waiting.join("; ")),
        )
    };
    ctx.artefacts.backends = projected;
    ctx.artefacts.held_backends = held;
    // Never short-circuits: a backend's credential flip re-enqueues through the watch.
    ctx.proceed(condition)
}
