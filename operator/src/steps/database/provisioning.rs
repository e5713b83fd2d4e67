//! The shared provisioning flow of the Database step: the MariaDB cluster gate
//! (spec.database.clusterRef must name a Ready MariaDB) and, in managed mode, the
//! mariadb-operator Database, User (max_user_connections sized by
//! [`crate::planning::connection_cap`], password from the database Secret) and Grant, each
//! owned by the Cinder and named after it. Brownfield (spec.database.host) provisions nothing.

use crate::children::management_child_meta;
use crate::conditions::{Cond, kind, reason};
use crate::crd::Cinder;
use crate::credentials;
use crate::kube_ext::ApiErrorExt;
use crate::kube_ext::create_if_absent;
use crate::kube_ext::reader::ClusterStores;
use crate::kube_ext::resources::mariadb_resource;
use crate::steps::secrets::DB_KEYS;
use kube::api::{ApiResource, DynamicObject, Patch, PatchParams};
use kube::core::GroupVersionKind;
use kube::{Api, Client};
use serde_json::{Value, json};

/// The mariadb-operator group and version.
pub(crate) const MARIADB_GROUP: &str = "k8s.mariadb.com";
pub(crate) const MARIADB_VERSION: &str = "v1alpha1";

/// The three kinds the step provisions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SqlKind {
    Database,
    User,
    Grant,
}

impl SqlKind {
    pub(crate) const ALL: [SqlKind; 3] = [SqlKind::Database, SqlKind::User, SqlKind::Grant];

    pub(crate) fn as_str(self) -> &'static str {
        match self {
            SqlKind::Database => "Database",
            SqlKind::User => "User",
            SqlKind::Grant => "Grant",
        }
    }

    /// The API resource of this kind.
    pub(crate) fn resource(self) -> ApiResource {
        let plural = match self {
            SqlKind::Database => "databases",
            SqlKind::User => "users",
            SqlKind::Grant => "grants",
        };
        ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk(MARIADB_GROUP, MARIADB_VERSION, self.as_str()),
            plural,
        )
    }
}

/// The name of the Cinder's Database, User and Grant objects (the Cinder's own name).
pub(crate) fn sql_object_name(cinder: &str) -> String {
    cinder.to_string()
}

/// The spec of each kind for `cinder` with SQL user `username` and connection cap `cap`.
pub(crate) fn sql_spec(cinder: &Cinder, kind: SqlKind, username: &str, cap: i64) -> Value {
    let ns = cinder.metadata.namespace.clone().unwrap_or_default();
    let db = &cinder.spec.database;
    let mariadb_ref = match &db.cluster_ref {
        Some(c) => json!({"name": c.name, "namespace": c.namespace.clone().unwrap_or(ns)}),
        None => json!({}),
    };
    match kind {
        SqlKind::Database => json!({
            "mariaDbRef": mariadb_ref,
            "name": db.database,
            "characterSet": "utf8mb4",
            "collate": "utf8mb4_general_ci",
        }),
        SqlKind::User => json!({
            "mariaDbRef": mariadb_ref,
            "name": username,
            "host": "%",
            "maxUserConnections": cap,
            "passwordSecretKeyRef": {"name": db.secret_ref.name, "key": "password"},
        }),
        SqlKind::Grant => json!({
            "mariaDbRef": mariadb_ref,
            "privileges": ["ALL PRIVILEGES"],
            "database": db.database,
            "table": "*",
            "username": username,
            "host": "%",
            "grantOption": false,
        }),
    }
}

/// Whether `obj`'s `status.conditions` has Ready=True.
pub(crate) fn is_ready(obj: &DynamicObject) -> bool {
    obj.data
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .and_then(|cs| cs.iter().find(|c| c["type"] == "Ready"))
        .is_some_and(|c| c["status"] == "True")
}

/// Whether every key of `desired` has that value in `existing`.
pub(crate) fn spec_matches(existing: Option<&Value>, desired: &Value) -> bool {
    existing.is_some_and(|existing| desired.is_object() && contains(existing, desired))
}

/// Whether `existing` holds every field of `desired` with its value (objects compared field by
/// field, so fields the API server or the other operator defaulted do not count as a change:
/// the merge patch of `desired` would change nothing).
fn contains(existing: &Value, desired: &Value) -> bool {
    match (existing, desired) {
        (Value::Object(have), Value::Object(want)) => want
            .iter()
            .all(|(k, v)| have.get(k).is_some_and(|h| contains(h, v))),
        _ => existing == desired,
    }
}

/// How the gate and provisioning ended.
#[derive(Debug)]
pub(crate) enum Provisioned {
    /// Managed objects Ready (or brownfield): go on.
    Ready,
    /// Not yet: report this condition; `created` tells whether anything was just created.
    Waiting { condition: Cond, created: bool },
}

fn waiting(reason: &'static str, message: String, created: bool) -> Provisioned {
    Provisioned::Waiting {
        condition: Cond::false_(kind::DATABASE_READY, reason, message),
        created,
    }
}

/// Runs the MariaDB gate and ensures Database, User and Grant with connection cap `cap`.
pub(crate) async fn provision(
    client: &Client,
    reads: &ClusterStores,
    cinder: &Cinder,
    cap: i64,
) -> Result<Provisioned, kube::Error> {
    let ns = cinder.metadata.namespace.clone().unwrap_or_default();
    let name = cinder.metadata.name.clone().unwrap_or_default();
    let db = &cinder.spec.database;
    let Some(cluster) = &db.cluster_ref else {
        // Brownfield: the database exists outside the operator's management.
        return Ok(Provisioned::Ready);
    };
    let cluster_ns = cluster.namespace.clone().unwrap_or_else(|| ns.clone());
    let mariadbs: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), &cluster_ns, &mariadb_resource());
    let found = match reads.get_opt(&mariadbs, &cluster.name).await {
        Ok(found) => found,
        // The mariadb-operator CRDs are not installed.
        Err(e) if e.is_not_found() => None,
        Err(e) => return Err(e),
    };
    match found {
        None => {
            return Ok(waiting(
                reason::CLUSTER_NOT_READY,
                format!("MariaDB {cluster_ns}/{} does not exist", cluster.name),
                false,
            ));
        }
        Some(m) if !is_ready(&m) => {
            return Ok(waiting(
                reason::CLUSTER_NOT_READY,
                format!("MariaDB {cluster_ns}/{} is not Ready", cluster.name),
                false,
            ));
        }
        Some(_) => {}
    }

    let username =
        match credentials::read(client, reads, &ns, &db.secret_ref.name, &DB_KEYS, &[]).await? {
            Ok(values) => values.get("username").unwrap_or_default().to_string(),
            Err(missing) => {
                return Ok(waiting(
                    reason::WAITING_FOR_DATABASE,
                    format!("waiting for the database credentials: {missing}"),
                    false,
                ));
            }
        };

    let object_name = sql_object_name(&name);
    let mut created = false;
    let mut not_ready = Vec::new();
    for kind in SqlKind::ALL {
        let ar = kind.resource();
        let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), &ns, &ar);
        let spec = sql_spec(cinder, kind, &username, cap);
        match reads.get_opt(&api, &object_name).await? {
            None => {
                let mut obj = DynamicObject::new(&object_name, &ar).data(json!({ "spec": spec }));
                obj.metadata = management_child_meta(cinder, &object_name, &[]);
                create_if_absent(&api, &obj).await?;
                created = true;
                not_ready.push(kind.as_str());
            }
            Some(existing) => {
                if !spec_matches(existing.data.get("spec"), &spec) {
                    api.patch(
                        &object_name,
                        &PatchParams::default(),
                        &Patch::Merge(&json!({ "spec": spec })),
                    )
                    .await?;
                }
                if !is_ready(&existing) {
                    not_ready.push(kind.as_str());
                }
            }
        }
    }
    if not_ready.is_empty() {
        Ok(Provisioned::Ready)
    } else {
        Ok(waiting(
            reason::WAITING_FOR_DATABASE,
            format!(
                "waiting for MariaDB {} {object_name} to become Ready",
                not_ready.join(", ")
            ),
            created,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cinder() -> Cinder {
        crate::test_fixtures::cinder_named("ns", "c")
    }

    #[test]
    fn defaulted_fields_of_the_live_spec_are_no_change() {
        let desired = json!({"mariaDbRef": {"name": "m", "namespace": "ns"}, "host": "%"});
        let live = json!({"mariaDbRef": {"name": "m", "namespace": "ns", "waitForIt": true}, "host": "%", "cleanupPolicy": "Delete"});
        assert!(spec_matches(Some(&live), &desired));
        let changed = json!({"mariaDbRef": {"name": "other", "namespace": "ns"}, "host": "%"});
        assert!(!spec_matches(Some(&live), &changed));
        assert!(!spec_matches(None, &desired));
    }

    #[test]
    fn user_carries_the_cap_and_the_password_reference() {
        let u = sql_spec(&cinder(), SqlKind::User, "cinder", 22);
        assert_eq!(u["maxUserConnections"], 22);
        assert_eq!(
            u["passwordSecretKeyRef"],
            json!({"name": "d", "key": "password"})
        );
        assert_eq!(u["mariaDbRef"], json!({"name": "m", "namespace": "ns"}));
        let g = sql_spec(&cinder(), SqlKind::Grant, "cinder", 22);
        assert_eq!(
            (g["database"].as_str(), g["username"].as_str()),
            (Some("cinder"), Some("cinder"))
        );
        let d = sql_spec(&cinder(), SqlKind::Database, "cinder", 22);
        assert_eq!(d["name"], "cinder");
    }

    #[test]
    fn spec_comparison_ignores_defaults_the_server_added() {
        let desired = json!({"a": 1, "b": "x"});
        assert!(spec_matches(
            Some(&json!({"a": 1, "b": "x", "extra": true})),
            &desired
        ));
        assert!(!spec_matches(Some(&json!({"a": 2, "b": "x"})), &desired));
        assert!(!spec_matches(None, &desired));
    }

    #[test]
    fn readiness_reads_the_ready_condition() {
        let ar = SqlKind::User.resource();
        let mut o = DynamicObject::new("c", &ar);
        assert!(!is_ready(&o));
        o.data = json!({"status": {"conditions": [{"type": "Ready", "status": "True"}]}});
        assert!(is_ready(&o));
        o.data = json!({"status": {"conditions": [{"type": "Ready", "status": "False"}]}});
        assert!(!is_ready(&o));
    }
}
