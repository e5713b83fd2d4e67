//! The Config step: renders cinder.conf, scheduler.conf, logging.ini (and policy.yaml when
//! given) through [`crate::planning::config::render_config`] into an immutable
//! content-addressed ConfigMap (`{name}-config-{hash}`), and keeps the informational
//! ExtraConfigHealthy condition (NoOwnedKeysOverridden / OwnedKeysOverridden). A section, key or
//! value carrying a control character is not rendered: the step returns the ConfigMap the live
//! API Deployment mounts (if none, none), reports SecretsReady=False / ConfigError and counts
//! the error in `cinder_operator_reconcile_errors_total` while the lane goes on. Old
//! ConfigMaps no Deployment of the Cinder mounts are swept.

use super::children::{child_meta, ensure_config_map, mounts, selector};
use super::env::StepEnv;
use crate::conditions::{Cond, kind, reason};
use crate::kube_ext::sweep;
use crate::pipeline::{Outcome, StepContext, StepReport};
use crate::planning::config::render_config;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;

/// Label of the config ConfigMaps (what the sweep selects).
pub const CONFIG_LABEL: &str = "cinder.openstack.c5c3.io/config";

fn api_error(e: &kube::Error) -> Cond {
    Cond::false_(
        kind::SECRETS_READY,
        reason::CONFIG_ERROR,
        format!("kubernetes API error: {e}"),
    )
}

/// Runs the step once for one Cinder.
pub async fn run(env: StepEnv, ctx: StepContext) -> StepReport {
    let children = ctx.children(&env.client);
    let cinder = ctx.cinder.clone();
    let ns = ctx.namespace().to_string();
    let name = ctx.name().to_string();
    let mounted = match mounts(&children, &ns, &name).await {
        Ok(m) => m,
        Err(e) => return ctx.fail(api_error(&e), format!("listing Deployments: {e}")),
    };
    let rendered = match render_config(&name, &cinder.spec) {
        Ok(r) => r,
        Err(e) => {
            let mut error = e.condition();
            error.message = format!(
                "spec.extraConfig: {e}; keeping the last-good config ({})",
                mounted.api_config_map.as_deref().unwrap_or("none")
            );
            let mut ctx = ctx;
            ctx.artefacts.config_map_name = mounted.api_config_map;
            let message = error.message.clone();
            return ctx.report(vec![error], Outcome::ContinueDespite(message));
        }
    };
    let health = rendered.extra_config_condition();
    let cm = ConfigMap {
        metadata: child_meta(&cinder, &rendered.name, &[(CONFIG_LABEL, "true")]),
        data: Some(rendered.data),
        immutable: Some(true),
        ..Default::default()
    };
    if let Err(e) = ensure_config_map(&children, cm).await {
        return ctx.fail(
            api_error(&e),
            format!("writing ConfigMap {}: {e}", rendered.name),
        );
    }
    let mut keep = mounted.config_maps;
    keep.push(rendered.name.clone());
    let sel = selector(&name, &[(CONFIG_LABEL, "true")]);
    if let Err(e) = sweep(
        &Api::<ConfigMap>::namespaced(children.clone(), &ns),
        &sel,
        |n| keep.iter().any(|k| k == n),
    )
    .await
    {
        return ctx.fail(api_error(&e), format!("sweeping ConfigMaps: {e}"));
    }
    let mut ctx = ctx;
    ctx.artefacts.config_map_name = Some(rendered.name.clone());
    ctx.report(
        vec![
            Cond::true_(
                kind::SECRETS_READY,
                reason::SECRETS_AVAILABLE,
                format!("config rendered into ConfigMap {}", rendered.name),
            ),
            health,
        ],
        Outcome::Continue,
    )
}
