//! The admin UI: HTML pages over the same sources as the admin JSON views, rendered on the
//! server with maud (every value escaped by construction), styled by one stylesheet and refreshed live by one small
//! script, both served from here (no external asset) under a strict Content-Security-Policy.
//! Pages: `/` (overview of the Cinders), `/ui/cinders/{namespace}/{name}` (a Cinder's steps,
//! pass history, devices and locks), `/ui/transactions` (with the wait-for graph),
//! `/ui/devices`. Each page answers `?fragment=main` with its `<main>` content only (what live
//! refresh fetches every two seconds).

pub mod cinder_page;
pub mod devices_page;
pub mod html;
pub mod model;
pub mod overview;
pub mod transactions_page;
pub mod wait_for;

use super::admin::AdminSources;
use actix_web::http::StatusCode;
use actix_web::{HttpRequest, HttpResponse, web};
use maud::{Markup, html};
use model::{CinderView, cinder_views, pipeline_rows};

const STYLESHEET: &str = include_str!("assets/admin.css");
const SCRIPT: &str = include_str!("assets/admin.js");

/// Whether the request asks for the `<main>` fragment only.
fn wants_fragment(req: &HttpRequest) -> bool {
    req.query_string()
        .split('&')
        .any(|pair| pair == "fragment=main")
}

fn page(
    req: &HttpRequest,
    status: StatusCode,
    title: &str,
    active: &str,
    main: Markup,
) -> HttpResponse {
    let body = if wants_fragment(req) {
        main.into_string()
    } else {
        html::document(title, active, req.path(), main).into_string()
    };
    if body.len() > super::admin::MAX_RESPONSE_BYTES {
        return super::admin::too_large(body.len());
    }
    HttpResponse::build(status)
        .content_type("text/html; charset=utf-8")
        .insert_header(("Content-Security-Policy", html::CSP))
        .insert_header(("X-Content-Type-Options", "nosniff"))
        .insert_header(("Referrer-Policy", "no-referrer"))
        .insert_header(("Cache-Control", "no-store"))
        .body(body)
}

fn asset(content_type: &str, body: &'static str) -> HttpResponse {
    HttpResponse::Ok()
        .content_type(content_type)
        .insert_header(("X-Content-Type-Options", "nosniff"))
        .insert_header(("Cache-Control", "no-cache"))
        .body(body)
}

/// The Cinders with their pipeline records, and why the API could not list them (if so).
async fn views(sources: &AdminSources) -> (Vec<CinderView>, Option<String>) {
    let rows = pipeline_rows(&sources.pipelines().await);
    match (sources.inventory)().await {
        Ok(inventory) => (
            cinder_views(&inventory.cinders, &inventory.backends, rows),
            None,
        ),
        Err(e) => (cinder_views(&[], &[], rows), Some(e)),
    }
}

async fn overview(req: HttpRequest, sources: web::Data<AdminSources>) -> HttpResponse {
    let (cinders, error) = views(&sources).await;
    let main = overview::render(&cinders, error.as_deref());
    page(&req, StatusCode::OK, "Cinders", "/", main)
}

async fn cinder(
    req: HttpRequest,
    sources: web::Data<AdminSources>,
    path: web::Path<(String, String)>,
) -> HttpResponse {
    let (namespace, name) = path.into_inner();
    let (cinders, _) = views(&sources).await;
    let Some(view) = cinders
        .iter()
        .find(|c| c.namespace == namespace && c.name == name)
    else {
        let main = html! {
            h1 { "No Cinder " (namespace) "/" (name) }
            p { a href="/" { "All Cinders" } }
        };
        return page(&req, StatusCode::NOT_FOUND, "Not found", "/", main);
    };
    let coordinator = sources.coordinator.inspect().await.ok();
    let devices = sources.devices.inspect().await;
    let main = cinder_page::render(view, coordinator.as_ref(), &devices);
    page(
        &req,
        StatusCode::OK,
        &format!("{namespace}/{name}"),
        "/",
        main,
    )
}

async fn transactions(req: HttpRequest, sources: web::Data<AdminSources>) -> HttpResponse {
    let snapshot = sources
        .coordinator
        .inspect()
        .await
        .map_err(|e| format!("the lock coordinator is not answering (shutting down?): {e}"));
    let main = transactions_page::render(snapshot.as_ref().map_err(Clone::clone));
    page(
        &req,
        StatusCode::OK,
        "Transactions",
        "/ui/transactions",
        main,
    )
}

async fn devices(req: HttpRequest, sources: web::Data<AdminSources>) -> HttpResponse {
    let main = devices_page::render(&sources.devices.inspect().await);
    page(&req, StatusCode::OK, "Devices", "/ui/devices", main)
}

/// The UI routes; the app must hold `web::Data<AdminSources>`.
pub(crate) fn routes(cfg: &mut web::ServiceConfig) {
    cfg.route("/", web::get().to(overview))
        .route("/ui/cinders/{namespace}/{name}", web::get().to(cinder))
        .route("/ui/transactions", web::get().to(transactions))
        .route("/ui/devices", web::get().to(devices))
        .route(
            "/ui/admin.css",
            web::get().to(|| async { asset("text/css; charset=utf-8", STYLESHEET) }),
        )
        .route(
            "/ui/admin.js",
            web::get().to(|| async { asset("text/javascript; charset=utf-8", SCRIPT) }),
        );
}
