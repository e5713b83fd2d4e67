//! The probe endpoint: `/healthz` (the process answers) and `/readyz` (the process can serve:
//! its controllers have synced, or it is a leader-election standby), each a one-line plain-text
//! answer.

use actix_web::{HttpResponse, web};
use std::sync::Arc;

/// Why the operator is not ready (`None` = ready). Cheap to clone.
#[derive(Clone)]
pub struct Readiness(Arc<dyn Fn() -> Option<String> + Send + Sync>);

impl Readiness {
    /// Readiness from a check returning `None` when ready, or the reason it is not.
    pub fn new(check: impl Fn() -> Option<String> + Send + Sync + 'static) -> Self {
        Readiness(Arc::new(check))
    }

    /// Always ready (for endpoints served without controllers).
    pub fn always() -> Self {
        Readiness::new(|| None)
    }

    /// `None` when ready, else the reason.
    pub(crate) fn not_ready_reason(&self) -> Option<String> {
        (self.0)()
    }
}

impl std::fmt::Debug for Readiness {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Readiness")
            .field(&self.not_ready_reason())
            .finish()
    }
}

async fn healthz() -> HttpResponse {
    HttpResponse::Ok()
        .content_type("text/plain; charset=utf-8")
        .body("ok\n")
}

async fn readyz(readiness: web::Data<Readiness>) -> HttpResponse {
    match readiness.not_ready_reason() {
        None => HttpResponse::Ok()
            .content_type("text/plain; charset=utf-8")
            .body("ready\n"),
        Some(reason) => HttpResponse::ServiceUnavailable()
            .content_type("text/plain; charset=utf-8")
            .body(format!("not ready: {reason}\n")),
    }
}

/// The probe routes; the app must hold `web::Data<Readiness>`.
pub(crate) fn routes(cfg: &mut web::ServiceConfig) {
    cfg.route("/healthz", web::get().to(healthz))
        .route("/readyz", web::get().to(readyz));
}
