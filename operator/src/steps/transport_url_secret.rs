//! The TransportURLSecret step: materializes the `rabbit://` URL (rendered by
//! [`crate::planning::connection_urls`]) into the derived
//! `{name}-transport-url` Secret (key `transport_url`), digests it into the
//! `cinder.c5c3.io/transport-url-hash` artefact and resolves the broker port the NetworkPolicy
//! member opens. Reports through SecretsReady.

use super::secrets::{MESSAGING_KEYS, MESSAGING_OPTIONAL_KEYS, materialized, messaging_secret};
use crate::children::ensure_derived_secret;
use crate::conditions::{Cond, kind, reason};
use crate::context::OperatorContext;
use crate::credentials;
use crate::names;
use crate::pipeline::{Doing, StepContext, StepResult};
use crate::planning::connection_urls::{
    BrokerEndpoint, CredentialError, TRANSPORT_URL_KEY, rabbit_transport_url,
};
use crate::planning::digest::Sensitive;
use crate::planning::secret_data::SecretData;
use crate::requeue::REQUEUE_SECRET_POLLING;
use std::sync::Arc;

/// SecretsReady=False / WaitingForMessagingCredentials, saying why.
fn waiting_condition(why: &str) -> Cond {
    Cond::false_(
        kind::SECRETS_READY,
        reason::WAITING_FOR_MESSAGING_CREDENTIALS,
        format!("waiting for the messaging credentials: {why}"),
    )
}

fn waiting(ctx: &mut StepContext, why: String) -> StepResult {
    ctx.requeue(waiting_condition(&why), REQUEUE_SECRET_POLLING)
}

/// The broker port and the transport URL of the messaging Secret's `values` (`host`,
/// `username`, `password`, optional `port` and `vhost`).
fn transport_url(values: &SecretData) -> Result<(u16, Sensitive), CredentialError> {
    let endpoint = BrokerEndpoint::parse(
        values.get("host").unwrap_or_default(),
        values.get("port"),
        values.get("vhost"),
    )?;
    let url = rabbit_transport_url(
        &endpoint,
        values.get("username").unwrap_or_default(),
        values.get("password").unwrap_or_default(),
    )?;
    Ok((endpoint.port, url))
}

/// Runs the step once for one Cinder.
pub(crate) async fn run(op: Arc<OperatorContext>, ctx: &mut StepContext) -> StepResult {
    let cinder = ctx.cinder.clone();
    let Some((msg_ns, msg_name)) = messaging_secret(&cinder) else {
        return waiting(
            ctx,
            "spec.messaging names neither clusterRef nor secretRef".into(),
        );
    };
    let values = match credentials::read(
        &op.client,
        ctx.management_reads(),
        &msg_ns,
        &msg_name,
        &MESSAGING_KEYS,
        &MESSAGING_OPTIONAL_KEYS,
    )
    .await
    .doing("reading the messaging Secret")?
    {
        Err(m) => return waiting(ctx, m.to_string()),
        Ok(v) => v,
    };
    let (port, url) = match transport_url(&values) {
        Ok(v) => v,
        Err(e) => return waiting(ctx, format!("Secret {msg_name:?}: {e}")),
    };
    let name = names::transport_url_secret(ctx.name());
    ensure_derived_secret(&op.client, ctx, &name, TRANSPORT_URL_KEY, url.expose()).await?;
    ctx.artefacts.transport_url_hash = Some(url.digest());
    ctx.artefacts.broker_port = Some(port);
    ctx.proceed(materialized("transport URL", &name))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn values(pairs: &[(&str, &str)]) -> SecretData {
        SecretData::from(
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect::<std::collections::BTreeMap<_, _>>(),
        )
    }

    const CREDENTIALS: [(&str, &str); 3] = [
        ("host", "rabbit.ns.svc"),
        ("username", "cinder"),
        ("password", "p@ss"),
    ];

    #[test]
    fn the_url_and_the_broker_port_come_from_the_secret() {
        let (port, url) = transport_url(&values(&CREDENTIALS)).unwrap();
        assert_eq!(port, 5672, "the AMQP default without a port key");
        assert_eq!(url.expose(), "rabbit://cinder:p%40ss@rabbit.ns.svc:5672/");
        let mut given = CREDENTIALS.to_vec();
        given.extend([("port", "5671"), ("vhost", "cinder")]);
        let (port, url) = transport_url(&values(&given)).unwrap();
        assert_eq!(port, 5671, "the port the NetworkPolicy opens");
        assert_eq!(
            url.expose(),
            "rabbit://cinder:p%40ss@rabbit.ns.svc:5671/cinder"
        );
    }

    #[test]
    fn an_unusable_secret_value_is_waited_for_by_name() {
        let mut given = CREDENTIALS.to_vec();
        given.push(("port", "amqp"));
        let e = transport_url(&values(&given)).unwrap_err();
        assert_eq!((e.field, e.problem), ("port", "not a port number"));
        let c = waiting_condition(&format!("Secret \"q-default-user\": {e}"));
        assert_eq!(
            (c.type_, c.status, c.reason),
            (
                kind::SECRETS_READY,
                false,
                reason::WAITING_FOR_MESSAGING_CREDENTIALS
            )
        );
        assert_eq!(
            c.message,
            "waiting for the messaging credentials: Secret \"q-default-user\": credential field port is not a port number"
        );
        let slash = [("host", "h"), ("username", "a/b"), ("password", "p")];
        assert_eq!(
            transport_url(&values(&slash)).unwrap_err().field,
            "username"
        );
    }
}
