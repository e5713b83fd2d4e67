//! The satellite status both kinds share: CredentialsReady, ConfigProjected and their own
//! aggregate Ready, computed from what the reconcile observed, and written through the
//! satellite's backend actor (an UpsertBackend lock on its id held across the status write), so
//! each satellite has a single writer of its status.

use crate::conditions::{self, Cond, kind, reason};
use crate::crd::SatelliteStatus;
use cinder_actors::CoordinatorHandle;
use cinder_actors::query::{delete_backend, query, upsert_backend};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

/// What a satellite reconcile observed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Credentials {
    /// The spec fails a check the schema states (message names the field).
    InvalidSpec(String),
    /// The parent Cinder does not exist.
    NoParent(String),
    /// The parent names a target cluster that is not registered.
    TargetClusterUnavailable(String),
    /// The key Secret is missing or lacks its key.
    Waiting(String),
    /// Credentials present (or none needed).
    Ready(String),
}

/// The conditions for `credentials` and whether the parent projects this satellite.
pub(crate) fn conditions_for(credentials: &Credentials, projected: bool) -> Vec<Cond> {
    let (ready, why, message) = match credentials {
        Credentials::InvalidSpec(m) => (false, reason::INVALID_SPEC, m),
        Credentials::NoParent(m) => (false, reason::WAITING_FOR_PARENT, m),
        Credentials::TargetClusterUnavailable(m) => (false, reason::TARGET_CLUSTER_UNAVAILABLE, m),
        Credentials::Waiting(m) => (false, reason::WAITING_FOR_CREDENTIALS, m),
        Credentials::Ready(m) => (true, reason::CREDENTIALS_AVAILABLE, m),
    };
    let creds = Cond::new(kind::CREDENTIALS_READY, ready, why, message.clone());
    let projection = if projected {
        Cond::true_(
            kind::CONFIG_PROJECTED,
            reason::PROJECTED,
            "a Deployment of the parent Cinder mounts this satellite's configuration",
        )
    } else {
        Cond::false_(
            kind::CONFIG_PROJECTED,
            reason::WAITING_FOR_PROJECTION,
            "no Deployment of the parent Cinder mounts this satellite's configuration yet",
        )
    };
    let ready = if creds.status && projection.status {
        Cond::true_(
            kind::READY,
            reason::ALL_READY,
            "credentials ready and configuration projected",
        )
    } else {
        let mut not = Vec::new();
        if !creds.status {
            not.push(kind::CREDENTIALS_READY);
        }
        if !projection.status {
            not.push(kind::CONFIG_PROJECTED);
        }
        Cond::false_(
            kind::READY,
            reason::NOT_ALL_READY,
            format!("not ready: {}", not.join(", ")),
        )
    };
    vec![creds, projection, ready]
}

/// `current` with `conds` set and observedGeneration stamped.
pub(crate) fn next_status(
    current: Option<&SatelliteStatus>,
    conds: &[Cond],
    generation: Option<i64>,
) -> SatelliteStatus {
    let now = Time(k8s_openapi::jiff::Timestamp::now());
    let mut status = current.cloned().unwrap_or_default();
    for c in conds {
        conditions::set_condition(&mut status.conditions, c, generation, &now);
    }
    status.observed_generation = generation;
    status
}

/// The backend-actor id of a satellite: `<Kind>/<namespace>/<name>`.
pub(crate) fn actor_id(kind: &str, namespace: &str, name: &str) -> String {
    format!("{kind}/{namespace}/{name}")
}

/// Runs `write` while holding the UpsertBackend lock on the satellite's backend actor, then
/// (when the write succeeded) commits `value` — the satellite's summary, never a secret — as the
/// actor's value, so the actor stays and the admin `/actors` view shows it.
pub(crate) async fn write_through_actor<F, T>(
    coordinator: &CoordinatorHandle,
    id: &str,
    value: serde_json::Value,
    write: F,
) -> anyhow::Result<T>
where
    F: std::future::Future<Output = Result<T, kube::Error>>,
{
    let locked = coordinator
        .lock(vec![query([upsert_backend(id, "", "")])])
        .await
        .map_err(|e| anyhow::anyhow!("locking backend actor {id}: {e}"))?;
    let result = write.await;
    let committed = match &result {
        Ok(_) => locked.results()[0]
            .backend
            .upsert(value)
            .await
            .map_err(|e| anyhow::anyhow!("committing backend actor {id}: {e}")),
        Err(_) => Ok(()),
    };
    locked.unlock().await;
    let out = result?;
    committed?;
    Ok(out)
}

/// Deletes the satellite's backend actor (the satellite is leaving).
pub(crate) async fn forget_actor(coordinator: &CoordinatorHandle, id: &str) -> anyhow::Result<()> {
    let locked = coordinator
        .lock(vec![query([delete_backend(id)])])
        .await
        .map_err(|e| anyhow::anyhow!("locking backend actor {id}: {e}"))?;
    let backend = &locked.results()[0].backend;
    let deleted = match backend.read {
        Some(_) => backend
            .delete()
            .await
            .map_err(|e| anyhow::anyhow!("deleting backend actor {id}: {e}")),
        None => Ok(()),
    };
    locked.unlock().await;
    deleted
}

/// The value a satellite's backend actor holds: what the satellite is and how it reports.
pub(crate) fn actor_value(
    kind: &str,
    namespace: &str,
    name: &str,
    parent: &str,
    backend_type: &str,
    status: &SatelliteStatus,
) -> serde_json::Value {
    let conditions: serde_json::Map<String, serde_json::Value> = status
        .conditions
        .iter()
        .map(|c| {
            (
                c.type_.clone(),
                serde_json::json!({"status": c.status, "reason": c.reason}),
            )
        })
        .collect();
    serde_json::json!({
        "kind": kind,
        "namespace": namespace,
        "name": name,
        "cinder": parent,
        "type": backend_type,
        "observedGeneration": status.observed_generation,
        "conditions": conditions,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ready_needs_credentials_and_projection() {
        let c = conditions_for(&Credentials::Ready("ok".into()), true);
        assert!(c.iter().all(|c| c.status));
        let c = conditions_for(&Credentials::NoParent("gone".into()), false);
        assert_eq!(c[0].reason, reason::WAITING_FOR_PARENT);
        assert!(!c[2].status);
        assert!(c[2].message.contains("CredentialsReady"));
    }
}
