//! The Backends step: renders every attached, credential-ready CinderBackend (through
//! [`crate::planning::backend_projection::project_backend`]) into its own content-hashed Secret
//! (`{name}-backend-{backend}-{hash}`) and sweeps the projection Secrets nothing projects
//! anymore: a backend that left, and an older hash after a rotation unless a live Deployment of
//! the Cinder still mounts it. Waiting states never short-circuit: a Cinder without backends
//! still converges.
//!
//! BackendsReady reasons: AllBackendsProjected, NoBackends; WaitingForBackends.

use super::StepEnv;
use super::children::{ensure_secret, mounts, secret, selector, sweep_secrets};
use super::projection::{PROJECTION_LABEL, PROJECTION_VOLUME, credentials_for};
use crate::conditions::{Cond, kind, reason};
use crate::crd::CinderBackend;
use crate::crd::validation::validate_backend;
use crate::names;
use crate::pipeline::{Step, StepContext, StepReport};
use crate::planning::backend_projection::project_backend;
use futures::FutureExt;
use futures::future::BoxFuture;
use kube::api::ListParams;
use kube::{Api, ResourceExt};
use std::collections::BTreeMap;

/// The Backends step.
pub struct BackendsStep {
    env: StepEnv,
}

impl BackendsStep {
    pub fn new(env: StepEnv) -> Self {
        BackendsStep { env }
    }
}

fn api_error(e: &kube::Error) -> Cond {
    Cond::false_(
        kind::BACKENDS_READY,
        reason::RECONCILE_ERROR,
        format!("kubernetes API error: {e}"),
    )
}

/// String data as Secret bytes.
pub fn bytes(data: BTreeMap<String, String>) -> BTreeMap<String, Vec<u8>> {
    data.into_iter().map(|(k, v)| (k, v.into_bytes())).collect()
}

async fn run(env: StepEnv, ctx: StepContext) -> StepReport {
    let children = ctx.children(&env.client);
    let cinder = ctx.cinder.clone();
    let ns = ctx.namespace().to_string();
    let cinder_name = ctx.name().to_string();
    let api: Api<CinderBackend> = Api::namespaced(env.client.clone(), &ns);
    let mut attached: Vec<CinderBackend> = match api.list(&ListParams::default()).await {
        Ok(l) => l
            .items
            .into_iter()
            .filter(|b| b.spec.cinder_ref.name == cinder_name)
            .collect(),
        Err(e) => return ctx.fail(api_error(&e), format!("listing CinderBackends: {e}")),
    };
    attached.sort_by_key(|b| b.name_any());

    let mut projected = Vec::new();
    let mut waiting = Vec::new();
    for b in &attached {
        let bname = b.name_any();
        if let Err(e) = validate_backend(&b.spec) {
            waiting.push(format!("{bname} ({e})"));
            continue;
        }
        let key = match credentials_for(&env.client, &ns, b.spec.backend_type, b.spec.rbd.as_ref())
            .await
        {
            Err(e) => return ctx.fail(api_error(&e), format!("reading the key of {bname}: {e}")),
            Ok(Err(why)) => {
                waiting.push(format!("{bname} ({why})"));
                continue;
            }
            Ok(Ok(k)) => k,
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
            bytes(projection.data),
            true,
        );
        if let Err(e) = ensure_secret(&children, desired).await {
            return ctx.fail(
                api_error(&e),
                format!("writing Secret {}: {e}", projection.secret_name),
            );
        }
        let mut summary = projection.summary;
        summary.deleting = b.metadata.deletion_timestamp.is_some();
        projected.push(summary);
    }

    let mut keep: Vec<String> = projected.iter().map(|p| p.secret_name.clone()).collect();
    match mounts(&children, &ns, &cinder_name).await {
        Ok(m) => keep.extend(m.secrets),
        Err(e) => return ctx.fail(api_error(&e), format!("listing Deployments: {e}")),
    }
    let sel = selector(&cinder_name, &[(PROJECTION_LABEL, PROJECTION_VOLUME)]);
    if let Err(e) = sweep_secrets(&children, &ns, &sel, &keep).await {
        return ctx.fail(api_error(&e), format!("sweeping backend Secrets: {e}"));
    }

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
    let mut ctx = ctx;
    ctx.artefacts.backends = projected;
    // Never short-circuits: a backend's credential flip re-enqueues through the watch.
    ctx.proceed(condition)
}

impl Step for BackendsStep {
    fn name(&self) -> &'static str {
        "Backends"
    }
    fn condition_type(&self) -> &'static str {
        kind::BACKENDS_READY
    }
    fn run(&self, ctx: StepContext) -> BoxFuture<'static, StepReport> {
        run(self.env.clone(), ctx).boxed()
    }
}
