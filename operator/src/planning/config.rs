//! Config rendering (the Config step's pure part): cinder.conf, scheduler.conf, logging.ini,
//! the API's uWSGI config and cinder.conf overlay ([`super::process_model`]), the files of
//! cinder's own `etc/cinder/` that the ConfigMap mounted at `/etc/cinder` hides from the image
//! ([`CINDER_ETC_FILES`]), the RPC services' readiness check ([`HEALTH_CHECK_KEY`]) and, when the user gives policy overrides, policy.yaml, into an
//! immutable content-addressed ConfigMap (name + data). The operator owns the keys it sets; `spec.extraConfig` is laid over
//! them (an owned key it sets makes ExtraConfigHealthy False / OwnedKeysOverridden). A control
//! character anywhere refuses the render: the caller keeps the artefacts the live Deployment
//! mounts and reports SecretsReady=False / ConfigError.
//!
//! No secret is rendered: the DSN, the transport URL and the service-user password reach the
//! pods as environment variables (oslo.config's `OS_<GROUP>__<OPTION>` source).

use super::digest::map_digest;
use super::ini::{ControlCharacter, IniDoc};
pub(crate) use super::process_model::CONFIG_DIR;
use super::process_model::{API_CONF, API_UWSGI_INI, api_conf, api_uwsgi_ini};
use crate::conditions::{Cond, kind, reason};
use crate::crd::CinderSpec;
use crate::names;
use std::collections::BTreeMap;

/// The reserved `spec.extraConfig` section whose entries (rule → check string) become
/// policy.yaml instead of cinder.conf settings.
pub(crate) const POLICY_SECTION: &str = "policy";
/// Environment variable carrying the DSN (oslo.config environment source).
pub const ENV_DB_CONNECTION: &str = "OS_DATABASE__CONNECTION";
/// Environment variable carrying the transport URL.
pub const ENV_TRANSPORT_URL: &str = "OS_DEFAULT__TRANSPORT_URL";
/// Environment variable carrying the service-user password.
pub const ENV_AUTHTOKEN_PASSWORD: &str = "OS_KEYSTONE_AUTHTOKEN__PASSWORD";

/// The files cinder ships in its package's `etc/cinder/` (identical in cinder 28.0.0 and
/// 29.0.0, the releases the operator deploys), kept as data: the ConfigMap mounted at
/// `/etc/cinder` hides the image's own copies, and without them the API stops at start-up
/// (`ConfigNotFound: api-paste.ini`), non-admin list filters answer 400 (no
/// `resource_filters.json`) and `cinder-rootwrap` refuses every privileged command (no
/// `rootwrap.conf`, no filters). `volume.filters` is also mounted alone at
/// [`ROOTWRAP_FILTERS_DIR`], a directory of `rootwrap.conf`'s `filters_path` holding nothing but
/// filter files (a ConfigMap key cannot name `rootwrap.d/volume.filters`).
pub const CINDER_ETC_FILES: [(&str, &str); 4] = [
    ("api-paste.ini", include_str!("cinder_etc/api-paste.ini")),
    (
        "resource_filters.json",
        include_str!("cinder_etc/resource_filters.json"),
    ),
    ("rootwrap.conf", include_str!("cinder_etc/rootwrap.conf")),
    (
        ROOTWRAP_FILTERS_KEY,
        include_str!("cinder_etc/volume.filters"),
    ),
];
/// The ConfigMap key of the RPC services' readiness check
/// ([`super::containers::HEALTH_CHECK_SCRIPT`]): a Python script that reads the service's own rows
/// of the `services` table.
pub const HEALTH_CHECK_KEY: &str = "health_check.py";
/// The health check's text.
pub const HEALTH_CHECK_PY: &str = include_str!("cinder_etc/health_check.py");
/// The ConfigMap key of the rootwrap filters of cinder-volume and cinder-backup.
pub const ROOTWRAP_FILTERS_KEY: &str = "volume.filters";
/// Where the rootwrap filters are mounted: the second directory of the shipped `rootwrap.conf`'s
/// `filters_path` (`/etc/cinder/rootwrap.d,/usr/share/cinder/rootwrap`).
pub(crate) const ROOTWRAP_FILTERS_DIR: &str = "/usr/share/cinder/rootwrap";

/// A rendered config ConfigMap.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RenderedConfig {
    /// `{name}-config-{hash}`.
    pub name: String,
    /// sha256 of `data`.
    pub content_hash: String,
    /// File name → content.
    pub data: BTreeMap<String, String>,
    /// Owned keys the overlay replaced, as `section.key`, sorted.
    pub overridden_owned_keys: Vec<String>,
}

impl RenderedConfig {
    /// ExtraConfigHealthy for this render.
    pub(crate) fn extra_config_condition(&self) -> Cond {
        if self.overridden_owned_keys.is_empty() {
            Cond::true_(
                kind::EXTRA_CONFIG_HEALTHY,
                reason::NO_OWNED_KEYS_OVERRIDDEN,
                "extraConfig overrides no owned key",
            )
        } else {
            Cond::false_(
                kind::EXTRA_CONFIG_HEALTHY,
                reason::OWNED_KEYS_OVERRIDDEN,
                format!(
                    "extraConfig overrides operator-owned keys: {}",
                    self.overridden_owned_keys.join(", ")
                ),
            )
        }
    }
}

/// Why a render was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    #[error("config refused: {0}")]
    ControlCharacter(#[from] ControlCharacter),
}

impl ConfigError {
    /// SecretsReady=False / ConfigError (the Config step reports through SecretsReady).
    pub(crate) fn condition(&self) -> Cond {
        Cond::false_(kind::SECRETS_READY, reason::CONFIG_ERROR, self.to_string())
    }
}

fn cinder_conf(cinder: &str, spec: &CinderSpec) -> IniDoc {
    let mut d = IniDoc::new();
    d.set("DEFAULT", "host", cinder);
    d.set("DEFAULT", "auth_strategy", "keystone");
    d.set(
        "DEFAULT",
        "log_config_append",
        format!("{CONFIG_DIR}/logging.ini"),
    );
    d.set("DEFAULT", "state_path", "/var/lib/cinder");
    d.set(
        "DEFAULT",
        "osapi_volume_listen_port",
        names::API_PORT.to_string(),
    );
    d.set("DEFAULT", "storage_availability_zone", "nova");
    super::process_model::set_single_writer_pool(&mut d);
    let user = &spec.service_user;
    for (key, value) in [
        ("auth_type", "password"),
        ("auth_url", spec.keystone_endpoint.as_str()),
        ("www_authenticate_uri", spec.keystone_endpoint.as_str()),
        ("region_name", spec.region.as_str()),
        ("username", user.username.as_str()),
        ("project_name", user.project_name.as_str()),
        ("user_domain_name", user.user_domain_name.as_str()),
        ("project_domain_name", user.project_domain_name.as_str()),
        ("service_token_roles_required", "true"),
    ] {
        d.set("keystone_authtoken", key, value);
    }
    d.set("oslo_concurrency", "lock_path", "/var/lib/cinder/tmp");
    d.set(
        "oslo_middleware",
        "enable_proxy_headers_parsing",
        if spec.gateway.is_some() {
            "true"
        } else {
            "false"
        },
    );
    d
}

fn scheduler_conf() -> IniDoc {
    let mut d = IniDoc::new();
    d.set(
        "DEFAULT",
        "scheduler_driver",
        "cinder.scheduler.filter_scheduler.FilterScheduler",
    );
    d.set(
        "DEFAULT",
        "scheduler_default_filters",
        "AvailabilityZoneFilter,CapacityFilter,CapabilitiesFilter",
    );
    d.set("DEFAULT", "scheduler_default_weighers", "CapacityWeigher");
    d
}

const LOGGING_INI: &str = "[loggers]\nkeys = root, cinder\n\n[handlers]\nkeys = stdout\n\n[formatters]\nkeys = context\n\n\
[logger_root]\nlevel = WARNING\nhandlers = stdout\n\n[logger_cinder]\nlevel = INFO\nhandlers = stdout\nqualname = cinder\npropagate = 0\n\n\
[handler_stdout]\nclass = StreamHandler\nargs = (sys.stdout,)\nformatter = context\n\n\
[formatter_context]\nclass = oslo_log.formatters.ContextFormatter\n";

fn policy_yaml(rules: &BTreeMap<String, String>) -> Result<String, ConfigError> {
    let mut out = String::from("# Policy overrides from spec.extraConfig.policy\n");
    for (rule, check) in rules {
        for (what, s) in [("key", rule), ("value", check)] {
            if super::ini::has_control(s) {
                return Err(ControlCharacter {
                    section: POLICY_SECTION.into(),
                    what: format!("{what} {}", rule.escape_debug()),
                }
                .into());
            }
        }
        // Both sides as YAML double-quoted scalars.
        out.push_str(&format!("{}: {}\n", yaml_quote(rule), yaml_quote(check)));
    }
    Ok(out)
}

fn yaml_quote(s: &str) -> String {
    format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\""))
}

/// Renders the config ConfigMap of Cinder `cinder` from its spec.
pub fn render_config(cinder: &str, spec: &CinderSpec) -> Result<RenderedConfig, ConfigError> {
    let mut conf = cinder_conf(cinder, spec);
    let owned: Vec<(String, String)> = conf
        .keys()
        .map(|(s, k)| (s.to_string(), k.to_string()))
        .collect();
    let mut overridden = Vec::new();
    let mut policy: Option<&BTreeMap<String, String>> = None;
    for (section, entries) in &spec.extra_config {
        if section == POLICY_SECTION {
            policy = Some(entries);
            continue;
        }
        for (key, value) in entries {
            if owned.iter().any(|(s, k)| s == section && k == key) {
                overridden.push(format!("{section}.{key}"));
            }
            conf.set(section, key, value.as_str());
        }
    }
    let mut data = BTreeMap::new();
    if let Some(rules) = policy.filter(|r| !r.is_empty()) {
        conf.set(
            "oslo_policy",
            "policy_file",
            format!("{CONFIG_DIR}/policy.yaml"),
        );
        data.insert("policy.yaml".to_string(), policy_yaml(rules)?);
    }
    data.insert("cinder.conf".to_string(), conf.render()?);
    data.insert("scheduler.conf".to_string(), scheduler_conf().render()?);
    data.insert(API_UWSGI_INI.to_string(), api_uwsgi_ini(spec).render()?);
    data.insert(API_CONF.to_string(), api_conf(spec).render()?);
    data.insert("logging.ini".to_string(), LOGGING_INI.to_string());
    for (file, content) in CINDER_ETC_FILES {
        data.insert(file.to_string(), content.to_string());
    }
    data.insert(HEALTH_CHECK_KEY.to_string(), HEALTH_CHECK_PY.to_string());
    overridden.sort();
    let content_hash = map_digest(&data);
    Ok(RenderedConfig {
        name: names::config_map(cinder, &content_hash),
        content_hash,
        data,
        overridden_owned_keys: overridden,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> CinderSpec {
        let mut s = crate::test_fixtures::cinder().spec;
        s.keystone_endpoint = "https://keystone.example/v3".to_string();
        s
    }

    fn overlay(s: &mut CinderSpec, section: &str, key: &str, value: &str) {
        s.extra_config
            .entry(section.into())
            .or_default()
            .insert(key.into(), value.into());
    }

    #[test]
    fn renders_the_files_under_a_content_addressed_name() {
        let r = render_config("c1", &spec()).unwrap();
        assert_eq!(
            r.data.keys().collect::<Vec<_>>(),
            [
                "api-paste.ini",
                "api-uwsgi.ini",
                "api.conf",
                "cinder.conf",
                "health_check.py",
                "logging.ini",
                "resource_filters.json",
                "rootwrap.conf",
                "scheduler.conf",
                "volume.filters"
            ]
        );
        assert!(r.name.starts_with("c1-config-"));
        assert_eq!(r.name, names::config_map("c1", &r.content_hash));
        let conf = &r.data["cinder.conf"];
        assert!(conf.starts_with("[DEFAULT]\nhost = c1\n"));
        assert!(conf.contains("auth_url = https://keystone.example/v3"));
        assert!(
            !conf.contains("transport_url") && !conf.contains("connection ="),
            "secrets come from the environment"
        );
        assert_eq!(r, render_config("c1", &spec()).unwrap(), "deterministic");
        assert!(r.extra_config_condition().status);
    }

    #[test]
    fn cinder_conf_carries_no_option_a_supported_release_lacks() {
        // oslo.messaging 18 (2026.2) has no [oslo_messaging_rabbit] heartbeat_in_pthread and 17
        // (2026.1) deprecates it; real Cinder's oslo-config-validator rejects it
        // (tests/tests/deploy/real_cinder_config.rs).
        let conf = &render_config("c1", &spec()).unwrap().data["cinder.conf"];
        assert!(!conf.contains("heartbeat_in_pthread"), "{conf}");
        assert!(!conf.contains("[oslo_messaging_rabbit]"), "{conf}");
    }

    #[test]
    fn the_configmap_carries_the_files_the_mount_hides_from_the_image() {
        let r = render_config("c1", &spec()).unwrap();
        assert!(r.data["api-paste.ini"].contains("[composite:osapi_volume]"));
        assert!(r.data["api-paste.ini"].contains("/healthcheck: healthcheck"));
        assert!(r.data["resource_filters.json"].contains("\"volume\""));
        assert!(
            r.data["rootwrap.conf"]
                .lines()
                .any(|l| l.starts_with("filters_path=") && l.contains(ROOTWRAP_FILTERS_DIR)),
            "the filters' mount is a directory of filters_path"
        );
        assert!(
            r.data[ROOTWRAP_FILTERS_KEY]
                .starts_with("# cinder-rootwrap command filters for volume nodes")
        );
        assert!(r.data[ROOTWRAP_FILTERS_KEY].contains("[Filters]"));
    }

    #[test]
    fn a_content_change_changes_the_name() {
        let a = render_config("c1", &spec()).unwrap();
        let mut s = spec();
        overlay(&mut s, "DEFAULT", "debug", "true");
        let b = render_config("c1", &s).unwrap();
        assert_ne!(a.name, b.name);
        assert!(b.data["cinder.conf"].contains("debug = true"));
        assert!(b.overridden_owned_keys.is_empty());
        assert_eq!(b.extra_config_condition().reason, "NoOwnedKeysOverridden");
    }

    #[test]
    fn overriding_an_owned_key_is_reported() {
        let mut s = spec();
        overlay(&mut s, "keystone_authtoken", "auth_url", "http://other/v3");
        overlay(&mut s, "DEFAULT", "host", "x");
        let r = render_config("c1", &s).unwrap();
        assert_eq!(
            r.overridden_owned_keys,
            ["DEFAULT.host", "keystone_authtoken.auth_url"]
        );
        assert!(r.data["cinder.conf"].contains("auth_url = http://other/v3"));
        let c = r.extra_config_condition();
        assert_eq!(
            (c.type_, c.status, c.reason),
            ("ExtraConfigHealthy", false, "OwnedKeysOverridden")
        );
    }

    #[test]
    fn control_characters_in_section_key_or_value_are_a_config_error() {
        for (sec, key, val) in crate::planning::ini::tests::CONTROL_CHARACTERS {
            let mut s = spec();
            overlay(&mut s, sec, key, val);
            let c = render_config("c1", &s).unwrap_err().condition();
            let refused = (c.type_, c.status, c.reason);
            assert_eq!(refused, ("SecretsReady", false, "ConfigError"), "{sec:?}");
            assert!(!c.message.contains("[evil]"), "{}", c.message);
        }
    }

    #[test]
    fn policy_overrides_render_policy_yaml() {
        let mut s = spec();
        overlay(&mut s, POLICY_SECTION, "volume:delete", "rule:admin_api");
        let r = render_config("c1", &s).unwrap();
        assert_eq!(
            r.data["policy.yaml"],
            "# Policy overrides from spec.extraConfig.policy\n\"volume:delete\": \"rule:admin_api\"\n"
        );
        assert!(r.data["cinder.conf"].contains("policy_file = /etc/cinder/policy.yaml"));
        overlay(&mut s, POLICY_SECTION, "x", "bad\n");
        assert!(render_config("c1", &s).is_err());
    }
}
