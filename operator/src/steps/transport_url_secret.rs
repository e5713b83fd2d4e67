//! The TransportURLSecret step: materializes the `rabbit://` URL (rendered by
//! [`crate::planning::connection_urls`]) into the derived
//! `{name}-transport-url` Secret (key `transport_url`), digests it into the
//! `cinder.c5c3.io/transport-url-hash` artefact and resolves the broker port the NetworkPolicy
//! member opens. Reports through SecretsReady.

use super::secrets::{MESSAGING_KEYS, MESSAGING_OPTIONAL_KEYS, messaging_secret};
use crate::children::ensure_derived_secret;
use crate::conditions::{Cond, kind, reason};
use crate::credentials;
use crate::names;
use crate::pipeline::StepEnv;
use crate::pipeline::{Doing, StepContext, StepResult};
use crate::planning::connection_urls::{BrokerEndpoint, TRANSPORT_URL_KEY, rabbit_transport_url};
use crate::requeue::REQUEUE_SECRET_POLLING;

fn waiting(ctx: &mut StepContext, why: String) -> StepResult {
    let c = Cond::false_(
        kind::SECRETS_READY,
        reason::WAITING_FOR_MESSAGING_CREDENTIALS,
        format!("waiting for the messaging credentials: {why}"),
    );
    ctx.requeue(c, REQUEUE_SECRET_POLLING)
}

/// Runs the step once for one Cinder.
pub async fn run(env: StepEnv, ctx: &mut StepContext) -> StepResult {
    let children = ctx.children(&env.client);
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
    .doing("reading the messaging Secret")?
    {
        Err(m) => return waiting(ctx, m.to_string()),
        Ok(v) => v,
    };
    let url = BrokerEndpoint::parse(
        values.get("host").unwrap_or_default(),
        values.get("port"),
        values.get("vhost"),
    )
    .and_then(|endpoint| {
        rabbit_transport_url(
            &endpoint,
            values.get("username").unwrap_or_default(),
            values.get("password").unwrap_or_default(),
        )
        .map(|url| (endpoint.port, url))
    });
    let (port, url) = match url {
        Ok(v) => v,
        Err(e) => return waiting(ctx, format!("Secret {msg_name:?}: {e}")),
    };
    let digest = url.digest();
    let name = names::transport_url_secret(ctx.name());
    let written = ensure_derived_secret(&children, &cinder, &name, TRANSPORT_URL_KEY, url.expose());
    written.await.doing(format_args!("writing Secret {name}"))?;
    ctx.artefacts.transport_url_hash = Some(digest);
    ctx.artefacts.broker_port = Some(port);
    ctx.proceed(Cond::true_(
        kind::SECRETS_READY,
        reason::SECRETS_AVAILABLE,
        format!("transport URL materialized in Secret {name}"),
    ))
}
