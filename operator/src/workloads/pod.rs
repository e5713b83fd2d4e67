//! The pod template of the Cinder's workloads: the rotation annotations
//! (`cinder.c5c3.io/authtoken-hash` on the API only; `db-connection-hash` and
//! `transport-url-hash` on every workload; `installed-release` on scheduler, volume and backup),
//! the environment from the derived Secrets, and the volumes (the config ConfigMap as the config
//! directory, the rootwrap filters of volume and backup, projection Secrets and NFS exports). A
//! changed digest therefore rolls exactly the workloads that carry it.

use crate::crd::{Cinder, NfsSpec};
use crate::names::{self, Component};
use crate::pipeline::Artefacts;
use crate::planning::config::{
    CONFIG_DIR, ENV_AUTHTOKEN_PASSWORD, ENV_DB_CONNECTION, ENV_TRANSPORT_URL, ROOTWRAP_FILTERS_DIR,
    ROOTWRAP_FILTERS_KEY,
};
use crate::planning::connection_urls::{DB_CONNECTION_KEY, TRANSPORT_URL_KEY};
use crate::steps::secrets::SERVICE_USER_PASSWORD_KEY;
use k8s_openapi::api::core::v1::{
    ConfigMapVolumeSource, EnvVar, EnvVarSource, NFSVolumeSource, ProjectedVolumeSource,
    SecretKeySelector, SecretProjection, Volume, VolumeMount, VolumeProjection,
};
use std::collections::BTreeMap;

/// The oslo.config environment variable carrying `[DEFAULT] host`.
pub(crate) const ENV_HOST: &str = "OS_DEFAULT__HOST";
/// Where a workload's NFS exports are mounted: `/var/lib/cinder/mnt/{backend}`.
pub(crate) fn nfs_mount_dir(backend: &str) -> String {
    format!("/var/lib/cinder/mnt/{backend}")
}

/// The rotation annotations a workload carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Carries {
    pub authtoken: bool,
    pub installed_release: bool,
}

impl Carries {
    /// What `component` carries: the API authenticates tokens (authtoken) and rolls during the
    /// upgrade by image; the RPC services carry the installed release (their RPC version pin).
    pub(crate) fn of(component: Component) -> Carries {
        match component {
            Component::Api => Carries {
                authtoken: true,
                installed_release: false,
            },
            _ => Carries {
                authtoken: false,
                installed_release: true,
            },
        }
    }
}

/// The pod-template annotations of `component` from the pass's artefacts.
pub(crate) fn pod_annotations(
    component: Component,
    artefacts: &Artefacts,
    installed_release: Option<&str>,
) -> BTreeMap<String, String> {
    let carries = Carries::of(component);
    let mut out = BTreeMap::new();
    let mut put = |k: &str, v: Option<&str>| {
        if let Some(v) = v {
            out.insert(k.to_string(), v.to_string());
        }
    };
    if carries.authtoken {
        put(
            names::AUTHTOKEN_HASH_ANNOTATION,
            artefacts.authtoken_hash.as_deref(),
        );
    }
    put(
        names::DB_CONNECTION_HASH_ANNOTATION,
        artefacts.db_connection_hash.as_deref(),
    );
    put(
        names::TRANSPORT_URL_HASH_ANNOTATION,
        artefacts.transport_url_hash.as_deref(),
    );
    if carries.installed_release {
        put(names::INSTALLED_RELEASE_ANNOTATION, installed_release);
    }
    out
}

/// The environment of `component`: the DSN and transport URL from the derived Secrets, and for
/// the API the service-user password from its derived Secret (all three beside the pods).
pub(crate) fn workload_env(cinder: &Cinder, component: Component) -> Vec<EnvVar> {
    let name = cinder.metadata.name.clone().unwrap_or_default();
    let mut env = vec![
        env_from_secret(
            ENV_DB_CONNECTION,
            &names::db_connection_secret(&name),
            DB_CONNECTION_KEY,
        ),
        env_from_secret(
            ENV_TRANSPORT_URL,
            &names::transport_url_secret(&name),
            TRANSPORT_URL_KEY,
        ),
    ];
    if Carries::of(component).authtoken {
        env.push(env_from_secret(
            ENV_AUTHTOKEN_PASSWORD,
            &names::service_user_secret(&name),
            SERVICE_USER_PASSWORD_KEY,
        ));
    }
    env
}

/// One extra volume of a workload and where it is mounted.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct ExtraVolume {
    pub volume: Volume,
    pub mount_path: String,
}

impl ExtraVolume {
    /// A projection Secret mounted read-only at `mount_path`.
    pub(crate) fn secret(volume_name: &str, secret: &str, mount_path: String) -> ExtraVolume {
        ExtraVolume {
            volume: Volume {
                name: volume_name.to_string(),
                projected: Some(ProjectedVolumeSource {
                    sources: Some(vec![VolumeProjection {
                        secret: Some(SecretProjection {
                            name: secret.to_string(),
                            optional: Some(false),
                            ..Default::default()
                        }),
                        ..Default::default()
                    }]),
                    ..Default::default()
                }),
                ..Default::default()
            },
            mount_path,
        }
    }

    /// An NFS export mounted at [`nfs_mount_dir`] of `backend`.
    pub(crate) fn nfs(volume_name: &str, backend: &str, nfs: &NfsSpec) -> ExtraVolume {
        ExtraVolume {
            volume: Volume {
                name: volume_name.to_string(),
                nfs: Some(NFSVolumeSource {
                    server: nfs.server.clone(),
                    path: nfs.path.clone(),
                    read_only: Some(false),
                }),
                ..Default::default()
            },
            mount_path: nfs_mount_dir(backend),
        }
    }
}

/// The read-only mount of the `config` volume (the rendered config ConfigMap) at [`CONFIG_DIR`].
pub(crate) fn config_mount() -> VolumeMount {
    VolumeMount {
        name: "config".to_string(),
        mount_path: CONFIG_DIR.to_string(),
        read_only: Some(true),
        ..Default::default()
    }
}

/// The `rootwrap-filters` volume of cinder-volume and cinder-backup, the only processes that run
/// `cinder-rootwrap`: the config ConfigMap's filter file alone, mounted read-only at
/// [`ROOTWRAP_FILTERS_DIR`] (a directory of `rootwrap.conf`'s `filters_path`, which must hold
/// nothing but filter files).
pub(crate) fn rootwrap_filters_volume(config_map: &str) -> (Volume, VolumeMount) {
    let volume = Volume {
        name: "rootwrap-filters".to_string(),
        config_map: Some(ConfigMapVolumeSource {
            name: config_map.to_string(),
            items: Some(vec![k8s_openapi::api::core::v1::KeyToPath {
                key: ROOTWRAP_FILTERS_KEY.to_string(),
                path: ROOTWRAP_FILTERS_KEY.to_string(),
                ..Default::default()
            }]),
            ..Default::default()
        }),
        ..Default::default()
    };
    let mount = VolumeMount {
        name: volume.name.clone(),
        mount_path: ROOTWRAP_FILTERS_DIR.to_string(),
        read_only: Some(true),
        ..Default::default()
    };
    (volume, mount)
}

/// `name` set from `key` of the Cinder's derived Secret `secret` (which must exist).
pub(crate) fn env_from_secret(name: &str, secret: &str, key: &str) -> EnvVar {
    EnvVar {
        name: name.to_string(),
        value_from: Some(EnvVarSource {
            secret_key_ref: Some(SecretKeySelector {
                name: secret.to_string(),
                key: key.to_string(),
                optional: Some(false),
            }),
            ..Default::default()
        }),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_fixtures::{artefacts, cinder};

    #[test]
    fn authtoken_only_on_the_api_installed_release_only_on_rpc_services() {
        let a = artefacts();
        let api = pod_annotations(Component::Api, &a, Some("2026.1"));
        assert_eq!(
            api.get(names::AUTHTOKEN_HASH_ANNOTATION)
                .map(String::as_str),
            Some("a1")
        );
        assert!(!api.contains_key(names::INSTALLED_RELEASE_ANNOTATION));
        for c in [Component::Scheduler, Component::Volume, Component::Backup] {
            let p = pod_annotations(c, &a, Some("2026.1"));
            assert!(!p.contains_key(names::AUTHTOKEN_HASH_ANNOTATION));
            assert_eq!(p[names::INSTALLED_RELEASE_ANNOTATION], "2026.1");
            assert_eq!(p[names::DB_CONNECTION_HASH_ANNOTATION], "d1");
            assert_eq!(p[names::TRANSPORT_URL_HASH_ANNOTATION], "t1");
        }
    }

    #[test]
    fn api_env_carries_the_password_others_do_not() {
        let c = cinder();
        let names_of = |comp| {
            workload_env(&c, comp)
                .into_iter()
                .map(|e| e.name)
                .collect::<Vec<_>>()
        };
        assert!(names_of(Component::Api).contains(&ENV_AUTHTOKEN_PASSWORD.to_string()));
        assert!(!names_of(Component::Scheduler).contains(&ENV_AUTHTOKEN_PASSWORD.to_string()));
        assert!(names_of(Component::Volume).contains(&ENV_DB_CONNECTION.to_string()));
    }
}
