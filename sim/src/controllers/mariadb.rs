//! The simulated mariadb-operator: MariaDB clusters become Ready after the delay unless the
//! config holds them not ready; Database, User and Grant get the operator's finalizer, become
//! Ready once their spec.mariaDbRef MariaDB exists and is Ready, and when deleted keep that
//! finalizer for `finalizer_delay` before releasing it (so a deleting client sees them live).
//! With a real server in the config ([`super::config::MariaDbConfig::real`]) they are
//! reconciled against it instead (`mariadb_real.rs`).

use std::sync::Arc;
use std::time::Duration;

use kube::ResourceExt;
use kube::api::DynamicObject;
use kube::runtime::controller::Action;
use serde_json::{Value, json};

use super::dynamic::{api_for, run as run_dynamic, set_finalizers, spec_str, status_of, timer_key};
use super::kinds::{self, Kind};
use super::mariadb_real;
use super::runtime::{FirstSeen, ReconcileError, Shared, patch_status};
use super::status::{Wanted, already_applied, condition_status, conditions};

/// How often an object waiting on its MariaDB looks again.
const WAIT_POLL: Duration = Duration::from_millis(500);
/// How often an object on a real server is applied again (a changed Secret, a dropped user, a
/// server that went away).
const REAL_POLL: Duration = Duration::from_secs(5);
/// How soon an object the real server refused is tried again.
const REAL_RETRY: Duration = Duration::from_secs(2);

struct Context {
    shared: Arc<Shared>,
    kind: Kind,
    seen: FirstSeen,
}

/// The finalizer mariadb-operator puts on a Database, User or Grant.
pub fn finalizer_for(kind: Kind) -> String {
    format!(
        "{}.k8s.mariadb.com/finalizer",
        kind.kind.to_ascii_lowercase()
    )
}

/// Runs the MariaDB controller and the Database, User and Grant controllers until aborted.
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
            "mariadb",
            Arc::clone(&shared),
            kinds::MARIADB,
            context(kinds::MARIADB),
            reconcile_cluster
        ),
        run_dynamic(
            "mariadb-databases",
            Arc::clone(&shared),
            kinds::DATABASE,
            context(kinds::DATABASE),
            reconcile_sql
        ),
        run_dynamic(
            "mariadb-users",
            Arc::clone(&shared),
            kinds::USER,
            context(kinds::USER),
            reconcile_sql
        ),
        run_dynamic(
            "mariadb-grants",
            Arc::clone(&shared),
            kinds::GRANT,
            context(kinds::GRANT),
            reconcile_sql
        ),
    );
}

/// The status of a MariaDB cluster.
pub fn cluster_status(name: &str, ready: bool, previous: Option<&Value>, generation: i64) -> Value {
    let wanted = if ready {
        Wanted::new("Ready", true, "StatefulSetReady", "Running")
    } else {
        Wanted::new("Ready", false, "StatefulSetNotReady", "Not ready")
    };
    json!({
        "conditions": conditions(previous.and_then(|s| s.get("conditions")), &[wanted], Some(generation)),
        "currentPrimary": format!("{name}-0"),
        "currentPrimaryPodIndex": 0,
    })
}

/// The status of a MariaDB cluster that is the real server: Ready when it answered.
fn real_cluster_status(
    name: &str,
    outcome: &Result<(), String>,
    previous: Option<&Value>,
    generation: i64,
) -> Value {
    let wanted = match outcome {
        Ok(()) => Wanted::new("Ready", true, "StatefulSetReady", "Running"),
        Err(e) => Wanted::new("Ready", false, "StatefulSetNotReady", e),
    };
    json!({
        "conditions": conditions(previous.and_then(|s| s.get("conditions")), &[wanted], Some(generation)),
        "currentPrimary": format!("{name}-0"),
        "currentPrimaryPodIndex": 0,
    })
}

async fn reconcile_cluster(
    object: Arc<DynamicObject>,
    ctx: Arc<Context>,
) -> Result<Action, ReconcileError> {
    let namespace = object.namespace();
    let name = object.name_any();
    let (switch, held) = ctx.shared.read(|c| {
        (
            c.mariadb.switch.clone(),
            c.mariadb.not_ready.matches(namespace.as_deref(), &name),
        )
    });
    if !switch.enabled || object.metadata.deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }
    let generation = object.metadata.generation.unwrap_or(1);
    if let Some(server) = ctx.shared.read(|c| c.mariadb.real.clone()) {
        let outcome = mariadb_real::serve_cluster(
            &server,
            &ctx.shared.client,
            namespace.as_deref().unwrap_or("default"),
            &name,
        )
        .await;
        let previous = status_of(&object);
        let status = real_cluster_status(&name, &outcome, previous, generation);
        if !already_applied(&status, previous) {
            patch_status(
                &api_for(&ctx.shared, ctx.kind, namespace.as_deref()),
                &name,
                status,
            )
            .await?;
        }
        return Ok(Action::requeue(if outcome.is_ok() {
            REAL_POLL
        } else {
            REAL_RETRY
        }));
    }
    let wait = if held {
        None
    } else {
        ctx.seen.remaining(&timer_key(&object), 0, switch.delay)
    };
    let ready = !held && wait.is_none();
    let previous = status_of(&object);
    let status = cluster_status(&name, ready, previous, generation);
    if !already_applied(&status, previous) {
        patch_status(
            &api_for(&ctx.shared, ctx.kind, namespace.as_deref()),
            &name,
            status,
        )
        .await?;
    }
    Ok(wait.map_or_else(Action::await_change, Action::requeue))
}

/// The status of a Database, User or Grant.
pub fn sql_status(
    kind: Kind,
    ready: bool,
    mariadb: &str,
    previous: Option<&Value>,
    generation: i64,
) -> Value {
    let created = format!("{} created", kind.kind);
    let waiting = format!("MariaDB {mariadb} not ready");
    let wanted = if ready {
        Wanted::new("Ready", true, "Created", &created)
    } else {
        Wanted::new("Ready", false, "MariaDBNotReady", &waiting)
    };
    json!({
        "conditions": conditions(previous.and_then(|s| s.get("conditions")), &[wanted], Some(generation)),
    })
}

/// The reason of a Database, User or Grant the real server refused.
const REAL_FAILED: &str = "Failed";

/// The status of a Database, User or Grant on the real server: Ready once applied, else the
/// reason and the server's (or the spec's) error.
fn real_sql_status(
    kind: Kind,
    outcome: &Result<(), (&str, String)>,
    previous: Option<&Value>,
    generation: i64,
) -> Value {
    let created = format!("{} created", kind.kind);
    let wanted = match outcome {
        Ok(()) => Wanted::new("Ready", true, "Created", &created),
        Err((reason, message)) => Wanted::new("Ready", false, reason, message),
    };
    json!({
        "conditions": conditions(previous.and_then(|s| s.get("conditions")), &[wanted], Some(generation)),
    })
}

async fn reconcile_sql(
    object: Arc<DynamicObject>,
    ctx: Arc<Context>,
) -> Result<Action, ReconcileError> {
    let namespace = object.namespace();
    let name = object.name_any();
    let (switch, finalizer_delay) = ctx
        .shared
        .read(|c| (c.mariadb.switch.clone(), c.mariadb.finalizer_delay));
    if !switch.enabled {
        return Ok(Action::await_change());
    }
    let api = api_for(&ctx.shared, ctx.kind, namespace.as_deref());
    let finalizer = finalizer_for(ctx.kind);
    let finalizers = object.finalizers().to_vec();
    if object.metadata.deletion_timestamp.is_some() {
        if !finalizers.contains(&finalizer) {
            return Ok(Action::await_change());
        }
        if let Some(server) = ctx.shared.read(|c| c.mariadb.real.clone()) {
            if let Err(error) = mariadb_real::remove(&server, ctx.kind, &object).await {
                tracing::warn!(kind = ctx.kind.kind, %name, %error, "dropping from the real MariaDB");
                return Ok(Action::requeue(REAL_RETRY));
            }
            let rest: Vec<String> = finalizers.into_iter().filter(|f| *f != finalizer).collect();
            set_finalizers(&api, &object, &rest).await?;
            return Ok(Action::await_change());
        }
        let key = format!("{}/delete", timer_key(&object));
        if let Some(left) = ctx.seen.remaining(&key, 0, finalizer_delay) {
            return Ok(Action::requeue(left));
        }
        let rest: Vec<String> = finalizers.into_iter().filter(|f| *f != finalizer).collect();
        set_finalizers(&api, &object, &rest).await?;
        ctx.seen.forget(&key);
        ctx.seen.forget(&timer_key(&object));
        return Ok(Action::await_change());
    }
    if !finalizers.contains(&finalizer) {
        let mut with_ours = finalizers;
        with_ours.push(finalizer);
        set_finalizers(&api, &object, &with_ours).await?;
        // The watch brings the updated object back for the status pass.
        return Ok(Action::await_change());
    }

    let mariadb_name = spec_str(&object, &["mariaDbRef", "name"])
        .unwrap_or_default()
        .to_owned();
    let mariadb_namespace = spec_str(&object, &["mariaDbRef", "namespace"])
        .map(str::to_owned)
        .or_else(|| namespace.clone());
    let mariadb_ready = if mariadb_name.is_empty() {
        false
    } else {
        api_for(&ctx.shared, kinds::MARIADB, mariadb_namespace.as_deref())
            .get_opt(&mariadb_name)
            .await?
            .is_some_and(|db| {
                condition_status(status_of(&db).and_then(|s| s.get("conditions")), "Ready")
                    == Some("True")
            })
    };
    let generation = object.metadata.generation.unwrap_or(1);
    if let Some(server) = ctx.shared.read(|c| c.mariadb.real.clone()) {
        let user_cap = ctx.shared.read(|c| c.mariadb.user_cap);
        let outcome = if mariadb_ready {
            mariadb_real::apply(&server, &ctx.shared.client, ctx.kind, &object, user_cap)
                .await
                .map_err(|e| (REAL_FAILED, e))
        } else {
            Err((
                "MariaDBNotReady",
                format!("MariaDB {mariadb_name} not ready"),
            ))
        };
        let previous = status_of(&object);
        let status = real_sql_status(ctx.kind, &outcome, previous, generation);
        if !already_applied(&status, previous) {
            patch_status(&api, &name, status).await?;
        }
        return Ok(Action::requeue(if outcome.is_ok() {
            REAL_POLL
        } else {
            REAL_RETRY
        }));
    }
    let wait = if mariadb_ready {
        ctx.seen.remaining(&timer_key(&object), 0, switch.delay)
    } else {
        Some(WAIT_POLL)
    };
    let ready = mariadb_ready && wait.is_none();
    let previous = status_of(&object);
    let status = sql_status(ctx.kind, ready, &mariadb_name, previous, generation);
    if !already_applied(&status, previous) {
        patch_status(&api, &name, status).await?;
    }
    // Keep looking while ready too: the MariaDB may go away or turn not ready.
    Ok(Action::requeue(wait.unwrap_or(WAIT_POLL.max(switch.delay))))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finalizers_follow_mariadb_operator_names() {
        assert_eq!(
            finalizer_for(kinds::DATABASE),
            "database.k8s.mariadb.com/finalizer"
        );
        assert_eq!(
            finalizer_for(kinds::GRANT),
            "grant.k8s.mariadb.com/finalizer"
        );
    }

    #[test]
    fn statuses_report_ready_condition() {
        let ready = cluster_status("db", true, None, 2);
        assert_eq!(
            condition_status(ready.get("conditions"), "Ready"),
            Some("True")
        );
        assert_eq!(ready["conditions"][0]["observedGeneration"], 2);
        assert_eq!(ready["currentPrimary"], "db-0");
        let waiting = sql_status(kinds::USER, false, "db", None, 1);
        assert_eq!(
            condition_status(waiting.get("conditions"), "Ready"),
            Some("False")
        );
        assert_eq!(waiting["conditions"][0]["reason"], "MariaDBNotReady");
        let created = sql_status(kinds::USER, true, "db", Some(&waiting), 1);
        assert_eq!(created["conditions"][0]["reason"], "Created");
    }
}
