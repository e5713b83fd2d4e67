//! The simulated external-secrets store validation: SecretStore and ClusterSecretStore become
//! Ready (reason Valid, capabilities ReadWrite) after the delay, or Ready=False
//! (ValidationFailed) when the config names them not ready.

use std::sync::Arc;

use kube::ResourceExt;
use kube::api::DynamicObject;
use kube::runtime::controller::Action;
use serde_json::{Value, json};

use super::dynamic::{api_for, run as run_dynamic, status_of, timer_key};
use super::kinds::{self, Kind};
use super::runtime::{FirstSeen, ReconcileError, Shared, patch_status};
use super::status::{Wanted, already_applied, conditions};

struct Context {
    shared: Arc<Shared>,
    kind: Kind,
    seen: FirstSeen,
}

/// Runs the SecretStore and ClusterSecretStore controllers until aborted.
pub async fn run(shared: Arc<Shared>) {
    let context = |kind| {
        Arc::new(Context {
            shared: Arc::clone(&shared),
            kind,
            seen: FirstSeen::default(),
        })
    };
    futures::join!(
        run_dynamic(
            "secret-stores",
            Arc::clone(&shared),
            kinds::SECRET_STORE,
            context(kinds::SECRET_STORE),
            reconcile
        ),
        run_dynamic(
            "cluster-secret-stores",
            Arc::clone(&shared),
            kinds::CLUSTER_SECRET_STORE,
            context(kinds::CLUSTER_SECRET_STORE),
            reconcile
        ),
    );
}

/// The status of a store that validated (or failed to).
pub fn store_status(valid: bool, previous: Option<&Value>) -> Value {
    let wanted = if valid {
        Wanted::new("Ready", true, "Valid", "store validated")
    } else {
        Wanted::new(
            "Ready",
            false,
            "ValidationFailed",
            "unable to validate store",
        )
    };
    json!({
        "capabilities": if valid { json!("ReadWrite") } else { Value::Null },
        "conditions": conditions(previous.and_then(|s| s.get("conditions")), &[wanted], None),
    })
}

async fn reconcile(store: Arc<DynamicObject>, ctx: Arc<Context>) -> Result<Action, ReconcileError> {
    let namespace = store.namespace();
    let name = store.name_any();
    let (switch, refused) = ctx.shared.read(|c| {
        (
            c.secret_stores.switch.clone(),
            c.secret_stores
                .not_ready
                .matches(namespace.as_deref(), &name),
        )
    });
    if !switch.enabled || store.metadata.deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }
    if let Some(left) = ctx.seen.remaining(&timer_key(&store), 0, switch.delay) {
        return Ok(Action::requeue(left));
    }
    let previous = status_of(&store);
    let status = store_status(!refused, previous);
    if !already_applied(&status, previous) {
        patch_status(
            &api_for(&ctx.shared, ctx.kind, namespace.as_deref()),
            &name,
            status,
        )
        .await?;
    }
    Ok(Action::await_change())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controllers::status::condition_status;

    #[test]
    fn store_status_flips_with_validity() {
        let valid = store_status(true, None);
        assert_eq!(
            condition_status(valid.get("conditions"), "Ready"),
            Some("True")
        );
        assert_eq!(valid["capabilities"], "ReadWrite");
        let invalid = store_status(false, Some(&valid));
        assert_eq!(
            condition_status(invalid.get("conditions"), "Ready"),
            Some("False")
        );
        assert_eq!(invalid["conditions"][0]["reason"], "ValidationFailed");
        assert!(!already_applied(&invalid, Some(&valid)));
    }
}
