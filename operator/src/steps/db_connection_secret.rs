//! The DBConnectionSecret step: materializes the pymysql DSN into the derived
//! `{name}-db-connection` Secret (key `connection`) and digests it into the
//! `cinder.c5c3.io/db-connection-hash` artefact. Reports through SecretsReady.

use super::StepEnv;
use super::children::{ensure_secret, secret};
use super::credentials;
use super::digest::sha256_hex;
use super::secrets::{DB_KEYS, api_error};
use crate::conditions::{Cond, kind, reason};
use crate::crd::Cinder;
use crate::names;
use crate::pipeline::{Step, StepContext, StepReport};
use crate::requeue::REQUEUE_SECRET_POLLING;
use futures::FutureExt;
use futures::future::BoxFuture;
use std::collections::BTreeMap;

/// The key of the DSN in `{name}-db-connection`.
pub const CONNECTION_KEY: &str = "connection";
/// The MariaDB port when none is given.
pub const DEFAULT_DB_PORT: i32 = 3306;

/// Percent-encodes everything outside RFC 3986 unreserved characters (user info, vhost).
pub fn url_encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The database host and port of `cinder`: the managed cluster's Service or the brownfield host.
pub fn database_endpoint(cinder: &Cinder) -> (String, i32) {
    let ns = cinder.metadata.namespace.clone().unwrap_or_default();
    let db = &cinder.spec.database;
    let host = match (&db.cluster_ref, &db.host) {
        (Some(c), _) => format!("{}.{}.svc", c.name, c.namespace.as_deref().unwrap_or(&ns)),
        (None, Some(h)) => h.clone(),
        (None, None) => String::new(),
    };
    (host, db.port.unwrap_or(DEFAULT_DB_PORT))
}

/// `mysql+pymysql://user:password@host:port/database?charset=utf8`.
pub fn pymysql_dsn(user: &str, password: &str, host: &str, port: i32, database: &str) -> String {
    format!(
        "mysql+pymysql://{}:{}@{host}:{port}/{database}?charset=utf8",
        url_encode(user),
        url_encode(password)
    )
}

/// The DBConnectionSecret step.
pub struct DbConnectionSecretStep {
    env: StepEnv,
}

impl DbConnectionSecretStep {
    pub fn new(env: StepEnv) -> Self {
        DbConnectionSecretStep { env }
    }
}

async fn run(env: StepEnv, ctx: StepContext) -> StepReport {
    let cinder = ctx.cinder.clone();
    let ns = ctx.namespace().to_string();
    let db = &cinder.spec.database;
    let values = match credentials::read(&env.client, &ns, &db.secret_ref.name, &DB_KEYS, &[]).await
    {
        Err(e) => return ctx.fail(api_error(&e), format!("reading the database Secret: {e}")),
        Ok(Err(m)) => {
            let c = Cond::false_(
                kind::SECRETS_READY,
                reason::WAITING_FOR_DB_CREDENTIALS,
                format!("waiting for the database credentials: {m}"),
            );
            return ctx.requeue(c, REQUEUE_SECRET_POLLING);
        }
        Ok(Ok(v)) => v,
    };
    let (host, port) = database_endpoint(&cinder);
    let dsn = pymysql_dsn(
        values.get("username").unwrap_or_default(),
        values.get("password").unwrap_or_default(),
        &host,
        port,
        &db.database,
    );
    let digest = sha256_hex(&dsn);
    let name = names::db_connection_secret(ctx.name());
    let data: BTreeMap<String, Vec<u8>> = [(CONNECTION_KEY.to_string(), dsn.into_bytes())].into();
    if let Err(e) = ensure_secret(&env.client, secret(&cinder, &name, &[], data, false)).await {
        return ctx.fail(api_error(&e), format!("writing Secret {name}: {e}"));
    }
    let mut ctx = ctx;
    ctx.artefacts.db_connection_hash = Some(digest);
    ctx.proceed(Cond::true_(
        kind::SECRETS_READY,
        reason::SECRETS_AVAILABLE,
        format!("database connection materialized in Secret {name}"),
    ))
}

impl Step for DbConnectionSecretStep {
    fn name(&self) -> &'static str {
        "DBConnectionSecret"
    }
    fn condition_type(&self) -> &'static str {
        kind::SECRETS_READY
    }
    fn run(&self, ctx: StepContext) -> BoxFuture<'static, StepReport> {
        run(self.env.clone(), ctx).boxed()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dsn_encodes_user_info() {
        assert_eq!(
            pymysql_dsn("cinder", "p@ss/w:rd", "db.ns.svc", 3306, "cinder"),
            "mysql+pymysql://cinder:p%40ss%2Fw%3Ard@db.ns.svc:3306/cinder?charset=utf8"
        );
    }
}
