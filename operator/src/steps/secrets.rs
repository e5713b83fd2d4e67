//! The Secrets step: gates on the selected secret store (spec.secretStoreRef, default
//! ClusterSecretStore `openbao-cluster-store`), then on the ESO-synced database, service-user
//! and messaging credential Secrets, digests the service-user password into the
//! `cinder.c5c3.io/authtoken-hash` artefact and materializes it into the derived
//! `{name}-service-user` Secret on the cluster the workloads run on, as the oslo.config literal
//! the API reads from its environment (each `$` doubled).
//!
//! SecretsReady reasons: SecretsAvailable; SecretStoreNotReady, ClusterSecretStoreUnsupported,
//! WaitingForDBCredentials, WaitingForServiceUserCredentials, WaitingForMessagingCredentials
//! (each requeues after 15 s). TargetClusterUnavailable is set by the gate ahead of the steps.

use crate::children::ensure_derived_secret;
use crate::conditions::{Cond, kind, reason};
use crate::crd::{Cinder, SecretStoreKind};
use crate::credentials::{self, Missing};
use crate::kube_ext::ApiErrorExt;
use crate::kube_ext::reader;
use crate::kube_ext::resources::{cluster_secret_store_resource, secret_store_resource};
use crate::names;
use crate::pipeline::StepEnv;
use crate::pipeline::{Doing, StepContext, StepResult};
use crate::planning::connection_urls::{authtoken_hash, oslo_config_literal};
use crate::requeue::REQUEUE_SECRET_POLLING;
use kube::api::DynamicObject;
use kube::{Api, Client};

/// Keys of the database credential Secret.
pub const DB_KEYS: [&str; 2] = ["username", "password"];
/// Default key of the service-user Secret.
pub const SERVICE_USER_PASSWORD_KEY: &str = "password";
/// Required keys of the messaging Secret (`port` and `vhost` are optional).
pub const MESSAGING_KEYS: [&str; 3] = ["username", "password", "host"];
/// Optional keys of the messaging Secret.
pub const MESSAGING_OPTIONAL_KEYS: [&str; 2] = ["port", "vhost"];

/// The messaging Secret of `cinder`: `(namespace, name)` of spec.messaging.secretRef, or the
/// `{cluster}-default-user` Secret of spec.messaging.clusterRef.
pub fn messaging_secret(cinder: &Cinder) -> Option<(String, String)> {
    let ns = cinder.metadata.namespace.clone().unwrap_or_default();
    let m = &cinder.spec.messaging;
    if let Some(r) = &m.secret_ref {
        return Some((ns, r.name.clone()));
    }
    m.cluster_ref.as_ref().map(|c| {
        (
            c.namespace.clone().unwrap_or(ns),
            format!("{}-default-user", c.name),
        )
    })
}

fn waiting(reason: &'static str, what: &str, missing: &Missing) -> Cond {
    Cond::false_(
        kind::SECRETS_READY,
        reason,
        format!("waiting for {what}: {missing}"),
    )
}

/// Whether the store's `Ready` condition is True; `Err` text names the problem.
async fn store_ready(
    client: &Client,
    namespace: &str,
    store_kind: SecretStoreKind,
    name: &str,
) -> Result<Result<(), String>, kube::Error> {
    let api: Api<DynamicObject> = match store_kind {
        SecretStoreKind::ClusterSecretStore => {
            Api::all_with(client.clone(), &cluster_secret_store_resource())
        }
        SecretStoreKind::SecretStore => {
            Api::namespaced_with(client.clone(), namespace, &secret_store_resource())
        }
    };
    let store = match reader::management().get_opt(&api, name).await {
        Ok(s) => s,
        // The external-secrets CRDs are not installed.
        Err(e) if e.is_not_found() => None,
        Err(e) => return Err(e),
    };
    let Some(store) = store else {
        return Ok(Err(format!(
            "{} {name:?} does not exist",
            store_kind.as_str()
        )));
    };
    let ready = store
        .data
        .pointer("/status/conditions")
        .and_then(|c| c.as_array())
        .and_then(|cs| {
            cs.iter()
                .find(|c| c.get("type").and_then(|t| t.as_str()) == Some("Ready"))
        })
        .and_then(|c| c.get("status").and_then(|s| s.as_str()))
        == Some("True");
    Ok(if ready {
        Ok(())
    } else {
        Err(format!("{} {name:?} is not Ready", store_kind.as_str()))
    })
}

/// A credential Secret the step requires: where, which keys, and how to wait for it.
struct Needed<'a> {
    namespace: String,
    name: String,
    keys: Vec<&'a str>,
    reason: &'static str,
    what: &'static str,
    /// The key whose value's hash the pass keeps (the service user's password, which rolls the
    /// API pods).
    hashed: Option<&'a str>,
}

/// Runs the step once for one Cinder.
pub async fn run(env: StepEnv, ctx: &mut StepContext) -> StepResult {
    let cinder = ctx.cinder.clone();
    let ns = ctx.namespace().to_string();
    let store = &cinder.spec.secret_store_ref;
    let requeue = |ctx: &mut StepContext, c: Cond| ctx.requeue(c, REQUEUE_SECRET_POLLING);

    if store.kind == SecretStoreKind::ClusterSecretStore && env.watch_namespace.is_some() {
        let c = Cond::false_(
            kind::SECRETS_READY,
            reason::CLUSTER_SECRET_STORE_UNSUPPORTED,
            format!(
                "spec.secretStoreRef: ClusterSecretStore {:?} cannot be used while the operator watches one namespace; select a SecretStore",
                store.name
            ),
        );
        return requeue(ctx, c);
    }
    let store_ready = store_ready(&env.client, &ns, store.kind, &store.name)
        .await
        .doing("reading the secret store")?;
    if let Err(why) = store_ready {
        let c = Cond::false_(kind::SECRETS_READY, reason::SECRET_STORE_NOT_READY, why);
        return requeue(ctx, c);
    }

    let db = &cinder.spec.database.secret_ref;
    let su = &cinder.spec.service_user.secret_ref;
    let su_key = su.key.as_deref().unwrap_or(SERVICE_USER_PASSWORD_KEY);
    let messaging = messaging_secret(&cinder);
    let needed = [
        Some(Needed {
            namespace: ns.clone(),
            name: db.name.clone(),
            keys: DB_KEYS.to_vec(),
            reason: reason::WAITING_FOR_DB_CREDENTIALS,
            what: "the database credentials",
            hashed: None,
        }),
        Some(Needed {
            namespace: ns.clone(),
            name: su.name.clone(),
            keys: vec![su_key],
            reason: reason::WAITING_FOR_SERVICE_USER_CREDENTIALS,
            what: "the service-user credentials",
            hashed: Some(su_key),
        }),
        messaging.map(|(namespace, name)| Needed {
            namespace,
            name,
            keys: MESSAGING_KEYS.to_vec(),
            reason: reason::WAITING_FOR_MESSAGING_CREDENTIALS,
            what: "the messaging credentials",
            hashed: None,
        }),
    ];
    let mut password_hash = None;
    let mut password = None;
    for need in needed {
        let Some(need) = need else {
            let c = Cond::false_(
                kind::SECRETS_READY,
                reason::WAITING_FOR_MESSAGING_CREDENTIALS,
                "spec.messaging names neither clusterRef nor secretRef",
            );
            return requeue(ctx, c);
        };
        let read = credentials::read(&env.client, &need.namespace, &need.name, &need.keys, &[]);
        match read.await.doing(format_args!("reading {}", need.what))? {
            Err(m) => return requeue(ctx, waiting(need.reason, need.what, &m)),
            Ok(values) => {
                if let Some(key) = need.hashed {
                    password_hash = values.get(key).map(authtoken_hash);
                    password = values.get(key).map(str::to_string);
                }
            }
        }
    }

    // The API pods read the password from a derived Secret beside them, so that it exists on
    // the cluster they run on; it reaches oslo.config as OS_KEYSTONE_AUTHTOKEN__PASSWORD, hence
    // written as an oslo.config literal.
    let derived = names::service_user_secret(ctx.name());
    let children = ctx.children(&env.client);
    let delivered = oslo_config_literal(password.as_deref().unwrap_or_default());
    let written = ensure_derived_secret(
        &children,
        &cinder,
        &derived,
        SERVICE_USER_PASSWORD_KEY,
        &delivered,
    );
    written
        .await
        .doing(format_args!("writing Secret {derived}"))?;
    ctx.artefacts.authtoken_hash = password_hash;
    ctx.proceed(Cond::true_(
        kind::SECRETS_READY,
        reason::SECRETS_AVAILABLE,
        "the secret store is Ready and the credential Secrets are present",
    ))
}
