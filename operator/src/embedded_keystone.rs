//! The real Keystone of `run --embedded --real-cinder`, when its venv is prepared
//! (`tests/real-cinder/keystone-setup.sh`): a [`KeystoneServer`] on the real MariaDB with the
//! sample Cinder's service user (its name, project and region from the Cinder, its password what
//! the sample ClusterSecretStore holds for the Secret the Cinder names), reached by the pods as
//! Service `keystone` on port 5000 of the Cinder's namespace, the URL the Cinder's
//! `keystoneEndpoint` is pointed at before it is applied. Once the cinder-api Service has a
//! ClusterIP, the API is registered in the catalog at that address (the host reaches it through
//! the service proxy) and the `openstack` command a user runs from the host is printed, with the
//! password read from the Secret by kubectl, not printed.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use cinder_sim::real_servers::keystone::{KEYSTONE_SETUP, keystone_root};
use cinder_sim::real_servers::{KeystoneOptions, KeystoneServer, MariaDbServer, expose};
use k8s_openapi::api::core::v1::Service;
use serde_json::Value;

use crate::crd::CinderSpec;
use crate::embedded::Manifest;

/// The Service the pods reach Keystone through, and its port.
const SERVICE: &str = "keystone";
const PORT: u16 = 5000;

/// The sample Cinder's service user, as the samples hold it.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct ServiceUserEntry {
    /// The Cinder's namespace.
    pub namespace: String,
    pub username: String,
    pub project: String,
    pub region: String,
    /// The Secret and key the Cinder reads the password from.
    pub secret: String,
    pub key: String,
    pub password: String,
}

/// The `fake` provider data of the ClusterSecretStores in `manifests`.
fn store_entries(manifests: &[Manifest]) -> Vec<Value> {
    manifests
        .iter()
        .filter(|m| m.gvk.kind == "ClusterSecretStore")
        .flat_map(|m| {
            m.object
                .data
                .pointer("/spec/provider/fake/data")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default()
        })
        .collect()
}

/// The service user of the first Cinder in `manifests`, its password followed from the
/// Cinder's `serviceUser.secretRef` to the ExternalSecret that makes that Secret and from its
/// remote reference to the store's value.
pub(crate) fn service_user_entry(manifests: &[Manifest]) -> Option<ServiceUserEntry> {
    let cinder = manifests.iter().find(|m| m.gvk.kind == "Cinder")?;
    let namespace = cinder.object.metadata.namespace.clone()?;
    let spec: CinderSpec = serde_json::from_value(cinder.object.data.get("spec")?.clone()).ok()?;
    let user = &spec.service_user;
    let secret = user.secret_ref.name.clone();
    let key = user
        .secret_ref
        .key
        .clone()
        .unwrap_or_else(|| "password".to_owned());
    let external = manifests.iter().find(|m| {
        m.gvk.kind == "ExternalSecret"
            && m.object.metadata.namespace.as_deref() == Some(namespace.as_str())
            && m.object
                .data
                .pointer("/spec/target/name")
                .and_then(Value::as_str)
                .or(m.object.metadata.name.as_deref())
                == Some(secret.as_str())
    })?;
    let remote = external
        .object
        .data
        .pointer("/spec/data")?
        .as_array()?
        .iter()
        .find(|d| d.get("secretKey").and_then(Value::as_str) == Some(key.as_str()))?
        .get("remoteRef")?;
    let remote_key = remote.get("key")?.as_str()?;
    let value = store_entries(manifests)
        .into_iter()
        .find(|e| e.get("key").and_then(Value::as_str) == Some(remote_key))?
        .get("value")?
        .as_str()?
        .to_owned();
    let password = match remote.get("property").and_then(Value::as_str) {
        Some(property) => serde_json::from_str::<Value>(&value)
            .ok()?
            .get(property)?
            .as_str()?
            .to_owned(),
        None => value,
    };
    Some(ServiceUserEntry {
        namespace,
        username: user.username.clone(),
        project: user.project_name.clone(),
        region: spec.region.clone(),
        secret,
        key,
        password,
    })
}

/// The URL the pods reach Keystone at in `namespace`.
fn pod_url(namespace: &str) -> String {
    format!("http://{SERVICE}.{namespace}.svc:{PORT}/v3")
}

/// The real Keystone and the task that registers the Cinder API in its catalog.
pub(crate) struct RealKeystone {
    server: Arc<KeystoneServer>,
    entry: ServiceUserEntry,
    register: Option<tokio::task::JoinHandle<()>>,
}

impl RealKeystone {
    /// Starts Keystone on `mariadb` with the samples' service user; `None` (after a line saying
    /// why) when its venv is not prepared or the samples hold no such user.
    pub(crate) async fn start(
        mariadb: &Arc<MariaDbServer>,
        samples: &[Manifest],
    ) -> anyhow::Result<Option<RealKeystone>> {
        if !KeystoneServer::available() {
            println!(
                "no real Keystone (--real-cinder): {} is not prepared (run {KEYSTONE_SETUP}); \
                 without it the API answers only requests that need no token",
                keystone_root().display()
            );
            return Ok(None);
        }
        let Some(entry) = service_user_entry(samples) else {
            println!(
                "no real Keystone (--real-cinder): the samples hold no Cinder whose service user's \
                 password the ClusterSecretStore has"
            );
            return Ok(None);
        };
        println!("starting a real Keystone (--real-cinder) ...");
        let opts = KeystoneOptions {
            region: entry.region.clone(),
            service_project: entry.project.clone(),
            service_user: entry.username.clone(),
            service_password: entry.password.clone(),
            internal_url: Some(pod_url(&entry.namespace)),
        };
        let db = Arc::clone(mariadb);
        let server = tokio::task::spawn_blocking(move || KeystoneServer::start(&db, &opts))
            .await?
            .map_err(anyhow::Error::msg)
            .context("Keystone")?;
        Ok(Some(RealKeystone {
            server: Arc::new(server),
            entry,
            register: None,
        }))
    }

    /// Makes Keystone Service `keystone` of the Cinder's namespace (before any pod starts, so
    /// the pods' hosts files name it), points the samples' Cinders at it, and starts the task
    /// that registers the API once its Service has a ClusterIP.
    pub(crate) async fn serve(
        &mut self,
        client: &kube::Client,
        manifests: &mut [Manifest],
    ) -> anyhow::Result<()> {
        let namespace = self.entry.namespace.clone();
        expose(client, &namespace, SERVICE, PORT, self.server.port()).await?;
        for m in manifests.iter_mut() {
            if m.gvk.kind == "Cinder"
                && m.object.metadata.namespace.as_deref() == Some(namespace.as_str())
            {
                m.object.data["spec"]["keystoneEndpoint"] = pod_url(&namespace).into();
            }
        }
        let server = Arc::clone(&self.server);
        let services: kube::Api<Service> = kube::Api::namespaced(client.clone(), &namespace);
        let hint = self.user_hint();
        self.register = Some(tokio::spawn(async move {
            let ip = loop {
                if let Ok(Some(s)) = services.get_opt("cinder-api").await
                    && let Some(ip) = s.spec.and_then(|s| s.cluster_ip)
                    && !ip.is_empty()
                    && ip != "None"
                {
                    break ip;
                }
                tokio::time::sleep(Duration::from_secs(1)).await;
            };
            let url = format!("http://{ip}:8776/v3");
            let region = hint.region.clone();
            let u = url.clone();
            let registered = tokio::task::spawn_blocking(move || {
                server.register_service("block-storage", "cinderv3", &region, &u)
            })
            .await;
            match registered {
                Ok(Ok(())) => println!("{}", hint.text(&url)),
                Ok(Err(e)) => eprintln!("real Keystone: registering the Cinder API: {e}"),
                Err(e) => eprintln!("real Keystone: registering the Cinder API: {e}"),
            }
        }));
        Ok(())
    }

    fn user_hint(&self) -> UserHint {
        UserHint {
            auth_url: self.server.url(),
            openstack: self.server.openstack_path().display().to_string(),
            username: self.entry.username.clone(),
            project: self.entry.project.clone(),
            region: self.entry.region.clone(),
            namespace: self.entry.namespace.clone(),
            secret: self.entry.secret.clone(),
            key: self.entry.key.clone(),
        }
    }

    /// Stops the registration task and Keystone (by its pid, off the runtime's threads).
    pub(crate) async fn stop(mut self) {
        if let Some(task) = self.register.take() {
            task.abort();
            let _ = task.await;
        }
        let server = self.server;
        let _ = tokio::task::spawn_blocking(move || {
            // A registration still running on a blocking thread holds the other reference for
            // at most its few seconds; the last reference dropped stops the server.
            drop(server);
        })
        .await;
    }
}

/// What the printed `openstack` command names.
struct UserHint {
    auth_url: String,
    openstack: String,
    username: String,
    project: String,
    region: String,
    namespace: String,
    secret: String,
    key: String,
}

impl UserHint {
    /// The lines a user runs from the host; the password comes from the Secret by kubectl.
    fn text(&self, api: &str) -> String {
        format!(
            "real Keystone (--real-cinder): the Cinder API is in its catalog at {api}; as the sample's service user, from this host:\n  \
             export OS_AUTH_URL={auth} OS_IDENTITY_API_VERSION=3 OS_USERNAME={user} OS_PROJECT_NAME={project} \
             OS_USER_DOMAIN_NAME=Default OS_PROJECT_DOMAIN_NAME=Default OS_REGION_NAME={region} OS_INTERFACE=public\n  \
             export OS_PASSWORD=\"$(kubectl -n {ns} get secret {secret} -o jsonpath='{{.data.{key}}}' | base64 -d)\"\n  \
             {openstack} volume service list",
            auth = self.auth_url,
            user = self.username,
            project = self.project,
            region = self.region,
            ns = self.namespace,
            secret = self.secret,
            key = self.key,
            openstack = self.openstack,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    #[test]
    fn the_service_user_comes_from_the_cinder_and_the_sample_store() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/real-cinder/samples");
        let manifests = crate::embedded::read_bootstrap(&dir).unwrap();
        let entry = service_user_entry(&manifests).unwrap();
        assert_eq!(entry.namespace, "openstack");
        assert_eq!(entry.username, "cinder");
        assert_eq!(entry.project, "service");
        assert_eq!(entry.region, "RegionOne");
        assert_eq!(entry.secret, "cinder-keystone-credentials");
        assert_eq!(entry.key, "password");
        // The value of sim/fixtures/run-embedded/10-secret-store.yaml's openstack/cinder/keystone.
        assert_eq!(entry.password, "sample-keystone-password-7e2a");
        assert!(service_user_entry(&[]).is_none());
        assert_eq!(
            pod_url("openstack"),
            "http://keystone.openstack.svc:5000/v3"
        );
    }
}
