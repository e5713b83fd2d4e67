//! The Config step: renders cinder.conf, scheduler.conf and logging.ini into an immutable
//! content-addressed ConfigMap (`{name}-config-{hash}`), overlays spec.extraConfig, and keeps
//! the informational ExtraConfigHealthy condition (NoOwnedKeysOverridden / OwnedKeysOverridden).
//! A section, key or value carrying a control character is not rendered: the step returns the
//! ConfigMap the live API Deployment mounts (if none, none) and reports SecretsReady=False /
//! ConfigError. Old ConfigMaps no Deployment of the Cinder mounts are swept.

use super::StepEnv;
use super::children::{child_meta, ensure_config_map, selector, sweep_config_maps};
use super::digest::content_hash;
use crate::conditions::{Cond, kind, reason};
use crate::crd::Cinder;
use crate::names;
use crate::pipeline::{Artefacts, Outcome, Step, StepContext, StepReport};
use futures::FutureExt;
use futures::future::BoxFuture;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::ListParams;
use kube::{Api, Client};
use std::collections::BTreeMap;

/// Label of the config ConfigMaps (what the sweep selects).
pub const CONFIG_LABEL: &str = "cinder.openstack.c5c3.io/config";

/// section → key → value.
pub type Ini = BTreeMap<String, BTreeMap<String, String>>;

fn set(ini: &mut Ini, section: &str, key: &str, value: impl Into<String>) {
    ini.entry(section.to_string())
        .or_default()
        .insert(key.to_string(), value.into());
}

/// The keys the operator owns in cinder.conf for `cinder` with `artefacts`.
pub fn owned_cinder_conf(cinder: &Cinder, artefacts: &Artefacts) -> Ini {
    let spec = &cinder.spec;
    let mut ini = Ini::new();
    set(&mut ini, "DEFAULT", "auth_strategy", "keystone");
    set(
        &mut ini,
        "DEFAULT",
        "osapi_volume_listen_port",
        names::API_PORT.to_string(),
    );
    set(
        &mut ini,
        "DEFAULT",
        "log_config_append",
        "/etc/cinder/logging.ini",
    );
    set(&mut ini, "DEFAULT", "state_path", "/var/lib/cinder");
    let enabled: Vec<&str> = artefacts
        .backends
        .iter()
        .filter(|b| !b.deleting)
        .map(|b| b.name.as_str())
        .collect();
    if !enabled.is_empty() {
        set(&mut ini, "DEFAULT", "enabled_backends", enabled.join(","));
    }
    let su = &spec.service_user;
    let ks = "keystone_authtoken";
    set(
        &mut ini,
        ks,
        "www_authenticate_uri",
        spec.keystone_endpoint.clone(),
    );
    set(&mut ini, ks, "auth_url", spec.keystone_endpoint.clone());
    set(&mut ini, ks, "auth_type", "password");
    set(&mut ini, ks, "username", su.username.clone());
    set(&mut ini, ks, "project_name", su.project_name.clone());
    set(
        &mut ini,
        ks,
        "user_domain_name",
        su.user_domain_name.clone(),
    );
    set(
        &mut ini,
        ks,
        "project_domain_name",
        su.project_domain_name.clone(),
    );
    set(&mut ini, ks, "region_name", spec.region.clone());
    set(
        &mut ini,
        "oslo_concurrency",
        "lock_path",
        "/var/lib/cinder/tmp",
    );
    set(&mut ini, "oslo_messaging_notifications", "driver", "noop");
    ini
}

/// `[section] key` pairs of `extra` that override an owned key.
pub fn overridden_keys(owned: &Ini, extra: &Ini) -> Vec<String> {
    let mut out = Vec::new();
    for (section, keys) in extra {
        for key in keys.keys() {
            if owned.get(section).is_some_and(|s| s.contains_key(key)) {
                out.push(format!("[{section}] {key}"));
            }
        }
    }
    out
}

/// The first `[section] key` of `extra` whose section, key or value holds a control character.
pub fn control_character(extra: &Ini) -> Option<String> {
    let bad = |s: &str| s.chars().any(char::is_control);
    for (section, keys) in extra {
        if bad(section) {
            return Some(format!("section {:?}", section.escape_debug().to_string()));
        }
        for (key, value) in keys {
            if bad(key) || bad(value) {
                return Some(format!("[{}] {}", section, key.escape_debug()));
            }
        }
    }
    None
}

/// Renders `ini` (DEFAULT first, then sections in name order).
pub fn render_ini(ini: &Ini) -> String {
    let mut out = String::new();
    let mut write = |section: &str, keys: &BTreeMap<String, String>| {
        out.push_str(&format!("[{section}]\n"));
        for (k, v) in keys {
            out.push_str(&format!("{k} = {v}\n"));
        }
        out.push('\n');
    };
    if let Some(d) = ini.get("DEFAULT") {
        write("DEFAULT", d);
    }
    for (section, keys) in ini.iter().filter(|(s, _)| s.as_str() != "DEFAULT") {
        write(section, keys);
    }
    out
}

const LOGGING_INI: &str = "[loggers]\nkeys = root, cinder\n\n[handlers]\nkeys = stdout\n\n[formatters]\nkeys = context\n\n[logger_root]\nlevel = WARNING\nhandlers = stdout\n\n[logger_cinder]\nlevel = INFO\nhandlers = stdout\nqualname = cinder\n\n[handler_stdout]\nclass = StreamHandler\nargs = (sys.stdout,)\nformatter = context\n\n[formatter_context]\nclass = oslo_log.formatters.ContextFormatter\n";

/// The files of the config ConfigMap.
pub fn config_files(cinder: &Cinder, artefacts: &Artefacts) -> BTreeMap<String, Vec<u8>> {
    let mut conf = owned_cinder_conf(cinder, artefacts);
    for (section, keys) in &cinder.spec.extra_config {
        for (k, v) in keys {
            set(&mut conf, section, k, v.clone());
        }
    }
    let mut scheduler = Ini::new();
    set(
        &mut scheduler,
        "DEFAULT",
        "scheduler_driver",
        "cinder.scheduler.filter_scheduler.FilterScheduler",
    );
    [
        ("cinder.conf".to_string(), render_ini(&conf).into_bytes()),
        (
            "scheduler.conf".to_string(),
            render_ini(&scheduler).into_bytes(),
        ),
        ("logging.ini".to_string(), LOGGING_INI.as_bytes().to_vec()),
    ]
    .into()
}

/// The config ConfigMaps the Cinder's Deployments mount (and the API Deployment's, first).
async fn mounted_config_maps(
    client: &Client,
    namespace: &str,
    cinder: &str,
) -> Result<(Option<String>, Vec<String>), kube::Error> {
    let api: Api<Deployment> = Api::namespaced(client.clone(), namespace);
    let list = api
        .list(&ListParams::default().labels(&selector(cinder, &[])))
        .await?;
    let prefix = format!("{cinder}-config-");
    let mut api_mount = None;
    let mut all = Vec::new();
    for d in list.items {
        let mounts: Vec<String> = d
            .spec
            .template
            .spec
            .as_ref()
            .and_then(|p| p.volumes.as_ref())
            .into_iter()
            .flatten()
            .filter_map(|v| v.config_map.as_ref().map(|c| c.name.clone()))
            .filter(|n| n.starts_with(&prefix))
            .collect();
        if d.metadata.name.as_deref() == Some(names::api_deployment(cinder).as_str()) {
            api_mount = mounts.first().cloned();
        }
        all.extend(mounts);
    }
    Ok((api_mount, all))
}

/// The Config step.
pub struct ConfigStep {
    env: StepEnv,
}

impl ConfigStep {
    pub fn new(env: StepEnv) -> Self {
        ConfigStep { env }
    }
}

fn api_error(e: &kube::Error) -> Cond {
    Cond::false_(
        kind::SECRETS_READY,
        reason::CONFIG_ERROR,
        format!("kubernetes API error: {e}"),
    )
}

async fn run(env: StepEnv, ctx: StepContext) -> StepReport {
    let cinder = ctx.cinder.clone();
    let ns = ctx.namespace().to_string();
    let name = ctx.name().to_string();
    let owned = owned_cinder_conf(&cinder, &ctx.artefacts);
    let overridden = overridden_keys(&owned, &cinder.spec.extra_config);
    let health = if overridden.is_empty() {
        Cond::true_(
            kind::EXTRA_CONFIG_HEALTHY,
            reason::NO_OWNED_KEYS_OVERRIDDEN,
            "spec.extraConfig overrides no operator-owned key",
        )
    } else {
        Cond::false_(
            kind::EXTRA_CONFIG_HEALTHY,
            reason::OWNED_KEYS_OVERRIDDEN,
            format!(
                "spec.extraConfig overrides operator-owned key(s): {}",
                overridden.join(", ")
            ),
        )
    };

    let (api_mount, mounted) = match mounted_config_maps(&env.client, &ns, &name).await {
        Ok(m) => m,
        Err(e) => return ctx.fail(api_error(&e), format!("listing Deployments: {e}")),
    };

    if let Some(at) = control_character(&cinder.spec.extra_config) {
        let error = Cond::false_(
            kind::SECRETS_READY,
            reason::CONFIG_ERROR,
            format!(
                "spec.extraConfig {at} contains a control character; keeping the last-good config ({})",
                api_mount.as_deref().unwrap_or("none")
            ),
        );
        let mut ctx = ctx;
        ctx.artefacts.config_map_name = api_mount;
        return ctx.report(vec![error, health], Outcome::Continue);
    }

    let files = config_files(&cinder, &ctx.artefacts);
    let hash = content_hash(&files);
    let cm_name = names::config_map(&name, &hash);
    let data: BTreeMap<String, String> = files
        .into_iter()
        .map(|(k, v)| (k, String::from_utf8_lossy(&v).into_owned()))
        .collect();
    let cm = ConfigMap {
        metadata: child_meta(&cinder, &cm_name, &[(CONFIG_LABEL, "true")]),
        data: Some(data),
        immutable: Some(true),
        ..Default::default()
    };
    if let Err(e) = ensure_config_map(&env.client, cm).await {
        return ctx.fail(api_error(&e), format!("writing ConfigMap {cm_name}: {e}"));
    }
    let mut keep = mounted;
    keep.push(cm_name.clone());
    if let Err(e) = sweep_config_maps(
        &env.client,
        &ns,
        &selector(&name, &[(CONFIG_LABEL, "true")]),
        &keep,
    )
    .await
    {
        return ctx.fail(api_error(&e), format!("sweeping ConfigMaps: {e}"));
    }
    let mut ctx = ctx;
    ctx.artefacts.config_map_name = Some(cm_name.clone());
    ctx.report(
        vec![
            Cond::true_(
                kind::SECRETS_READY,
                reason::SECRETS_AVAILABLE,
                format!("config rendered into ConfigMap {cm_name}"),
            ),
            health,
        ],
        Outcome::Continue,
    )
}

impl Step for ConfigStep {
    fn name(&self) -> &'static str {
        "Config"
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
    fn overrides_and_control_characters_are_found() {
        let owned: Ini = [(
            "DEFAULT".to_string(),
            [("auth_strategy".to_string(), "keystone".to_string())].into(),
        )]
        .into();
        let extra: Ini = [(
            "DEFAULT".to_string(),
            [
                ("auth_strategy".to_string(), "noauth".to_string()),
                ("debug".to_string(), "true".to_string()),
            ]
            .into(),
        )]
        .into();
        assert_eq!(
            overridden_keys(&owned, &extra),
            vec!["[DEFAULT] auth_strategy"]
        );
        assert_eq!(control_character(&extra), None);
        let bad: Ini = [(
            "DEFAULT".to_string(),
            [("debug".to_string(), "true\nfoo = bar".to_string())].into(),
        )]
        .into();
        assert_eq!(control_character(&bad).as_deref(), Some("[DEFAULT] debug"));
        let text = render_ini(&extra);
        assert!(text.starts_with("[DEFAULT]\n"));
    }
}
