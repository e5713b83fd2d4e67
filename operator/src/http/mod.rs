//! The operator's HTTP endpoints (actix-web 4), each on its own listener: Prometheus metrics
//! (`/metrics`), probes (`/healthz`, `/readyz`) and the admin endpoint (the JSON views
//! `/actors`, `/actors/{kind}/{id}`, `/transactions`, `/devices`, `/pipelines`, and the HTML
//! pages of [`ui`]). This module owns starting and stopping the three servers; one file per
//! endpoint. With [`Security`], `/metrics` is served over HTTPS ([`tls`]) and it and the admin
//! endpoint admit only callers the API server's reviews allow ([`access`]); the admin endpoint
//! refuses a non-loopback address without them.

pub mod access;
pub mod admin;
pub mod metrics;
pub mod probes;
pub mod redact;
pub mod tls;
pub mod ui;

pub use admin::AdminSources;
pub use admin::Inventory;
pub use admin::InventorySource;
pub use admin::PipelinesSource;
pub use metrics::MetricsEndpoint;
pub use probes::Readiness;

use access::AccessReviewer;
use actix_web::body::MessageBody;
use actix_web::dev::{ServerHandle, ServiceRequest, ServiceResponse};
use actix_web::middleware::{Next, from_fn};
use actix_web::{App, HttpServer, web};
use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::Arc;

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

/// Who may reach the metrics and admin endpoints. The default serves both in plain HTTP to
/// anyone who can connect (the admin endpoint then only on a loopback address).
#[derive(Clone, Debug, Default)]
pub struct Security {
    /// `/metrics` over HTTPS with this certificate, for callers the reviewer admits.
    pub metrics: Option<(Arc<tls::ServingCert>, AccessReviewer)>,
    /// The admin endpoint for callers this reviewer admits (any address allowed).
    pub admin: Option<AccessReviewer>,
}

/// Admits a request when the app holds no [`AccessReviewer`] or the reviewer allows its caller.
async fn gate(
    req: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<impl MessageBody + 'static>, actix_web::Error> {
    if let Some(reviewer) = req.app_data::<web::Data<AccessReviewer>>().cloned() {
        let header = req
            .headers()
            .get(actix_web::http::header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok());
        if let Err(refusal) = reviewer.check(header).await {
            return Ok(req.into_response(refusal.response()).map_into_right_body());
        }
    }
    next.call(req)
        .await
        .map(ServiceResponse::map_into_left_body)
}

/// Whether every address `address` resolves to is a loopback one.
fn loopback_only(address: &str) -> bool {
    address
        .to_socket_addrs()
        .map(|mut addrs| addrs.all(|a| a.ip().is_loopback()))
        .unwrap_or(false)
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
    tls: Option<rustls::ServerConfig>,
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
        .shutdown_timeout(5);
    let server = match tls {
        Some(config) => server.bind_rustls_0_23(address, config),
        None => server.bind(address),
    }
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
    /// Binds the three listeners (plain HTTP, no reviews) and starts serving on the current
    /// Tokio runtime.
    pub fn start(
        binds: &Binds,
        metrics: MetricsEndpoint,
        readiness: Readiness,
        admin: AdminSources,
    ) -> Result<Endpoints, BindError> {
        Self::start_secured(binds, &Security::default(), metrics, readiness, admin)
    }

    /// Binds the three listeners with `security` and starts serving on the current Tokio
    /// runtime.
    pub fn start_secured(
        binds: &Binds,
        security: &Security,
        metrics: MetricsEndpoint,
        readiness: Readiness,
        admin: AdminSources,
    ) -> Result<Endpoints, BindError> {
        if security.admin.is_none() && !loopback_only(&binds.admin) {
            return Err(BindError {
                what: "admin",
                address: binds.admin.clone(),
                source: std::io::Error::other(
                    "refusing a non-loopback address without --admin-auth (the admin views show the operator's internal state); bind it to 127.0.0.1 or turn on --admin-auth",
                ),
            });
        }
        let metrics = web::Data::new(metrics);
        let readiness = web::Data::new(readiness);
        let admin = web::Data::new(admin);
        let (metrics_tls, metrics_reviewer) = match &security.metrics {
            Some((cert, reviewer)) => {
                let config = cert.server_config().map_err(|e| BindError {
                    what: "metrics",
                    address: binds.metrics.clone(),
                    source: std::io::Error::other(e.to_string()),
                })?;
                (Some(config), Some(web::Data::new(reviewer.clone())))
            }
            None => (None, None),
        };
        let admin_reviewer = security.admin.clone().map(web::Data::new);
        let (metrics_server, metrics_addr) =
            bind("metrics", &binds.metrics, metrics_tls, move |cfg| {
                cfg.app_data(metrics.clone());
                if let Some(r) = &metrics_reviewer {
                    cfg.app_data(r.clone());
                }
                cfg.service(
                    web::scope("")
                        .wrap(from_fn(gate))
                        .configure(metrics::routes),
                );
            })?;
        let (probes_server, probes_addr) = bind("probe", &binds.probes, None, move |cfg| {
            cfg.app_data(readiness.clone());
            probes::routes(cfg);
        })?;
        let (admin_server, admin_addr) = bind("admin", &binds.admin, None, move |cfg| {
            cfg.app_data(admin.clone());
            if let Some(r) = &admin_reviewer {
                cfg.app_data(r.clone());
            }
            cfg.service(web::scope("").wrap(from_fn(gate)).configure(|cfg| {
                ui::routes(cfg);
                admin::routes(cfg);
            }));
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
