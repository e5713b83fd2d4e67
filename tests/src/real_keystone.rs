//! A real Keystone behind the real-Cinder set-up ([`crate::real_cinder_cluster`] with
//! `RealCinderOptions::keystone`): a [`KeystoneServer`] on the cluster's MariaDB with the sample
//! Cinder's service user (`cinder` in project `service`, the sample store's password), reached by
//! the pods as Service `keystone` in the samples' namespace on port 5000 (the URL the sample
//! Cinder's `keystoneEndpoint` is pointed at, and the identity endpoint of interface `internal`
//! that keystonemiddleware uses), and by the host on its loopback port. The catalog's
//! `block-storage` endpoints are the cinder-api Service's ClusterIP, which the host reaches
//! through the service proxy. Beside it, the venv's `openstack` client run from the host.

use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use cinder_sim::real_servers::{KeystoneOptions, KeystoneServer, MariaDbServer, expose};
use k8s_openapi::api::core::v1::Service;
use kube::api::Api;

use crate::real_cinder::SAMPLES_NS;

/// The sample store's Keystone password of the Cinder service user
/// (sim/fixtures/run-embedded/10-secret-store.yaml `openstack/cinder/keystone`).
pub const KEYSTONE_PASSWORD: &str = "sample-keystone-password-7e2a";
/// The sample Cinder's service user and project (tests/real-cinder/samples/40-cinder.yaml).
pub const SERVICE_USER: &str = "cinder";
pub const SERVICE_PROJECT: &str = "service";
/// The region of the sample Cinder.
pub const REGION: &str = "RegionOne";
/// The Service the pods reach Keystone through, and its port.
pub const KEYSTONE_SERVICE: &str = "keystone";
pub const KEYSTONE_PORT: u16 = 5000;
/// How long the cinder-api Service may take to get its ClusterIP after the samples are applied.
const API_SERVICE_TIMEOUT: Duration = Duration::from_secs(300);

/// The URL the pods reach Keystone at: `http://keystone.<samples' namespace>.svc:5000/v3`.
pub fn pod_url() -> String {
    format!("http://{KEYSTONE_SERVICE}.{SAMPLES_NS}.svc:{KEYSTONE_PORT}/v3")
}

/// Starts Keystone on `db` with the sample Cinder's service user (blocking work, off the
/// runtime's threads).
pub async fn start_keystone(db: Arc<MariaDbServer>) -> anyhow::Result<KeystoneServer> {
    let opts = KeystoneOptions {
        region: REGION.to_owned(),
        service_project: SERVICE_PROJECT.to_owned(),
        service_user: SERVICE_USER.to_owned(),
        service_password: KEYSTONE_PASSWORD.to_owned(),
        internal_url: Some(pod_url()),
    };
    let started = Instant::now();
    let keystone = tokio::task::spawn_blocking(move || KeystoneServer::start(&db, &opts))
        .await?
        .map_err(anyhow::Error::msg)
        .context("Keystone")?;
    eprintln!(
        "Keystone up after {:.1} s ({})",
        started.elapsed().as_secs_f64(),
        keystone.url()
    );
    Ok(keystone)
}

/// Makes Keystone reachable to the pods as Service `keystone` on port 5000 (before any pod
/// starts, so the pods' hosts files name it).
pub async fn serve_keystone(
    client: &kube::Client,
    keystone: &KeystoneServer,
) -> anyhow::Result<()> {
    expose(
        client,
        SAMPLES_NS,
        KEYSTONE_SERVICE,
        KEYSTONE_PORT,
        keystone.port(),
    )
    .await?;
    Ok(())
}

/// The cinder-api Service's ClusterIP, once it has one (within `timeout`).
pub async fn api_cluster_ip(client: &kube::Client, timeout: Duration) -> anyhow::Result<String> {
    let services: Api<Service> = Api::namespaced(client.clone(), SAMPLES_NS);
    let since = Instant::now();
    loop {
        if let Ok(Some(s)) = services.get_opt("cinder-api").await
            && let Some(ip) = s.spec.and_then(|s| s.cluster_ip)
            && !ip.is_empty()
            && ip != "None"
        {
            return Ok(ip);
        }
        if since.elapsed() > timeout {
            bail!(
                "the cinder-api Service has no ClusterIP within {} s",
                timeout.as_secs()
            );
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// Registers the Cinder API in the catalog once its Service has a ClusterIP: service
/// `block-storage` (name `cinderv3`) at `http://<ClusterIP>:8776/v3`, the URL the host reaches
/// through the service proxy. Returns that URL.
pub async fn register_cinder(
    client: &kube::Client,
    keystone: &Arc<KeystoneServer>,
) -> anyhow::Result<String> {
    let ip = api_cluster_ip(client, API_SERVICE_TIMEOUT).await?;
    let url = format!("http://{ip}:8776/v3");
    let k = Arc::clone(keystone);
    let u = url.clone();
    tokio::task::spawn_blocking(move || {
        k.register_service("block-storage", "cinderv3", REGION, &u)
    })
    .await?
    .map_err(anyhow::Error::msg)
    .context("registering the Cinder API in Keystone")?;
    Ok(url)
}

/// The venv's `openstack` client authenticating at `keystone` as `user` of `project` with
/// `password` (in the environment, never on the command line).
pub fn openstack_as(
    keystone: &KeystoneServer,
    user: &str,
    project: &str,
    password: &str,
) -> Command {
    let mut c = keystone.openstack();
    c.env("OS_AUTH_URL", keystone.url())
        .env("OS_IDENTITY_API_VERSION", "3")
        .env("OS_USERNAME", user)
        .env("OS_PASSWORD", password)
        .env("OS_PROJECT_NAME", project)
        .env("OS_USER_DOMAIN_NAME", "Default")
        .env("OS_PROJECT_DOMAIN_NAME", "Default")
        .env("OS_REGION_NAME", REGION)
        .env("OS_INTERFACE", "public");
    c
}

/// `openstack ARGS` as the sample Cinder's service user: its stdout, or `Err` with its status
/// and stderr.
pub async fn openstack(keystone: &Arc<KeystoneServer>, args: &[&str]) -> anyhow::Result<String> {
    openstack_with(keystone, KEYSTONE_PASSWORD, args).await
}

/// `openstack ARGS` as the service user with `password`.
pub async fn openstack_with(
    keystone: &Arc<KeystoneServer>,
    password: &str,
    args: &[&str],
) -> anyhow::Result<String> {
    let mut c = openstack_as(keystone, SERVICE_USER, SERVICE_PROJECT, password);
    c.args(args);
    let what = format!("openstack {}", args.join(" "));
    let out = tokio::task::spawn_blocking(move || c.output())
        .await?
        .with_context(|| format!("running {what}"))?;
    if !out.status.success() {
        bail!(
            "{what}: {}: {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}
