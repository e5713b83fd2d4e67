//! `/sim/faults`: the fault injection settings of the running simulator as JSON
//! (`FaultConfig`: `latencyMs`, `errors` [{verb, resource, userAgent, code, probability}],
//! `watchDropProbability`, `services` [{namespace, name, status, delayMs}], `seed`). GET reads
//! them, PUT replaces them (a body that does not parse, or has a probability outside 0..1 or a
//! code that is not an error, is refused with 400 and changes nothing), DELETE clears them.

use super::responses::{error_response, json_response};
use crate::error::ApiError;
use crate::faults::{FaultConfig, FaultHandle};
use actix_web::HttpRequest;
use actix_web::HttpResponse;
use actix_web::http::Method;

fn current(faults: &FaultHandle) -> HttpResponse {
    match serde_json::to_value(faults.get()) {
        Ok(v) => json_response(200, &v),
        Err(e) => error_response(&ApiError::internal(e.to_string())),
    }
}

/// Answers a request to `/sim/faults`.
pub fn answer(req: &HttpRequest, body: &[u8], faults: &FaultHandle) -> HttpResponse {
    match *req.method() {
        Method::GET => current(faults),
        Method::PUT => {
            let config: FaultConfig = match serde_json::from_slice(body) {
                Ok(c) => c,
                Err(e) => {
                    return error_response(&ApiError::bad_request(format!(
                        "the fault settings cannot be read: {e}"
                    )));
                }
            };
            let problems = config.problems();
            if !problems.is_empty() {
                return error_response(&ApiError::bad_request(format!(
                    "invalid fault settings: {}",
                    problems.join("; ")
                )));
            }
            faults.set(config);
            current(faults)
        }
        Method::DELETE => {
            faults.clear();
            current(faults)
        }
        _ => error_response(&ApiError::method_not_allowed(
            "/sim/faults accepts GET, PUT and DELETE",
        )),
    }
}
