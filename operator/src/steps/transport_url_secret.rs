//! The TransportURLSecret step: materializes the `rabbit://` URL into the derived
//! `{name}-transport-url` Secret (key `transport_url`), digests it into the
//! `cinder.c5c3.io/transport-url-hash` artefact and resolves the broker port the NetworkPolicy
//! member opens. Reports through SecretsReady.

use super::StepEnv;
use super::children::{ensure_secret, secret};
use super::credentials;
use super::db_connection_secret::url_encode;
use super::digest::sha256_hex;
use super::secrets::{MESSAGING_KEYS, MESSAGING_OPTIONAL_KEYS, api_error, messaging_secret};
use crate::conditions::{Cond, kind, reason};
use crate::names;
use crate::pipeline::{Step, StepContext, StepReport};
use crate::requeue::REQUEUE_SECRET_POLLING;
use futures::FutureExt;
use futures::future::BoxFuture;
use std::collections::BTreeMap;

/// The key of the URL in `{name}-transport-url`.
pub const TRANSPORT_URL_KEY: &str = "transport_url";
/// The AMQP port when the Secret names none.
pub const DEFAULT_BROKER_PORT: u16 = 5672;

/// `rabbit://user:password@host:port/vhost` (vhost percent-encoded; `/` when unset).
pub fn rabbit_url(
    user: &str,
    password: &str,
    host: &str,
    port: u16,
    vhost: Option<&str>,
) -> String {
    let vhost = match vhost {
        None | Some("/") | Some("") => String::new(),
        Some(v) => url_encode(v),
    };
    format!(
        "rabbit://{}:{}@{host}:{port}/{vhost}",
        url_encode(user),
        url_encode(password)
    )
}

/// The TransportURLSecret step.
pub struct TransportUrlSecretStep {
    env: StepEnv,
}

impl TransportUrlSecretStep {
    pub fn new(env: StepEnv) -> Self {
        TransportUrlSecretStep { env }
    }
}

fn waiting(ctx: StepContext, why: String) -> StepReport {
    let c = Cond::false_(
        kind::SECRETS_READY,
        reason::WAITING_FOR_MESSAGING_CREDENTIALS,
        format!("waiting for the messaging credentials: {why}"),
    );
    ctx.requeue(c, REQUEUE_SECRET_POLLING)
}

async fn run(env: StepEnv, ctx: StepContext) -> StepReport {
    let cinder = ctx.cinder.clone();
    let Some((msg_ns, msg_name)) = messaging_secret(&cinder) else {
        return waiting(
            ctx,
            "spec.messaging names neither clusterRef nor secretRef".into(),
        );
    };
    let values = match credentials::read(
        &env.client,
        &msg_ns,
        &msg_name,
        &MESSAGING_KEYS,
        &MESSAGING_OPTIONAL_KEYS,
    )
    .await
    {
        Err(e) => return ctx.fail(api_error(&e), format!("reading the messaging Secret: {e}")),
        Ok(Err(m)) => return waiting(ctx, m.to_string()),
        Ok(Ok(v)) => v,
    };
    let port = match values.get("port") {
        None => DEFAULT_BROKER_PORT,
        Some(p) => match p.trim().parse::<u16>() {
            Ok(p) if p > 0 => p,
            _ => {
                return waiting(
                    ctx,
                    format!("Secret {msg_name:?} key port is not a port number"),
                );
            }
        },
    };
    let url = rabbit_url(
        values.get("username").unwrap_or_default(),
        values.get("password").unwrap_or_default(),
        values.get("host").unwrap_or_default(),
        port,
        values.get("vhost"),
    );
    let digest = sha256_hex(&url);
    let name = names::transport_url_secret(ctx.name());
    let data: BTreeMap<String, Vec<u8>> =
        [(TRANSPORT_URL_KEY.to_string(), url.into_bytes())].into();
    if let Err(e) = ensure_secret(&env.client, secret(&cinder, &name, &[], data, false)).await {
        return ctx.fail(api_error(&e), format!("writing Secret {name}: {e}"));
    }
    let mut ctx = ctx;
    ctx.artefacts.transport_url_hash = Some(digest);
    ctx.artefacts.broker_port = Some(port);
    ctx.proceed(Cond::true_(
        kind::SECRETS_READY,
        reason::SECRETS_AVAILABLE,
        format!("transport URL materialized in Secret {name}"),
    ))
}

impl Step for TransportUrlSecretStep {
    fn name(&self) -> &'static str {
        "TransportURLSecret"
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
    fn rabbit_url_defaults_the_vhost() {
        assert_eq!(
            rabbit_url("u", "p w", "rmq", 5672, None),
            "rabbit://u:p%20w@rmq:5672/"
        );
        assert_eq!(
            rabbit_url("u", "p", "rmq", 5671, Some("cinder")),
            "rabbit://u:p@rmq:5671/cinder"
        );
    }
}
