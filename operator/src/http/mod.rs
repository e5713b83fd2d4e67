//! The operator's HTTP endpoints (actix-web 4), each on its own listener: Prometheus metrics
//! (`/metrics`), probes (`/healthz`, `/readyz`) and the admin endpoint (the JSON views
//! `/actors`, `/actors/{kind}/{id}`, `/transactions`, `/devices`, `/pipelines`, and the HTML
//! pages of [`ui`]). This module owns starting and stopping the three servers; one file per
//! endpoint.

pub mod admin;
pub mod metrics;
pub mod probes;
pub mod redact;
pub mod ui;

pub use admin::{AdminSources, Inventory, InventorySource, PipelinesSource};
pub use metrics::MetricsEndpoint;
pub use probes::Readiness;

use actix_web::dev::ServerHandle;
use actix_web::{App, HttpServer, web};
use std::net::SocketAddr;

/// Where the three endpoints listen (`host:port`; port 0 chooses a free one).
#[derive(Clone, Debug)]
pub struct Binds {
    pub metrics: String,
    pub probes: String,
    pub admin: String,
}

/// A listener could not be opened.
#[derive(Debug, thiserror::Error)]
#[error("cannot listen for the {what} endpoint on {address}: {source}")]
pub struct BindError {
    pub what: &'static str,
    pub address: String,
    #[source]
    pub source: std::io::Error,
}

/// The running endpoints and their bound addresses.
pub struct Endpoints {
    pub metrics_addr: SocketAddr,
    pub probes_addr: SocketAddr,
    pub admin_addr: SocketAddr,
    handles: Vec<ServerHandle>,
    tasks: Vec<tokio::task::JoinHandle<std::io::Result<()>>>,
}

impl std::fmt::Debug for Endpoints {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Endpoints")
            .field("metrics", &self.metrics_addr)
            .field("probes", &self.probes_addr)
            .field("admin", &self.admin_addr)
            .finish()
    }
}

/// Binds `address` and returns the server (not yet running) with its first bound address.
fn bind<F>(
    what: &'static str,
    address: &str,
    configure: F,
) -> Result<(actix_web::dev::Server, SocketAddr), BindError>
where
    F: Fn(&mut web::ServiceConfig) + Send + Clone + 'static,
{
    let error = |source| BindError {
        what,
        address: address.to_string(),
        source,
    };
    let server = HttpServer::new(move || App::new().configure(configure.clone()))
        .workers(1)
        .disable_signals()
        .shutdown_timeout(5)
        .bind(address)
        .map_err(error)?;
    let bound = server.addrs().first().copied().ok_or_else(|| {
        error(std::io::Error::new(
            std::io::ErrorKind::AddrNotAvailable,
            "the address resolved to nothing",
        ))
    })?;
    Ok((server.run(), bound))
}

impl Endpoints {
    /// Binds the three listeners and starts serving on the current Tokio runtime.
    pub fn start(
        binds: &Binds,
        metrics: MetricsEndpoint,
        readiness: Readiness,
        admin: AdminSources,
    ) -> Result<Endpoints, BindError> {
        let metrics = web::Data::new(metrics);
        let readiness = web::Data::new(readiness);
        let admin = web::Data::new(admin);
        let (metrics_server, metrics_addr) = bind("metrics", &binds.metrics, move |cfg| {
            cfg.app_data(metrics.clone());
            metrics::routes(cfg);
        })?;
        let (probes_server, probes_addr) = bind("probe", &binds.probes, move |cfg| {
            cfg.app_data(readiness.clone());
            probes::routes(cfg);
        })?;
        let (admin_server, admin_addr) = bind("admin", &binds.admin, move |cfg| {
            cfg.app_data(admin.clone());
            ui::routes(cfg);
            admin::routes(cfg);
        })?;
        let servers = [metrics_server, probes_server, admin_server];
        let handles = servers.iter().map(|s| s.handle()).collect();
        let tasks = servers.into_iter().map(tokio::spawn).collect();
        Ok(Endpoints {
            metrics_addr,
            probes_addr,
            admin_addr,
            handles,
            tasks,
        })
    }

    /// Stops the three servers gracefully (in-flight requests finish).
    pub async fn stop(self) {
        for handle in &self.handles {
            handle.stop(true).await;
        }
        for task in self.tasks {
            let _ = task.await;
        }
    }
}
