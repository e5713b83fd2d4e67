//! The Prometheus endpoint: `/metrics` as OpenMetrics text. Before each scrape it refreshes the
//! gauges the lock coordinator can answer (transactions in flight, mailbox depth by actor kind);
//! the per-kind families start at zero for every kind of the coordinator's schema.

use crate::metrics::{
    KindLabels, LockLabels, Metrics, OPENMETRICS_CONTENT_TYPE, encode_openmetrics,
};
use actix_web::{HttpResponse, web};
use cinder_actors::CoordinatorHandle;
use prometheus_client::registry::Registry;
use std::collections::BTreeMap;
use std::sync::Arc;

/// What `/metrics` serves: the registry, the operator's families in it, and the coordinator
/// the runtime gauges are read from.
pub struct MetricsEndpoint {
    registry: Registry,
    metrics: Arc<Metrics>,
    coordinator: Option<CoordinatorHandle>,
}

impl MetricsEndpoint {
    /// `registry` must hold `metrics` (and may hold more, e.g. the device-lock families).
    pub fn new(
        registry: Registry,
        metrics: Arc<Metrics>,
        coordinator: Option<CoordinatorHandle>,
    ) -> Self {
        if let Some(coordinator) = &coordinator {
            for kind in coordinator.schema().kinds() {
                let _ = metrics.mailbox_depth.get_or_create(&KindLabels {
                    kind: kind.name.clone(),
                });
                for mode in ["read", "write"] {
                    let _ = metrics.lock_wait_seconds.get_or_create(&LockLabels {
                        kind: kind.name.clone(),
                        mode: mode.to_string(),
                    });
                }
            }
        }
        MetricsEndpoint {
            registry,
            metrics,
            coordinator,
        }
    }

    /// Refreshes the coordinator gauges (left as they are when it cannot answer).
    pub(crate) async fn refresh(&self) {
        let Some(coordinator) = &self.coordinator else {
            return;
        };
        let Ok(snapshot) = coordinator.inspect().await else {
            return;
        };
        self.metrics
            .transactions_in_flight
            .set(i64::try_from(snapshot.transactions.len()).unwrap_or(i64::MAX));
        let mut depth: BTreeMap<String, i64> = BTreeMap::new();
        for resource in &snapshot.resources {
            let n = i64::try_from(resource.mailbox_len).unwrap_or(i64::MAX);
            *depth.entry(resource.kind.clone()).or_default() += n;
        }
        for (kind, n) in depth {
            self.metrics
                .mailbox_depth
                .get_or_create(&KindLabels { kind })
                .set(n);
        }
    }

    /// The OpenMetrics text of the registry (refreshed first).
    pub(crate) async fn render(&self) -> Result<String, std::fmt::Error> {
        self.refresh().await;
        encode_openmetrics(&self.registry)
    }
}

async fn metrics(endpoint: web::Data<MetricsEndpoint>) -> HttpResponse {
    match endpoint.render().await {
        Ok(body) => HttpResponse::Ok()
            .content_type(OPENMETRICS_CONTENT_TYPE)
            .body(body),
        Err(_) => HttpResponse::InternalServerError()
            .content_type("text/plain; charset=utf-8")
            .body("cannot encode the metrics\n"),
    }
}

/// The `/metrics` route; the app must hold `web::Data<MetricsEndpoint>`.
pub(crate) fn routes(cfg: &mut web::ServiceConfig) {
    cfg.route("/metrics", web::get().to(metrics));
}
