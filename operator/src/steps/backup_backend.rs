//! The BackupBackend step: renders the single attached, credential-ready CinderBackupBackend
//! into a content-hashed Secret (`{name}-backup-backend-{hash}`) and sweeps the rest, under the
//! same never-short-circuit contract as Backends.
//!
//! BackupBackendReady reasons: BackupBackendProjected, NoBackupBackend; WaitingForBackupBackend,
//! MultipleBackupBackends.

use super::StepEnv;
use super::children::{ensure_secret, secret, selector, sweep_secrets};
use super::digest::content_hash;
use super::projection::{
    PROJECTION_BACKUP, PROJECTION_LABEL, backup_backend_files, credentials_for,
};
use crate::conditions::{Cond, kind, reason};
use crate::crd::CinderBackupBackend;
use crate::crd::validation::validate_backup_backend;
use crate::names;
use crate::pipeline::{ProjectedBackend, Step, StepContext, StepReport};
use futures::FutureExt;
use futures::future::BoxFuture;
use kube::api::ListParams;
use kube::{Api, ResourceExt};

/// The BackupBackend step.
pub struct BackupBackendStep {
    env: StepEnv,
}

impl BackupBackendStep {
    pub fn new(env: StepEnv) -> Self {
        BackupBackendStep { env }
    }
}

fn api_error(e: &kube::Error) -> Cond {
    Cond::false_(
        kind::BACKUP_BACKEND_READY,
        reason::RECONCILE_ERROR,
        format!("kubernetes API error: {e}"),
    )
}

async fn run(env: StepEnv, ctx: StepContext) -> StepReport {
    let cinder = ctx.cinder.clone();
    let ns = ctx.namespace().to_string();
    let cinder_name = ctx.name().to_string();
    let api: Api<CinderBackupBackend> = Api::namespaced(env.client.clone(), &ns);
    let mut attached: Vec<CinderBackupBackend> = match api.list(&ListParams::default()).await {
        Ok(l) => l
            .items
            .into_iter()
            .filter(|b| b.spec.cinder_ref.name == cinder_name)
            .collect(),
        Err(e) => return ctx.fail(api_error(&e), format!("listing CinderBackupBackends: {e}")),
    };
    attached.sort_by_key(|b| b.name_any());

    let (condition, projected) = match attached.as_slice() {
        [] => (
            Cond::true_(
                kind::BACKUP_BACKEND_READY,
                reason::NO_BACKUP_BACKEND,
                "no CinderBackupBackend is attached",
            ),
            None,
        ),
        [b] => {
            let bname = b.name_any();
            let key = if let Err(e) = validate_backup_backend(&b.spec) {
                Err(e.to_string())
            } else {
                match credentials_for(&env.client, &ns, b.spec.backend_type, b.spec.rbd.as_ref())
                    .await
                {
                    Err(e) => {
                        return ctx.fail(api_error(&e), format!("reading the key of {bname}: {e}"));
                    }
                    Ok(k) => k,
                }
            };
            match key {
                Err(why) => (
                    Cond::false_(
                        kind::BACKUP_BACKEND_READY,
                        reason::WAITING_FOR_BACKUP_BACKEND,
                        format!("waiting for {bname}: {why}"),
                    ),
                    None,
                ),
                Ok(key) => {
                    let files = backup_backend_files(
                        b.spec.backend_type,
                        b.spec.nfs.as_ref(),
                        b.spec.rbd.as_ref(),
                        key.as_ref(),
                        b.spec.file_size,
                        b.spec.compression,
                        &b.spec.extra_options,
                    );
                    let hash = content_hash(&files);
                    let secret_name = names::backup_backend_secret(&cinder_name, &hash);
                    let labels = [
                        (names::LABEL_BACKEND, bname.as_str()),
                        (PROJECTION_LABEL, PROJECTION_BACKUP),
                    ];
                    if let Err(e) = ensure_secret(
                        &env.client,
                        secret(&cinder, &secret_name, &labels, files, true),
                    )
                    .await
                    {
                        return ctx
                            .fail(api_error(&e), format!("writing Secret {secret_name}: {e}"));
                    }
                    (
                        Cond::true_(
                            kind::BACKUP_BACKEND_READY,
                            reason::BACKUP_BACKEND_PROJECTED,
                            format!("{bname} projected into Secret {secret_name}"),
                        ),
                        Some(ProjectedBackend {
                            name: bname,
                            backend_type: Some(b.spec.backend_type),
                            secret_name,
                            content_hash: hash,
                            nfs_server: b.spec.nfs.as_ref().map(|n| n.server.clone()),
                            rbd_networks: b
                                .spec
                                .rbd
                                .as_ref()
                                .map(|r| r.networks.clone())
                                .unwrap_or_default(),
                            deleting: b.metadata.deletion_timestamp.is_some(),
                        }),
                    )
                }
            }
        }
        many => (
            Cond::false_(
                kind::BACKUP_BACKEND_READY,
                reason::MULTIPLE_BACKUP_BACKENDS,
                format!(
                    "at most one CinderBackupBackend may be attached; found {}",
                    many.iter()
                        .map(|b| b.name_any())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            ),
            None,
        ),
    };

    let keep: Vec<String> = projected.iter().map(|p| p.secret_name.clone()).collect();
    let sel = selector(&cinder_name, &[(PROJECTION_LABEL, PROJECTION_BACKUP)]);
    if let Err(e) = sweep_secrets(&env.client, &ns, &sel, &keep).await {
        return ctx.fail(api_error(&e), format!("sweeping backup Secrets: {e}"));
    }
    let mut ctx = ctx;
    ctx.artefacts.backup_backend = projected;
    ctx.proceed(condition)
}

impl Step for BackupBackendStep {
    fn name(&self) -> &'static str {
        "BackupBackend"
    }
    fn condition_type(&self) -> &'static str {
        kind::BACKUP_BACKEND_READY
    }
    fn run(&self, ctx: StepContext) -> BoxFuture<'static, StepReport> {
        run(self.env.clone(), ctx).boxed()
    }
}
