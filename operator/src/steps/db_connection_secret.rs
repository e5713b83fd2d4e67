//! The DBConnectionSecret step: materializes the pymysql DSN (rendered by
//! [`crate::planning::connection_urls`]) into the derived
//! `{name}-db-connection` Secret (key `connection`) and digests it into the
//! `cinder.c5c3.io/db-connection-hash` artefact. Reports through SecretsReady.

use super::children::ensure_derived_secret;
use super::credentials;
use super::env::StepEnv;
use super::secrets::DB_KEYS;
use crate::conditions::{Cond, kind, reason};
use crate::crd::Cinder;
use crate::names;
use crate::pipeline::{Doing, StepContext, StepResult};
use crate::planning::connection_urls::{DB_CONNECTION_KEY, DbEndpoint, database_port, pymysql_dsn};
use crate::requeue::REQUEUE_SECRET_POLLING;

/// The database host and port of `cinder`: the managed cluster's Service
/// (`{cluster}.{namespace}.svc`) or the brownfield `host`, on the port
/// [`database_port`] derives from `spec.database.port` (3306 when unset), the port the
/// NetworkPolicy's egress opens.
pub fn database_endpoint(cinder: &Cinder) -> DbEndpoint {
    let ns = cinder.metadata.namespace.clone().unwrap_or_default();
    let db = &cinder.spec.database;
    let host = match (&db.cluster_ref, &db.host) {
        (Some(c), _) => format!("{}.{}.svc", c.name, c.namespace.as_deref().unwrap_or(&ns)),
        (None, Some(h)) => h.clone(),
        (None, None) => String::new(),
    };
    DbEndpoint {
        host,
        port: database_port(db.port),
        database: db.database.clone(),
    }
}

/// Runs the step once for one Cinder.
pub async fn run(env: StepEnv, ctx: &mut StepContext) -> StepResult {
    let children = ctx.children(&env.client);
    let cinder = ctx.cinder.clone();
    let ns = ctx.namespace().to_string();
    let db = &cinder.spec.database;
    let values = match credentials::read(&env.client, &ns, &db.secret_ref.name, &DB_KEYS, &[])
        .await
        .doing("reading the database Secret")?
    {
        Err(m) => {
            let c = Cond::false_(
                kind::SECRETS_READY,
                reason::WAITING_FOR_DB_CREDENTIALS,
                format!("waiting for the database credentials: {m}"),
            );
            return ctx.requeue(c, REQUEUE_SECRET_POLLING);
        }
        Ok(v) => v,
    };
    let dsn = match pymysql_dsn(
        &database_endpoint(&cinder),
        values.get("username").unwrap_or_default(),
        values.get("password").unwrap_or_default(),
    ) {
        Ok(dsn) => dsn,
        Err(e) => {
            let c = Cond::false_(
                kind::SECRETS_READY,
                reason::WAITING_FOR_DB_CREDENTIALS,
                format!(
                    "waiting for usable database credentials in Secret {:?}: {e}",
                    db.secret_ref.name
                ),
            );
            return ctx.requeue(c, REQUEUE_SECRET_POLLING);
        }
    };
    let digest = dsn.digest();
    let name = names::db_connection_secret(ctx.name());
    let written = ensure_derived_secret(&children, &cinder, &name, DB_CONNECTION_KEY, dsn.expose());
    written.await.doing(format_args!("writing Secret {name}"))?;
    ctx.artefacts.db_connection_hash = Some(digest);
    ctx.proceed(Cond::true_(
        kind::SECRETS_READY,
        reason::SECRETS_AVAILABLE,
        format!("database connection materialized in Secret {name}"),
    ))
}
