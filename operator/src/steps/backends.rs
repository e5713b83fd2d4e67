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

use crate::children::projection::{
    PROJECTION_LABEL, PROJECTION_VOLUME, attached, credentials_for, sweep_projections,
};
use crate::children::{ensure_secret, secret};
use crate::conditions::{Cond, kind, reason};
use crate::context::OperatorContext;
use crate::crd::validation::validate_satellite;
use crate::crd::{Cinder, CinderBackend};
use crate::names;
use crate::pipeline::{Doing, ProjectedBackend, StepContext, StepResult};
use crate::planning::backend_projection::{ProjectionError, held_backend, project_backend};
use k8s_openapi::api::core::v1::Secret;
use kube::ResourceExt;
use std::sync::Arc;

/// The projection Secret of the attached backend `b` of `cinder` (`key`: its cephx key, for
/// RBD) and the summary later steps use, marked deleting while the CinderBackend is.
fn projection_of(
    cinder: &Cinder,
    b: &CinderBackend,
    key: Option<&str>,
) -> Result<(Secret, ProjectedBackend), ProjectionError> {
    let cinder_name = cinder.metadata.name.as_deref().unwrap_or_default();
    let bname = b.name_any();
    let projection = project_backend(cinder_name, &bname, &b.spec, key)?;
    let labels = [
        (names::LABEL_BACKEND, bname.as_str()),
        (PROJECTION_LABEL, PROJECTION_VOLUME),
    ];
    let desired = secret(
        cinder,
        &projection.secret_name,
        &labels,
        projection.data.into_bytes(),
        true,
    );
    let mut summary = projection.summary;
    summary.deleting = b.metadata.deletion_timestamp.is_some();
    Ok((desired, summary))
}

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
    let children = ctx.children(&op.client);
    let cinder = ctx.cinder.clone();
    let ns = ctx.namespace().to_string();
    let cinder_name = ctx.name().to_string();
    let attached: Vec<CinderBackend> =
        attached(&op.client, ctx.management_reads(), &ns, &cinder_name)
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
            &op.client,
            ctx.management_reads(),
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
        let (desired, summary) = match projection_of(&cinder, b, key.as_ref().map(|k| k.expose())) {
            Ok(p) => p,
            Err(e) => {
                waiting.push(format!("{bname} ({e})"));
                continue;
            }
        };
        ensure_secret(&children, ctx.children_reads(), desired)
            .await
            .doing(format_args!("writing Secret {}", summary.secret_name))?;
        held.retain(|h| h.name != bname);
        projected.push(summary);
    }

    let keep = projected.iter().map(|p| p.secret_name.clone()).collect();
    let swept = sweep_projections(
        &children,
        ctx.children_reads(),
        &ns,
        &cinder_name,
        PROJECTION_VOLUME,
        keep,
    );
    swept.await.doing("sweeping backend Secrets")?;

    let condition = backends_condition(attached.len(), projected.len(), &waiting);
    ctx.artefacts.backends = projected;
    ctx.artefacts.held_backends = held;
    // Never short-circuits: a backend's credential flip re-enqueues through the watch.
    ctx.proceed(condition)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::planning::backend_projection::NFS_SHARES_KEY;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    const NFS: &str = "{cinderRef: {name: c}, type: NFS, nfs: {server: 10.0.0.5, path: /export}}";
    const RBD: &str = "{cinderRef: {name: c}, type: RBD, rbd: {pool: volumes, user: cinder, \
                       monitors: ['10.1.0.1:6789'], keySecretRef: {name: ceph-key}}}";

    fn backend(name: &str, spec: &str) -> CinderBackend {
        CinderBackend::new(
            name,
            serde_norway::from_str(spec).expect("a CinderBackend spec"),
        )
    }

    #[test]
    fn a_projected_backend_gets_its_own_labelled_immutable_secret() {
        let c = crate::test_fixtures::cinder();
        let (secret, summary) = projection_of(&c, &backend("nfs1", NFS), None).unwrap();
        let name = secret.metadata.name.clone().unwrap();
        assert!(name.starts_with("c-backend-nfs1-"), "{name}");
        assert_eq!(
            summary.secret_name, name,
            "the artefact names the Secret written"
        );
        assert_eq!(summary.name, "nfs1");
        assert_eq!(summary.nfs_server.as_deref(), Some("10.0.0.5"));
        assert!(!summary.deleting);
        assert_eq!(secret.metadata.namespace.as_deref(), Some("ns"));
        assert_eq!(secret.metadata.owner_references.unwrap()[0].uid, "u");
        let labels = secret.metadata.labels.unwrap();
        assert_eq!(labels[names::LABEL_BACKEND], "nfs1");
        assert_eq!(labels[PROJECTION_LABEL], PROJECTION_VOLUME);
        assert_eq!(secret.immutable, Some(true));
        assert_eq!(
            secret.data.unwrap()[NFS_SHARES_KEY].0,
            b"10.0.0.5:/export\n".to_vec()
        );
    }

    #[test]
    fn a_backend_being_deleted_is_handed_on_as_deleting() {
        let mut b = backend("nfs1", NFS);
        b.metadata.deletion_timestamp = Some(Time(k8s_openapi::jiff::Timestamp::now()));
        let (_, summary) = projection_of(&crate::test_fixtures::cinder(), &b, None).unwrap();
        assert!(summary.deleting);
    }

    #[test]
    fn an_rbd_backend_is_projected_only_with_a_usable_key() {
        let c = crate::test_fixtures::cinder();
        let b = backend("ceph1", RBD);
        assert_eq!(
            projection_of(&c, &b, None).unwrap_err(),
            ProjectionError::BadKey
        );
        assert_eq!(
            projection_of(&c, &b, Some("  ")).unwrap_err(),
            ProjectionError::BadKey
        );
        let (secret, summary) = projection_of(&c, &b, Some("AQBk==")).unwrap();
        assert!(summary.secret_name.starts_with("c-backend-ceph1-"));
        assert_eq!(summary.rbd_monitors, ["10.1.0.1:6789"]);
        let data = secret.data.unwrap();
        assert!(String::from_utf8_lossy(&data["keyring"].0).contains("key = AQBk=="));
    }

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
