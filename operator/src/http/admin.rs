//! The admin endpoint's JSON views: `/actors`, `/actors/{kind}/{id}`, `/transactions`,
//! `/devices`, `/pipelines`, `/shards` (scripts read them; their shape is stable), and the sources the HTML
//! pages of [`ui`](super::ui) read. Every JSON view goes through [`redact`](super::redact)
//! before it leaves the process.

use super::redact::redacted;
use crate::crd::{Cinder, CinderBackend};
use actix_web::{HttpResponse, web};
use cinder_actors::{CoordinatorHandle, CoordinatorSnapshot, ResourceSnapshot};
use cinder_lease::DeviceLocks;
use futures::future::LocalBoxFuture;
use serde_json::{Value, json};
use std::sync::Arc;

/// The largest answer the admin endpoint sends (JSON views and HTML pages); a larger one is
/// refused with a message pointing at the narrower views.
pub const MAX_RESPONSE_BYTES: usize = 4 * 1024 * 1024;

/// The most entries a list view (`/actors`, `/transactions`) carries; `count` stays the total
/// and `truncated` says when entries were left out.
pub const MAX_LIST_ENTRIES: usize = 1000;

/// Produces the `/pipelines` view (each Cinder's current step and last outcome).
pub type PipelinesSource = Arc<dyn Fn() -> LocalBoxFuture<'static, Value> + Send + Sync>;

/// The Cinders and CinderBackends the admin pages show beside their pipelines.
#[derive(Clone, Debug, Default)]
pub struct Inventory {
    pub cinders: Vec<Cinder>,
    pub backends: Vec<CinderBackend>,
}

/// Produces the [`Inventory`] (read from the API on each page view), or why it cannot.
pub type InventorySource =
    Arc<dyn Fn() -> LocalBoxFuture<'static, Result<Inventory, String>> + Send + Sync>;

/// What the admin views read. Cheap to clone.
#[derive(Clone)]
pub struct AdminSources {
    /// The lock coordinator (actors and transactions).
    pub coordinator: CoordinatorHandle,
    /// The device locks (`/devices`).
    pub devices: DeviceLocks,
    /// The pipelines view.
    pub pipelines: PipelinesSource,
    /// The Cinders and their backends (the HTML pages).
    pub inventory: InventorySource,
    /// The shards this replica holds (`/shards`).
    pub shards: crate::shards::ShardView,
}

/// Why a view could not be built.
#[derive(Debug, thiserror::Error)]
pub(crate) enum AdminError {
    #[error("the lock coordinator is not answering (shutting down?): {0}")]
    Coordinator(#[from] cinder_actors::LockError),
}

/// One resource actor as shown: its lock state and (redacted) value.
fn actor_view(r: &ResourceSnapshot) -> Value {
    let mut v = serde_json::to_value(r).unwrap_or(Value::Null);
    if let Value::Object(map) = &mut v {
        let value = r.value.as_deref().cloned().unwrap_or(Value::Null);
        map.insert("value".to_string(), value);
    }
    redacted(v)
}

impl AdminSources {
    async fn snapshot(&self) -> Result<CoordinatorSnapshot, AdminError> {
        Ok(self.coordinator.inspect().await?)
    }

    /// `/actors`: every live resource actor, sorted by kind and id.
    pub(crate) async fn actors(&self) -> Result<Value, AdminError> {
        let snapshot = self.snapshot().await?;
        let actors: Vec<Value> = snapshot
            .resources
            .iter()
            .take(MAX_LIST_ENTRIES)
            .map(actor_view)
            .collect();
        let count = snapshot.resources.len();
        Ok(json!({ "count": count, "truncated": count > actors.len(), "actors": actors }))
    }

    /// `/actors/{kind}/{id}`: one actor, `None` when there is no such actor.
    pub(crate) async fn actor(&self, kind: &str, id: &str) -> Result<Option<Value>, AdminError> {
        let snapshot = self.snapshot().await?;
        Ok(snapshot
            .resources
            .iter()
            .find(|r| r.kind == kind && r.id == id)
            .map(actor_view))
    }

    /// `/transactions`: in-flight lock phases (held locks, what each waits on, age).
    pub(crate) async fn transactions(&self) -> Result<Value, AdminError> {
        let snapshot = self.snapshot().await?;
        let count = snapshot.transactions.len();
        let shown = &snapshot.transactions[..count.min(MAX_LIST_ENTRIES)];
        let transactions = serde_json::to_value(shown).unwrap_or(Value::Null);
        Ok(redacted(
            json!({ "count": count, "truncated": count > shown.len(), "transactions": transactions }),
        ))
    }

    /// `/devices`: holders, Leases and waiters by priority.
    pub(crate) async fn devices(&self) -> Value {
        redacted(serde_json::to_value(self.devices.inspect().await).unwrap_or(Value::Null))
    }

    /// `/pipelines`.
    pub(crate) async fn pipelines(&self) -> Value {
        redacted((self.pipelines)().await)
    }

    /// `/shards`: whether this replica runs sharded, the shard count and the shards it holds.
    pub(crate) fn shards(&self) -> Value {
        json!({
            "sharded": self.shards.is_sharded(),
            "count": self.shards.count(),
            "held": self.shards.held(),
        })
    }
}

fn json_response(value: &Value) -> HttpResponse {
    let body = serde_json::to_string_pretty(value).unwrap_or_else(|_| "null".to_string());
    if body.len() > MAX_RESPONSE_BYTES {
        return too_large(body.len());
    }
    HttpResponse::Ok()
        .content_type("application/json")
        .body(body)
}

/// The answer instead of a view above [`MAX_RESPONSE_BYTES`].
pub(crate) fn too_large(bytes: usize) -> HttpResponse {
    error_response(
        actix_web::http::StatusCode::INSUFFICIENT_STORAGE,
        &format!(
            "the view is {bytes} bytes, above the admin endpoint's limit of {MAX_RESPONSE_BYTES}; ask for one actor at /actors/{{kind}}/{{id}} or one Cinder at /ui/cinders/{{namespace}}/{{name}}"
        ),
    )
}

fn error_response(status: actix_web::http::StatusCode, message: &str) -> HttpResponse {
    HttpResponse::build(status)
        .content_type("application/json")
        .body(json!({ "error": message }).to_string())
}

fn unavailable(e: &AdminError) -> HttpResponse {
    error_response(
        actix_web::http::StatusCode::SERVICE_UNAVAILABLE,
        &e.to_string(),
    )
}

async fn actors(sources: web::Data<AdminSources>) -> HttpResponse {
    match sources.actors().await {
        Ok(v) => json_response(&v),
        Err(e) => unavailable(&e),
    }
}

async fn actor(
    sources: web::Data<AdminSources>,
    path: web::Path<(String, String)>,
) -> HttpResponse {
    let (kind, id) = path.into_inner();
    match sources.actor(&kind, &id).await {
        Ok(Some(v)) => json_response(&v),
        Ok(None) => error_response(
            actix_web::http::StatusCode::NOT_FOUND,
            &format!("no actor of kind {kind:?} with id {id:?}"),
        ),
        Err(e) => unavailable(&e),
    }
}

async fn transactions(sources: web::Data<AdminSources>) -> HttpResponse {
    match sources.transactions().await {
        Ok(v) => json_response(&v),
        Err(e) => unavailable(&e),
    }
}

async fn devices(sources: web::Data<AdminSources>) -> HttpResponse {
    json_response(&sources.devices().await)
}

/// A page of `/pipelines`: `offset` records skipped, at most `limit` given (a fleet's whole view
/// can be above [`MAX_RESPONSE_BYTES`]).
#[derive(Debug, serde::Deserialize)]
struct Page {
    offset: Option<usize>,
    limit: Option<usize>,
}

async fn pipelines(sources: web::Data<AdminSources>, page: web::Query<Page>) -> HttpResponse {
    let mut view = sources.pipelines().await;
    if let Some(list) = view.get_mut("pipelines").and_then(Value::as_array_mut) {
        let total = list.len();
        let offset = page.offset.unwrap_or(0).min(total);
        let end = page
            .limit
            .map_or(total, |limit| offset.saturating_add(limit).min(total));
        *list = list.drain(offset..end).collect();
        view["total"] = json!(total);
    }
    json_response(&view)
}

async fn shards(sources: web::Data<AdminSources>) -> HttpResponse {
    json_response(&sources.shards())
}

async fn not_found(req: actix_web::HttpRequest) -> HttpResponse {
    error_response(
        actix_web::http::StatusCode::NOT_FOUND,
        &format!(
            "no admin view at {:?}; try / (the HTML pages), /actors, /actors/{{kind}}/{{id}}, /transactions, /devices, /pipelines, /shards",
            req.path()
        ),
    )
}

/// The JSON admin routes and the fallback for unknown paths (register the HTML pages of
/// [`ui`](super::ui) first); the app must hold `web::Data<AdminSources>`.
pub(crate) fn routes(cfg: &mut web::ServiceConfig) {
    cfg.route("/actors", web::get().to(actors))
        .route("/actors/{kind}/{id}", web::get().to(actor))
        .route("/transactions", web::get().to(transactions))
        .route("/devices", web::get().to(devices))
        .route("/pipelines", web::get().to(pipelines))
        .route("/shards", web::get().to(shards))
        .default_service(web::to(not_found));
}
