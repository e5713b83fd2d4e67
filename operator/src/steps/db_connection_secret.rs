//! The DBConnectionSecret step: materializes the pymysql DSN (rendered by
//! [`crate::planning::connection_urls`]) into the derived
//! `{name}-db-connection` Secret (key `connection`) and digests it into the
//! `cinder.c5c3.io/db-connection-hash` artefact. Reports through SecretsReady.
//!
//! A database spec naming neither `clusterRef` nor `host` has no server to connect to: the
//! step refuses it (SecretsReady=False / InvalidSpec, the step's error) rather than wait for
//! credentials. The pass's spec validation refuses such a spec ahead of the steps; the step
//! does not rely on that.

use super::secrets::{DB_KEYS, materialized};
use crate::children::ensure_derived_secret;
use crate::conditions::{Cond, kind, reason};
use crate::context::OperatorContext;
use crate::crd::Cinder;
use crate::credentials::{self, Missing};
use crate::names;
use crate::pipeline::{Doing, StepContext, StepResult};
use crate::planning::connection_urls::{DB_CONNECTION_KEY, DbEndpoint, database_port, pymysql_dsn};
use crate::planning::digest::Sensitive;
use crate::planning::secret_data::SecretData;
use crate::requeue::REQUEUE_SECRET_POLLING;
use std::sync::Arc;

/// The database host and port of `cinder`: the managed cluster's Service
/// (`{cluster}.{namespace}.svc`) or the brownfield `host`, on the port
/// [`database_port`] derives from `spec.database.port` (3306 when unset), the port the
/// NetworkPolicy's egress opens. `Err` (naming the two fields) when the spec names neither.
pub(crate) fn database_endpoint(cinder: &Cinder) -> Result<DbEndpoint, String> {
    let ns = cinder.metadata.namespace.clone().unwrap_or_default();
    let db = &cinder.spec.database;
    let host = match (&db.cluster_ref, &db.host) {
        (Some(c), _) => format!("{}.{}.svc", c.name, c.namespace.as_deref().unwrap_or(&ns)),
        (None, Some(h)) => h.clone(),
        (None, None) => {
            return Err(
                "spec.database names no database server: set spec.database.clusterRef (a managed \
                 MariaDB) or spec.database.host (a server the operator does not manage)"
                    .to_string(),
            );
        }
    };
    Ok(DbEndpoint {
        host,
        port: database_port(db.port),
        database: db.database.clone(),
    })
}

/// SecretsReady=False / WaitingForDBCredentials with `message`.
fn waiting(message: String) -> Cond {
    Cond::false_(
        kind::SECRETS_READY,
        reason::WAITING_FOR_DB_CREDENTIALS,
        message,
    )
}

/// The DSN to `endpoint` with the credentials of the database Secret `secret` (`read`: what
/// reading it came to), or the condition the step waits under.
fn connection(
    endpoint: &DbEndpoint,
    secret: &str,
    read: Result<SecretData, Missing>,
) -> Result<Sensitive, Cond> {
    let values = read.map_err(|m| waiting(format!("waiting for the database credentials: {m}")))?;
    pymysql_dsn(
        endpoint,
        values.get("username").unwrap_or_default(),
        values.get("password").unwrap_or_default(),
    )
    .map_err(|e| {
        waiting(format!(
            "waiting for usable database credentials in Secret {secret:?}: {e}"
        ))
    })
}

/// Runs the step once for one Cinder.
pub(crate) async fn run(op: Arc<OperatorContext>, ctx: &mut StepContext) -> StepResult {
    let cinder = ctx.cinder.clone();
    let ns = ctx.namespace().to_string();
    let endpoint = database_endpoint(&cinder).with_reason(reason::INVALID_SPEC)?;
    let secret = &cinder.spec.database.secret_ref.name;
    let read = credentials::read(
        &op.client,
        ctx.management_reads(),
        &ns,
        secret,
        &DB_KEYS,
        &[],
    )
    .await
    .doing("reading the database Secret")?;
    let dsn = match connection(&endpoint, secret, read) {
        Ok(dsn) => dsn,
        Err(c) => return ctx.requeue(c, REQUEUE_SECRET_POLLING),
    };
    let name = names::db_connection_secret(ctx.name());
    ensure_derived_secret(&op.client, ctx, &name, DB_CONNECTION_KEY, dsn.expose()).await?;
    ctx.artefacts.db_connection_hash = Some(dsn.digest());
    ctx.proceed(materialized("database connection", &name))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crd::common::ClusterRef;
    use crate::pipeline::StepError;

    fn credentials(username: &str, password: &str) -> Result<SecretData, Missing> {
        let mut values = SecretData::from(std::collections::BTreeMap::new());
        values.insert("username", username.to_string());
        values.insert("password", password.to_string());
        Ok(values)
    }

    #[test]
    fn a_managed_cluster_is_reached_through_its_service() {
        let mut c = crate::test_fixtures::cinder();
        let e = database_endpoint(&c).unwrap();
        assert_eq!(
            (e.host.as_str(), e.port, e.database.as_str()),
            ("m.ns.svc", 3306, "cinder")
        );
        c.spec.database.cluster_ref = Some(ClusterRef {
            name: "m".into(),
            namespace: Some("db".into()),
        });
        assert_eq!(database_endpoint(&c).unwrap().host, "m.db.svc");
    }

    #[test]
    fn a_brownfield_server_is_reached_on_its_port() {
        let mut c = crate::test_fixtures::cinder();
        c.spec.database.cluster_ref = None;
        c.spec.database.host = Some("db.example".into());
        c.spec.database.port = Some(3307);
        let e = database_endpoint(&c).unwrap();
        assert_eq!((e.host.as_str(), e.port), ("db.example", 3307));
        // Outside 1-65535 (the schema's range): the default port.
        for port in [0, -1, 70000] {
            c.spec.database.port = Some(port);
            assert_eq!(database_endpoint(&c).unwrap().port, 3306, "port {port}");
        }
    }

    #[test]
    fn a_database_spec_naming_no_server_is_refused_not_waited_for() {
        let mut c = crate::test_fixtures::cinder();
        c.spec.database.cluster_ref = None;
        c.spec.database.host = None;
        let error: StepError = database_endpoint(&c)
            .with_reason(reason::INVALID_SPEC)
            .unwrap_err();
        assert_eq!(error.reason(), "InvalidSpec");
        let message = error.to_string();
        assert!(
            message.contains("spec.database.clusterRef") && message.contains("spec.database.host"),
            "{message}"
        );
    }

    #[test]
    fn the_dsn_carries_the_secret_credentials() {
        let endpoint = database_endpoint(&crate::test_fixtures::cinder()).unwrap();
        let dsn = connection(&endpoint, "d", credentials("cinder", "p@ss")).unwrap();
        assert_eq!(
            dsn.expose(),
            "mysql+pymysql://cinder:p%40ss@m.ns.svc:3306/cinder?charset=utf8"
        );
    }

    #[test]
    fn missing_or_unusable_credentials_are_waited_for() {
        let endpoint = database_endpoint(&crate::test_fixtures::cinder()).unwrap();
        let missing = connection(&endpoint, "d", Err(Missing::Secret("d".into()))).unwrap_err();
        assert_eq!(
            (missing.type_, missing.status, missing.reason),
            (
                kind::SECRETS_READY,
                false,
                reason::WAITING_FOR_DB_CREDENTIALS
            )
        );
        assert_eq!(
            missing.message,
            "waiting for the database credentials: Secret \"d\" does not exist"
        );
        let unusable = connection(&endpoint, "d", credentials("cinder", "a\nb")).unwrap_err();
        assert_eq!(unusable.reason, reason::WAITING_FOR_DB_CREDENTIALS);
        assert_eq!(
            unusable.message,
            "waiting for usable database credentials in Secret \"d\": credential field password is carrying a control character"
        );
    }
}
