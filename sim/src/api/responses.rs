//! The answers' shapes: a JSON body with a status code, a typed JSON body, an error as a Status
//! object (with Retry-After on a 429).

use crate::error::ApiError;
use actix_web::HttpResponse;
use actix_web::http::StatusCode;
use serde_json::Value;

pub(super) fn json_response(code: u16, body: &Value) -> HttpResponse {
    let status = StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    HttpResponse::build(status)
        .content_type("application/json")
        .body(serde_json::to_vec(body).unwrap_or_default())
}

/// A 200 answer with a JSON body of a specific content type (Table, PartialObjectMetadata).
pub(super) fn typed_response(content_type: &str, body: &Value) -> HttpResponse {
    HttpResponse::Ok()
        .content_type(content_type)
        .body(serde_json::to_vec(body).unwrap_or_default())
}

/// The plain-text 404 of a real API server's not-found handler: what a path outside every
/// served group version gets (no Status).
pub(super) fn page_not_found() -> HttpResponse {
    HttpResponse::NotFound()
        .content_type("text/plain; charset=utf-8")
        .body("404 page not found\n")
}

pub(super) fn error_response(e: &ApiError) -> HttpResponse {
    let status = StatusCode::from_u16(e.code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let mut answer = HttpResponse::build(status);
    answer.content_type("application/json");
    if e.code == 429 {
        // As a real API server: the Status's details.retryAfterSeconds, and the header clients
        // read.
        answer.insert_header(("Retry-After", "1"));
    }
    answer.body(e.status_bytes())
}
