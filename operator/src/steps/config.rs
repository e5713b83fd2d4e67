//! The Config step: renders cinder.conf, scheduler.conf, logging.ini (and policy.yaml when
//! given) through [`crate::planning::config::render_config`] into an immutable
//! content-addressed ConfigMap (`{name}-config-{hash}`), and keeps the informational
//! ExtraConfigHealthy condition (NoOwnedKeysOverridden / OwnedKeysOverridden). A section, key or
//! value carrying a control character is not rendered: the step returns the ConfigMap the live
//! API Deployment mounts (if none, none), reports SecretsReady=False / ConfigError with a
//! message naming the spec field the refused text came from (`spec.extraConfig`,
//! `spec.extraConfig.policy`, or a field the operator renders itself, such as `spec.region`)
//! and counts the error in `cinder_operator_reconcile_errors_total` while the lane goes on. Old
//! ConfigMaps no Deployment of the Cinder mounts are swept.

use crate::children::{child_meta, ensure_config_map, mounts, selector};
use crate::conditions::{Cond, kind, reason};
use crate::context::OperatorContext;
use crate::crd::{Cinder, CinderSpec};
use crate::kube_ext::sweep;
use crate::pipeline::{Doing, Outcome, StepContext, StepResult};
use crate::planning::config::{ConfigError, POLICY_SECTION, RenderedConfig, render_config};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use std::sync::Arc;

/// Label of the config ConfigMaps (what the sweep selects).
pub(crate) const CONFIG_LABEL: &str = "cinder.openstack.c5c3.io/config";

/// The cinder.conf settings the render takes from spec fields other than `spec.extraConfig`:
/// `(section, key, field)`. The other settings it renders are constants, numbers or the
/// Cinder's name, none of which can carry a control character.
const SPEC_FIELDS: [(&str, &str, &str); 7] = [
    ("keystone_authtoken", "auth_url", "spec.keystoneEndpoint"),
    (
        "keystone_authtoken",
        "www_authenticate_uri",
        "spec.keystoneEndpoint",
    ),
    ("keystone_authtoken", "region_name", "spec.region"),
    (
        "keystone_authtoken",
        "username",
        "spec.serviceUser.username",
    ),
    (
        "keystone_authtoken",
        "project_name",
        "spec.serviceUser.projectName",
    ),
    (
        "keystone_authtoken",
        "user_domain_name",
        "spec.serviceUser.userDomainName",
    ),
    (
        "keystone_authtoken",
        "project_domain_name",
        "spec.serviceUser.projectDomainName",
    ),
];

/// The spec field the text refused by `e` came from. Section names and keys with a control
/// character can only come from `spec.extraConfig` (the operator's own are constants); a value
/// from it when `spec.extraConfig` sets that key, else from the field in [`SPEC_FIELDS`].
fn refused_field(e: &ConfigError, spec: &CinderSpec) -> &'static str {
    let ConfigError::ControlCharacter(c) = e;
    if c.section == POLICY_SECTION {
        return "spec.extraConfig.policy";
    }
    let Some(key) = c.what.strip_prefix("value of ") else {
        return "spec.extraConfig";
    };
    let overlaid = spec
        .extra_config
        .get(&c.section)
        .is_some_and(|entries| entries.contains_key(key));
    if overlaid {
        return "spec.extraConfig";
    }
    SPEC_FIELDS
        .iter()
        .find(|(section, k, _)| *section == c.section && *k == key)
        .map_or("spec", |(_, _, field)| field)
}

/// SecretsReady=False / ConfigError for the refused render `e` of `spec`, naming the field the
/// refused text came from and `kept`, the ConfigMap the workloads go on mounting.
fn refused(e: &ConfigError, spec: &CinderSpec, kept: Option<&str>) -> Cond {
    let mut error = e.condition();
    error.message = format!(
        "{}: {e}; keeping the last-good config ({})",
        refused_field(e, spec),
        kept.unwrap_or("none")
    );
    error
}

/// The immutable, labelled ConfigMap of `rendered`, owned by `cinder`.
fn config_map(cinder: &Cinder, rendered: &RenderedConfig) -> ConfigMap {
    ConfigMap {
        metadata: child_meta(cinder, &rendered.name, &[(CONFIG_LABEL, "true")]),
        data: Some(rendered.data.clone()),
        immutable: Some(true),
        ..Default::default()
    }
}

/// Runs the step once for one Cinder.
pub(crate) async fn run(op: Arc<OperatorContext>, ctx: &mut StepContext) -> StepResult {
    let children = ctx.children(&op.client);
    let cinder = ctx.cinder.clone();
    let ns = ctx.namespace().to_string();
    let name = ctx.name().to_string();
    let mounted = mounts(&children, ctx.children_reads(), &ns, &name)
        .await
        .doing("listing Deployments")
        .with_reason(reason::CONFIG_ERROR)?;
    let rendered = match render_config(&name, &cinder.spec) {
        Ok(r) => r,
        Err(e) => {
            let error = refused(&e, &cinder.spec, mounted.api_config_map.as_deref());
            ctx.artefacts.config_map_name = mounted.api_config_map;
            let message = error.message.clone();
            ctx.set(error);
            return Ok(Outcome::ContinueDespite(message));
        }
    };
    let health = rendered.extra_config_condition();
    ensure_config_map(
        &children,
        ctx.children_reads(),
        config_map(&cinder, &rendered),
    )
    .await
    .doing(format_args!("writing ConfigMap {}", rendered.name))
    .with_reason(reason::CONFIG_ERROR)?;
    let mut keep = mounted.config_maps;
    keep.push(rendered.name.clone());
    let sel = selector(&name, &[(CONFIG_LABEL, "true")]);
    sweep(
        &Api::<ConfigMap>::namespaced(children.clone(), &ns),
        ctx.children_reads(),
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

#[cfg(test)]
mod tests {
    use super::*;

    fn overlay(spec: &mut CinderSpec, section: &str, key: &str, value: &str) {
        spec.extra_config
            .entry(section.into())
            .or_default()
            .insert(key.into(), value.into());
    }

    /// A spec field the render writes into cinder.conf.
    type FieldOf = fn(&mut CinderSpec) -> &mut String;

    /// The condition of the refused render of `spec`.
    fn refusal(spec: &CinderSpec, kept: Option<&str>) -> Cond {
        let e = render_config("c", spec).expect_err("a refused render");
        refused(&e, spec, kept)
    }

    #[test]
    fn a_rendered_config_becomes_an_immutable_labelled_configmap() {
        let c = crate::test_fixtures::cinder();
        let rendered = render_config("c", &c.spec).unwrap();
        let cm = config_map(&c, &rendered);
        assert_eq!(cm.metadata.name.as_deref(), Some(rendered.name.as_str()));
        assert!(rendered.name.starts_with("c-config-"), "{}", rendered.name);
        assert_eq!(cm.metadata.labels.unwrap()[CONFIG_LABEL], "true");
        assert_eq!(cm.metadata.owner_references.unwrap()[0].uid, "u");
        assert_eq!(cm.immutable, Some(true));
        assert_eq!(cm.data.as_ref(), Some(&rendered.data));
    }

    #[test]
    fn a_refused_extra_config_is_named_and_the_last_good_config_kept() {
        let mut spec = crate::test_fixtures::cinder().spec;
        overlay(&mut spec, "DEFAULT", "debug", "true\n[x]");
        let c = refusal(&spec, Some("c-config-1234"));
        assert_eq!(
            (c.type_, c.status, c.reason),
            (kind::SECRETS_READY, false, reason::CONFIG_ERROR)
        );
        assert_eq!(
            c.message,
            "spec.extraConfig: config refused: value of debug in section [DEFAULT] carries a \
             control character; keeping the last-good config (c-config-1234)"
        );
        // An owned key overridden with a refused value (the override is what was refused), and a
        // refused section name.
        for (section, key, value) in [
            ("keystone_authtoken", "username", "a\nb"),
            ("bad\nsection", "k", "v"),
        ] {
            let mut spec = crate::test_fixtures::cinder().spec;
            overlay(&mut spec, section, key, value);
            let message = refusal(&spec, None).message;
            assert!(message.starts_with("spec.extraConfig: "), "{message}");
        }
    }

    #[test]
    fn a_refused_policy_override_is_named() {
        let mut spec = crate::test_fixtures::cinder().spec;
        overlay(&mut spec, POLICY_SECTION, "volume:delete", "rule:a\n");
        let c = refusal(&spec, None);
        assert_eq!(c.reason, reason::CONFIG_ERROR);
        assert!(
            c.message.starts_with("spec.extraConfig.policy: "),
            "{}",
            c.message
        );
        assert!(c.message.ends_with("keeping the last-good config (none)"));
    }

    #[test]
    fn a_refused_field_outside_extra_config_is_named() {
        let fields: [(&str, FieldOf); 6] = [
            ("spec.keystoneEndpoint", |s| &mut s.keystone_endpoint),
            ("spec.region", |s| &mut s.region),
            ("spec.serviceUser.username", |s| {
                &mut s.service_user.username
            }),
            ("spec.serviceUser.projectName", |s| {
                &mut s.service_user.project_name
            }),
            ("spec.serviceUser.userDomainName", |s| {
                &mut s.service_user.user_domain_name
            }),
            ("spec.serviceUser.projectDomainName", |s| {
                &mut s.service_user.project_domain_name
            }),
        ];
        for (field, of) in fields {
            let mut spec = crate::test_fixtures::cinder().spec;
            of(&mut spec).push_str("\n[x]");
            let c = refusal(&spec, Some("c-config-1234"));
            assert_eq!(c.reason, reason::CONFIG_ERROR);
            assert!(
                c.message.starts_with(&format!("{field}: config refused: ")),
                "{field}: {}",
                c.message
            );
            assert!(!c.message.contains("[x]"), "{}", c.message);
        }
    }
}
