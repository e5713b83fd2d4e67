//! `run --embedded --real-cinder`: the embedded cluster with real parts behind it. A real
//! MariaDB server (the mariadb-operator fixture reconciles against it, its MariaDB reached as its
//! Service), a real RabbitMQ broker with the user, password and vhost of the sample store's
//! messaging entry (reached as the Service that entry's `host` names), one process node, and the
//! Cinder images mapped to the roots `tests/real-cinder/setup.sh` prepares (`$CINDER_ROOTS`,
//! default `/var/tmp/cinder-roots`). With the Keystone venv `tests/real-cinder/keystone-setup.sh`
//! prepares, a real Keystone too ([`crate::embedded_keystone`]). The servers live as long as
//! [`RealServers`] and stop by their own pids when it is dropped.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context as _;
use cinder_sim::ClusterConfig;
use cinder_sim::agent::ImageMap;
use cinder_sim::real_servers::{MariaDbServer, RabbitMqServer, expose};
use serde_json::Value;

use crate::embedded::Manifest;

/// The servers behind a `--real-cinder` cluster.
pub(crate) struct RealServers {
    mariadb: Arc<MariaDbServer>,
    broker: RabbitMqServer,
    /// The real Keystone (when its venv is prepared).
    keystone: Option<crate::embedded_keystone::RealKeystone>,
}

/// What the sample store holds for the broker.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct BrokerEntry {
    pub username: String,
    pub password: String,
    /// The Service's name and namespace, from `host` (`<name>.<namespace>.svc`).
    pub service: String,
    pub namespace: String,
    pub port: u16,
    pub vhost: String,
}

/// The broker entry of the `fake` provider data of the ClusterSecretStores in `manifests`: the
/// value (a JSON object) with `username`, `password` and a `host` of the form
/// `<service>.<namespace>.svc`.
pub(crate) fn broker_entry(manifests: &[Manifest]) -> Option<BrokerEntry> {
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
        .find_map(|entry| {
            let value: Value = serde_json::from_str(entry.get("value")?.as_str()?).ok()?;
            let text = |k: &str| value.get(k).and_then(Value::as_str).map(str::to_owned);
            let host = text("host")?;
            let mut parts = host.split('.');
            let (service, namespace) = (parts.next()?.to_owned(), parts.next()?.to_owned());
            Some(BrokerEntry {
                username: text("username")?,
                password: text("password")?,
                service,
                namespace,
                port: text("port").and_then(|p| p.parse().ok()).unwrap_or(5672),
                vhost: text("vhost").unwrap_or_else(|| "/".to_owned()),
            })
        })
}

/// Where the real-Cinder roots are.
fn roots_dir() -> PathBuf {
    std::env::var_os("CINDER_ROOTS")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/var/tmp/cinder-roots"))
}

impl RealServers {
    /// Starts MariaDB and RabbitMQ (about half a minute on 2 cores); needs root.
    pub(crate) async fn start(samples: &[Manifest]) -> anyhow::Result<RealServers> {
        use std::os::unix::fs::MetadataExt;
        // /proc/self belongs to the process's effective user.
        if std::fs::metadata("/proc/self").map(|m| m.uid()).ok() != Some(0) {
            anyhow::bail!(
                "--real-cinder needs root (process nodes, the service proxy, the servers)"
            );
        }
        let (mariadb, broker) = tokio::join!(
            tokio::task::spawn_blocking(|| MariaDbServer::start(500)),
            tokio::task::spawn_blocking(RabbitMqServer::start),
        );
        let mariadb = mariadb?.map_err(anyhow::Error::msg).context("MariaDB")?;
        let broker = broker?.map_err(anyhow::Error::msg).context("RabbitMQ")?;
        let mariadb = Arc::new(mariadb);
        let keystone = crate::embedded_keystone::RealKeystone::start(&mariadb, samples).await?;
        Ok(RealServers {
            mariadb,
            broker,
            keystone,
        })
    }

    /// `config` with one process node running the real Cinder images, the service proxy and
    /// the mariadb-operator fixture on the real server.
    pub(crate) fn configure(&self, config: &mut ClusterConfig) {
        config.service_proxy = true;
        config.controllers.nodes.count = 0;
        config.controllers.nodes.process = 1;
        config.controllers.mariadb.real = Some(Arc::clone(&self.mariadb));
        config.process_runtime.images = ImageMap::with_real_cinder(&roots_dir());
    }

    /// Makes the broker what the samples' messaging Secret names: its user, password and
    /// vhost, and its Service (before any pod starts, so the pods' hosts files name it).
    pub(crate) async fn serve_broker(
        self,
        client: &kube::Client,
        manifests: &[Manifest],
    ) -> anyhow::Result<RealServers> {
        let entry = broker_entry(manifests)
            .context("--real-cinder: no ClusterSecretStore entry names the broker's host")?;
        let namespaces: kube::Api<k8s_openapi::api::core::v1::Namespace> =
            kube::Api::all(client.clone());
        if namespaces.get_opt(&entry.namespace).await?.is_none() {
            let ns: k8s_openapi::api::core::v1::Namespace =
                serde_json::from_value(serde_json::json!({"metadata": {"name": entry.namespace}}))?;
            namespaces.create(&Default::default(), &ns).await?;
        }
        expose(
            client,
            &entry.namespace,
            &entry.service,
            entry.port,
            self.broker.port(),
        )
        .await?;
        let (user, password, vhost) = (entry.username, entry.password, entry.vhost);
        tokio::task::spawn_blocking(move || {
            self.broker
                .add_user(&user, &password, &vhost)
                .map(|()| self)
                .map_err(anyhow::Error::msg)
        })
        .await?
    }

    /// With the real Keystone: makes it what the samples name (its Service, the Cinders'
    /// `keystoneEndpoint`, the service user of the sample store) and registers the Cinder API in
    /// its catalog once the API's Service is there.
    pub(crate) async fn serve_keystone(
        &mut self,
        client: &kube::Client,
        manifests: &mut [Manifest],
    ) -> anyhow::Result<()> {
        match &mut self.keystone {
            Some(keystone) => keystone.serve(client, manifests).await,
            None => Ok(()),
        }
    }

    /// Stops the servers (blocking work, off the runtime's threads).
    pub(crate) async fn stop(mut self) {
        if let Some(keystone) = self.keystone.take() {
            keystone.stop().await;
        }
        let _ = tokio::task::spawn_blocking(move || drop(self)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    #[test]
    fn the_broker_entry_comes_from_the_sample_store() {
        let manifests = crate::embedded::read_bootstrap(
            &Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/samples"),
        )
        .unwrap();
        let entry = broker_entry(&manifests).unwrap();
        assert_eq!(entry.service, "rabbitmq");
        assert_eq!(entry.namespace, "openstack");
        assert_eq!(entry.port, 5672);
        assert_eq!(entry.vhost, "cinder");
        assert_eq!(entry.username, "cinder");
        assert!(broker_entry(&[]).is_none());
    }
}
