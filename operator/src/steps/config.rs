//! The Config step: renders cinder.conf, scheduler.conf, logging.ini (and policy.yaml when
//! given) through [`crate::planning::config::render_config`] into an immutable
//! content-addressed ConfigMap (`{name}-config-{hash}`), and keeps the informational
//! ExtraConfigHealthy condition (NoOwnedKeysOverridden / OwnedKeysOverridden). A section, key or
//! value carrying a control character is not rendered: the step returns the ConfigMap the live
//! API Deployment mounts (if none, none), reports SecretsReady=False / ConfigError and counts
//! the error in `cinder_operator_reconcile_errors_total` while the lane goes on. Old
//! ConfigMaps no Deployment of the Cinder mounts are swept.

use crate::children::{child_meta, ensure_config_map, mounts, selector};
use crate::conditions::{Cond, kind, reason};
use crate::kube_ext::sweep;
use crate::pipeline::StepEnv;
use crate::pipeline::{Doing, Outcome, StepContext, StepResult};
use crate::planning::config::render_config;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;

/// Label of the config ConfigMaps (what the sweep selects).
pub const CONFIG_LABEL: &str = "cinder.openstack.c5c3.io/config";

/// Runs the step once for one Cinder.
pub async fn run(env: StepEnv, ctx: &mut StepContext) -> StepResult {
    let children = ctx.children(&env.client);
    let cinder = ctx.cinder.clone();
    let ns = ctx.namespace().to_string();
    let name = ctx.name().to_string();
    let mounted = mounts(&children, &ns, &name)
        .await
        .doing("listing Deployments")
        .with_reason(reason::CONFIG_ERROR)?;
    let rendered = match render_config(&name, &cinder.spec) {
        Ok(r) => r,
        Err(e) => {
            let mut error = e.condition();
            error.message = format!(
                "spec.extraConfig: {e}; keeping the last-good config ({})",
                mounted.api_config_map.as_deref().unwrap_or("none")
            );
            ctx.artefacts.config_map_name = mounted.api_config_map;
            let message = error.message.clone();
            ctx.set(error);
            return Ok(Outcome::ContinueDespite(message));
        }
    };
    let health = rendered.extra_config_condition();
    let cm = ConfigMap {
        metadata: child_meta(&cinder, &rendered.name, &[(CONFIG_LABEL, "true")]),
        data: Some(rendered.data),
        immutable: Some(true),
        ..Default::default()
    };
    ensure_config_map(&children, cm)
        .await
        .doing(format_args!("writing ConfigMap {}", rendered.name))
        .with_reason(reason::CONFIG_ERROR)?;
    let mut keep = mounted.config_maps;
    keep.push(rendered.name.clone());
    let sel = selector(&name, &[(CONFIG_LABEL, "true")]);
    sweep(
        &Api::<ConfigMap>::namespaced(children.clone(), &ns),
        &sel,
        |n| keep.iter().any(|k| k == n),
    )
    .await
    .doing("sweeping ConfigMaps")
    .with_reason(reason::CONFIG_ERROR)?;
    ctx.artefacts.config_map_name = Some(rendered.name.clone());
    ctx.set(health);
    ctx.proceed(Cond::true_(
        kind::SECRETS_READY,
        reason::SECRETS_AVAILABLE,
        format!("config rendered into ConfigMap {}", rendered.name),
    ))
}
