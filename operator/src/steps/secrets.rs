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
use crate::context::OperatorContext;
use crate::crd::{Cinder, SecretStoreKind, SecretStoreRef};
use crate::credentials::{self, Missing};
use crate::kube_ext::ApiErrorExt;
use crate::kube_ext::reader::ClusterStores;
use crate::kube_ext::resources::{cluster_secret_store_resource, secret_store_resource};
use crate::names;
use crate::pipeline::{Doing, StepContext, StepResult};
use crate::planning::connection_urls::{authtoken_hash, oslo_config_literal};
use crate::requeue::REQUEUE_SECRET_POLLING;
use kube::api::DynamicObject;
use kube::{Api, Client};
use std::sync::Arc;

/// SecretsReady=True once `what` is materialized in the derived Secret `name`.
pub(crate) fn materialized(what: &str, name: &str) -> Cond {
    Cond::true_(
        kind::SECRETS_READY,
        reason::SECRETS_AVAILABLE,
        format!("{what} materialized in Secret {name}"),
    )
}

/// Keys of the database credential Secret.
pub(crate) const DB_KEYS: [&str; 2] = ["username", "password"];
/// Default key of the service-user Secret.
pub(crate) const SERVICE_USER_PASSWORD_KEY: &str = "password";
/// Required keys of the messaging Secret (`port` and `vhost` are optional).
pub(crate) const MESSAGING_KEYS: [&str; 3] = ["username", "password", "host"];
/// Optional keys of the messaging Secret.
pub(crate) const MESSAGING_OPTIONAL_KEYS: [&str; 2] = ["port", "vhost"];

/// The messaging Secret of `cinder`: `(namespace, name)` of spec.messaging.secretRef, or the
/// `{cluster}-default-user` Secret of spec.messaging.clusterRef.
pub(crate) fn messaging_secret(cinder: &Cinder) -> Option<(String, String)> {
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
    reads: &ClusterStores,
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
    let store = match reads.get_opt(&api, name).await {
        Ok(s) => s,
        // The external-secrets CRDs are not installed.
        Err(e) if e.is_not_found() => None,
        Err(e) => return Err(e),
    };
    Ok(store_state(store.as_ref(), store_kind, name))
}

/// Whether the store `name` as read (`None`: absent) has a `Ready` condition that is True;
/// `Err` text names the problem.
fn store_state(
    store: Option<&DynamicObject>,
    store_kind: SecretStoreKind,
    name: &str,
) -> Result<(), String> {
    let Some(store) = store else {
        return Err(format!("{} {name:?} does not exist", store_kind.as_str()));
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
    if ready {
        Ok(())
    } else {
        Err(format!("{} {name:?} is not Ready", store_kind.as_str()))
    }
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

/// SecretsReady=False / ClusterSecretStoreUnsupported when `store` is a ClusterSecretStore and
/// the operator watches one namespace (`namespaced`).
fn unsupported_store(store: &SecretStoreRef, namespaced: bool) -> Option<Cond> {
    (store.kind == SecretStoreKind::ClusterSecretStore && namespaced).then(|| {
        Cond::false_(
            kind::SECRETS_READY,
            reason::CLUSTER_SECRET_STORE_UNSUPPORTED,
            format!(
                "spec.secretStoreRef: ClusterSecretStore {:?} cannot be used while the operator watches one namespace; select a SecretStore",
                store.name
            ),
        )
    })
}

/// The credential Secrets `cinder` needs, in the order they are waited for: the database, the
/// service-user and the messaging Secret (`None` while spec.messaging names neither clusterRef
/// nor secretRef).
fn needed(cinder: &Cinder) -> [Option<Needed<'_>>; 3] {
    let ns = cinder.metadata.namespace.clone().unwrap_or_default();
    let db = &cinder.spec.database.secret_ref;
    let su = &cinder.spec.service_user.secret_ref;
    let su_key = su.key.as_deref().unwrap_or(SERVICE_USER_PASSWORD_KEY);
    [
        Some(Needed {
            namespace: ns.clone(),
            name: db.name.clone(),
            keys: DB_KEYS.to_vec(),
            reason: reason::WAITING_FOR_DB_CREDENTIALS,
            what: "the database credentials",
            hashed: None,
        }),
        Some(Needed {
            namespace: ns,
            name: su.name.clone(),
            keys: vec![su_key],
            reason: reason::WAITING_FOR_SERVICE_USER_CREDENTIALS,
            what: "the service-user credentials",
            hashed: Some(su_key),
        }),
        messaging_secret(cinder).map(|(namespace, name)| Needed {
            namespace,
            name,
            keys: MESSAGING_KEYS.to_vec(),
            reason: reason::WAITING_FOR_MESSAGING_CREDENTIALS,
            what: "the messaging credentials",
            hashed: None,
        }),
    ]
}

/// Runs the step once for one Cinder.
pub(crate) async fn run(op: Arc<OperatorContext>, ctx: &mut StepContext) -> StepResult {
    let cinder = ctx.cinder.clone();
    let ns = ctx.namespace().to_string();
    let store = &cinder.spec.secret_store_ref;
    let requeue = |ctx: &mut StepContext, c: Cond| ctx.requeue(c, REQUEUE_SECRET_POLLING);

    if let Some(c) = unsupported_store(store, op.namespace.is_some()) {
        return requeue(ctx, c);
    }
    let store_ready = store_ready(
        &op.client,
        ctx.management_reads(),
        &ns,
        store.kind,
        &store.name,
    )
    .await
    .doing("reading the secret store")?;
    if let Err(why) = store_ready {
        let c = Cond::false_(kind::SECRETS_READY, reason::SECRET_STORE_NOT_READY, why);
        return requeue(ctx, c);
    }

    let mut password_hash = None;
    let mut password = None;
    for need in needed(&cinder) {
        let Some(need) = need else {
            let c = Cond::false_(
                kind::SECRETS_READY,
                reason::WAITING_FOR_MESSAGING_CREDENTIALS,
                "spec.messaging names neither clusterRef nor secretRef",
            );
            return requeue(ctx, c);
        };
        let read = credentials::read(
            &op.client,
            ctx.management_reads(),
            &need.namespace,
            &need.name,
            &need.keys,
            &[],
        );
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
    let delivered = oslo_config_literal(password.as_deref().unwrap_or_default());
    ensure_derived_secret(
        &op.client,
        ctx,
        &derived,
        SERVICE_USER_PASSWORD_KEY,
        &delivered,
    )
    .await?;
    ctx.artefacts.authtoken_hash = password_hash;
    ctx.proceed(Cond::true_(
        kind::SECRETS_READY,
        reason::SECRETS_AVAILABLE,
        "the secret store is Ready and the credential Secrets are present",
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crd::common::ClusterRef;
    use crate::kube_ext::resources::cluster_secret_store_resource;

    /// Namespace, name, keys, reason and hashed key of one [`Needed`].
    type Summary = (String, String, Vec<String>, &'static str, Option<String>);

    fn store(conditions: serde_json::Value) -> DynamicObject {
        let mut o = DynamicObject::new("openbao-cluster-store", &cluster_secret_store_resource());
        o.data = serde_json::json!({"status": {"conditions": conditions}});
        o
    }

    #[test]
    fn the_store_gates_on_its_ready_condition() {
        let kind = SecretStoreKind::ClusterSecretStore;
        assert_eq!(
            store_state(None, kind, "openbao-cluster-store"),
            Err("ClusterSecretStore \"openbao-cluster-store\" does not exist".to_string())
        );
        let not_ready = store(serde_json::json!([{"type": "Ready", "status": "False"}]));
        assert_eq!(
            store_state(Some(&not_ready), SecretStoreKind::SecretStore, "s"),
            Err("SecretStore \"s\" is not Ready".to_string())
        );
        let other = store(serde_json::json!([{"type": "Synced", "status": "True"}]));
        assert!(store_state(Some(&other), kind, "s").is_err());
        let ready = store(serde_json::json!([{"type": "Ready", "status": "True"}]));
        assert_eq!(store_state(Some(&ready), kind, "s"), Ok(()));
    }

    #[test]
    fn a_cluster_store_is_refused_only_while_one_namespace_is_watched() {
        let cluster = crate::test_fixtures::cinder().spec.secret_store_ref;
        assert_eq!(cluster.kind, SecretStoreKind::ClusterSecretStore);
        assert_eq!(unsupported_store(&cluster, false), None);
        let c = unsupported_store(&cluster, true).expect("refused");
        assert_eq!(
            (c.type_, c.status, c.reason),
            (
                kind::SECRETS_READY,
                false,
                reason::CLUSTER_SECRET_STORE_UNSUPPORTED
            )
        );
        assert!(
            c.message
                .starts_with("spec.secretStoreRef: ClusterSecretStore \"openbao-cluster-store\""),
            "{}",
            c.message
        );
        let namespaced = SecretStoreRef {
            kind: SecretStoreKind::SecretStore,
            name: "local".into(),
        };
        assert_eq!(unsupported_store(&namespaced, true), None);
    }

    #[test]
    fn the_messaging_secret_follows_secret_ref_or_the_cluster() {
        let mut c = crate::test_fixtures::cinder();
        assert_eq!(
            messaging_secret(&c),
            Some(("ns".to_string(), "q-default-user".to_string()))
        );
        c.spec.messaging.cluster_ref = Some(ClusterRef {
            name: "q".into(),
            namespace: Some("mq".into()),
        });
        assert_eq!(
            messaging_secret(&c),
            Some(("mq".to_string(), "q-default-user".to_string()))
        );
        c.spec.messaging.secret_ref =
            Some(serde_json::from_value(serde_json::json!({"name": "amqp"})).unwrap());
        assert_eq!(
            messaging_secret(&c),
            Some(("ns".to_string(), "amqp".to_string())),
            "secretRef wins"
        );
        c.spec.messaging.secret_ref = None;
        c.spec.messaging.cluster_ref = None;
        assert_eq!(messaging_secret(&c), None);
    }

    #[test]
    fn the_credential_secrets_are_waited_for_in_order_each_under_its_reason() {
        let mut c = crate::test_fixtures::cinder();
        let summary = |c: &Cinder| -> Vec<Option<Summary>> {
            needed(c)
                .into_iter()
                .map(|n| {
                    n.map(|n| {
                        (
                            n.namespace,
                            n.name,
                            n.keys.iter().map(|k| k.to_string()).collect(),
                            n.reason,
                            n.hashed.map(str::to_string),
                        )
                    })
                })
                .collect()
        };
        let keys = |ks: &[&str]| ks.iter().map(|k| k.to_string()).collect::<Vec<_>>();
        assert_eq!(
            summary(&c),
            [
                Some((
                    "ns".into(),
                    "d".into(),
                    keys(&["username", "password"]),
                    reason::WAITING_FOR_DB_CREDENTIALS,
                    None
                )),
                Some((
                    "ns".into(),
                    "s".into(),
                    keys(&["password"]),
                    reason::WAITING_FOR_SERVICE_USER_CREDENTIALS,
                    Some("password".into())
                )),
                Some((
                    "ns".into(),
                    "q-default-user".into(),
                    keys(&["username", "password", "host"]),
                    reason::WAITING_FOR_MESSAGING_CREDENTIALS,
                    None
                )),
            ]
        );
        c.spec.service_user.secret_ref.key = Some("pw".into());
        c.spec.messaging.cluster_ref = None;
        let changed = summary(&c);
        assert_eq!(changed[1].as_ref().unwrap().2, keys(&["pw"]));
        assert_eq!(changed[1].as_ref().unwrap().4.as_deref(), Some("pw"));
        assert_eq!(changed[2], None, "spec.messaging names no Secret");
    }

    #[test]
    fn a_missing_secret_is_waited_for_by_name() {
        let c = waiting(
            reason::WAITING_FOR_SERVICE_USER_CREDENTIALS,
            "the service-user credentials",
            &Missing::Keys("s".into(), vec!["password".into()]),
        );
        assert_eq!(
            (c.type_, c.status, c.reason),
            (
                kind::SECRETS_READY,
                false,
                reason::WAITING_FOR_SERVICE_USER_CREDENTIALS
            )
        );
        assert_eq!(
            c.message,
            "waiting for the service-user credentials: Secret \"s\" lacks key(s) password"
        );
    }
}
