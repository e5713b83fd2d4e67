//! Errors: `SimError` (starting and running the embedded cluster) and `ApiError`, the Kubernetes
//! `Status` answers (NotFound, AlreadyExists, Conflict, Invalid, Gone, ...) the HTTP API sends.

use serde::Serialize;
use serde_json::Value;
use std::path::PathBuf;

/// A failure to start or run the embedded cluster.
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    #[error("cannot listen on 127.0.0.1:{port}: {source}")]
    Bind { port: u16, source: std::io::Error },
    #[error("cannot write the kubeconfig {path}: {source}")]
    Kubeconfig {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot build a client for the embedded cluster: {0}")]
    Client(String),
    #[error("cannot install the third-party CRD fixtures: {0}")]
    Fixtures(kube::Error),
    #[error("cannot register the simulated nodes: {0}")]
    Nodes(String),
    #[error("cannot start the service proxy: {0}")]
    ServiceProxy(String),
    #[error("cannot start the process nodes' agent: {0}")]
    Agent(String),
}

/// One `details.causes` entry of an Invalid / Conflict Status.
#[derive(Debug, Clone, PartialEq)]
pub struct Cause {
    pub reason: String,
    pub message: String,
    pub field: String,
}

impl Cause {
    pub fn new(reason: &str, field: impl Into<String>, message: impl Into<String>) -> Cause {
        Cause {
            reason: reason.to_string(),
            field: field.into(),
            message: message.into(),
        }
    }
}

/// An API failure answered as a `v1 Status` with the HTTP status `code`.
#[derive(Debug, Clone, PartialEq)]
pub struct ApiError {
    pub code: u16,
    pub reason: &'static str,
    pub message: String,
    /// `details` of the Status (boxed to keep results small).
    pub details: Box<ErrorDetails>,
}

/// The `details` of a Status: what object the error is about, and its causes.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ErrorDetails {
    pub group: String,
    pub kind: String,
    pub name: String,
    pub causes: Vec<Cause>,
}

fn qualified(group: &str, resource: &str) -> String {
    if group.is_empty() {
        resource.to_string()
    } else {
        format!("{resource}.{group}")
    }
}

impl ApiError {
    fn plain(code: u16, reason: &'static str, message: impl Into<String>) -> ApiError {
        ApiError {
            code,
            reason,
            message: message.into(),
            details: Box::default(),
        }
    }

    fn about(mut self, group: &str, kind: &str, name: &str) -> ApiError {
        self.details.group = group.to_string();
        self.details.kind = kind.to_string();
        self.details.name = name.to_string();
        self
    }

    pub fn not_found(group: &str, resource: &str, name: &str) -> ApiError {
        Self::plain(
            404,
            "NotFound",
            format!("{} \"{name}\" not found", qualified(group, resource)),
        )
        .about(group, resource, name)
    }

    pub fn not_found_path(path: &str) -> ApiError {
        Self::plain(
            404,
            "NotFound",
            format!("the server could not find the requested resource ({path})"),
        )
    }

    pub fn already_exists(group: &str, resource: &str, name: &str) -> ApiError {
        Self::plain(
            409,
            "AlreadyExists",
            format!("{} \"{name}\" already exists", qualified(group, resource)),
        )
        .about(group, resource, name)
    }

    pub fn conflict(group: &str, resource: &str, name: &str, why: &str) -> ApiError {
        Self::plain(
            409,
            "Conflict",
            format!(
                "Operation cannot be fulfilled on {} \"{name}\": {why}",
                qualified(group, resource)
            ),
        )
        .about(group, resource, name)
    }

    /// A server-side apply conflict: `causes` name the fields and their managers (the details
    /// name no object, as a real server's do not).
    pub fn apply_conflict(causes: Vec<Cause>) -> ApiError {
        let list: Vec<String> = causes.iter().map(|c| c.message.clone()).collect();
        let mut e = Self::plain(
            409,
            "Conflict",
            format!(
                "Apply failed with {} conflict(s): {}",
                causes.len(),
                list.join(", ")
            ),
        );
        e.details.causes = causes;
        e
    }

    pub fn invalid(group: &str, kind: &str, name: &str, causes: Vec<Cause>) -> ApiError {
        let list: Vec<String> = causes
            .iter()
            .map(|c| format!("{}: {}", c.field, c.message))
            .collect();
        let what = if group.is_empty() {
            kind.to_string()
        } else {
            format!("{kind}.{group}")
        };
        let mut e = Self::plain(
            422,
            "Invalid",
            format!("{what} \"{name}\" is invalid: {}", list.join(", ")),
        )
        .about(group, kind, name);
        e.details.causes = causes;
        e
    }

    /// 422 Invalid without causes (what a real server answers a JSON patch that cannot be
    /// applied, such as a failed `test`).
    pub fn unprocessable(message: impl Into<String>) -> ApiError {
        Self::plain(422, "Invalid", message)
    }

    pub fn gone(message: impl Into<String>) -> ApiError {
        Self::plain(410, "Expired", message)
    }

    pub fn bad_request(message: impl Into<String>) -> ApiError {
        Self::plain(400, "BadRequest", message)
    }

    pub fn method_not_allowed(message: impl Into<String>) -> ApiError {
        Self::plain(405, "MethodNotAllowed", message)
    }

    pub fn unsupported_media_type(content_type: &str) -> ApiError {
        Self::plain(
            415,
            "UnsupportedMediaType",
            format!(
                "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml, application/strategic-merge-patch+json (got {content_type:?})"
            ),
        )
    }

    /// 415 for a media type this server reads for other kinds only.
    pub fn unsupported_media_type_for(content_type: &str, why: &str) -> ApiError {
        Self::plain(
            415,
            "UnsupportedMediaType",
            format!(
                "the body of the request was in an unknown format - accepted media types include: application/json, application/yaml ({content_type}: {why})"
            ),
        )
    }

    /// 406: nothing the client accepts can be written.
    pub fn not_acceptable() -> ApiError {
        Self::plain(
            406,
            "NotAcceptable",
            "only the following media types are accepted: application/json, application/json;stream=watch",
        )
    }

    /// 413: the request body is over the server's limit.
    pub fn request_entity_too_large(limit: usize) -> ApiError {
        Self::plain(
            413,
            "RequestEntityTooLarge",
            format!("Request entity too large: limit is {limit}"),
        )
    }

    pub fn too_many_requests(message: impl Into<String>) -> ApiError {
        Self::plain(429, "TooManyRequests", message)
    }

    /// The 429 of an eviction a PodDisruptionBudget does not allow (cause `DisruptionBudget`).
    pub fn disruption_budget(pod: &str, why: impl Into<String>) -> ApiError {
        let mut error = Self::plain(
            429,
            "TooManyRequests",
            "Cannot evict pod as it would violate the pod's disruption budget.",
        )
        .about("", "pods", pod);
        error
            .details
            .causes
            .push(Cause::new("DisruptionBudget", "", why));
        error
    }

    pub fn internal(message: impl Into<String>) -> ApiError {
        Self::plain(500, "InternalError", message)
    }

    pub fn service_unavailable(message: impl Into<String>) -> ApiError {
        Self::plain(503, "ServiceUnavailable", message)
    }

    /// An injected failure with an arbitrary code (fault injection).
    pub fn injected(code: u16) -> ApiError {
        match code {
            409 => Self::plain(
                409,
                "Conflict",
                "injected fault: conflict (the object has been modified; please apply your changes to the latest version and try again)",
            ),
            429 => Self::plain(
                429,
                "TooManyRequests",
                "injected fault: too many requests, please try again later",
            ),
            403 => Self::plain(403, "Forbidden", "injected fault: forbidden"),
            410 => Self::gone("injected fault: too old resource version"),
            503 => Self::service_unavailable("injected fault: service unavailable"),
            c => Self::plain(c, "InternalError", format!("injected fault: error {c}")),
        }
    }

    /// A 403 Forbidden answer.
    pub fn forbidden(group: &str, resource: &str, name: &str, why: &str) -> ApiError {
        Self::plain(
            403,
            "Forbidden",
            format!(
                "{} \"{name}\" is forbidden: {why}",
                qualified(group, resource)
            ),
        )
        .about(group, resource, name)
    }

    /// A 403 Forbidden answer with the whole message given (an authorizer's refusal).
    pub fn forbidden_with(group: &str, resource: &str, name: &str, message: String) -> ApiError {
        Self::plain(403, "Forbidden", message).about(group, resource, name)
    }

    /// A 401 answer to a request whose credential is not valid.
    pub fn unauthorized() -> ApiError {
        Self::plain(401, "Unauthorized", "Unauthorized")
    }

    /// The causes of an Invalid or Conflict answer.
    pub fn causes(&self) -> &[Cause] {
        &self.details.causes
    }

    /// The `v1 Status` object of this error.
    pub fn to_status(&self) -> Value {
        serde_json::to_value(self.status_body()).unwrap_or(Value::Null)
    }

    /// The `v1 Status` object serialized with the fields in the order a real API server writes
    /// them (`kind, apiVersion, metadata, status, message, reason, details, code`): clients and
    /// their users compare error strings.
    pub fn status_bytes(&self) -> Vec<u8> {
        serde_json::to_vec(&self.status_body()).unwrap_or_default()
    }

    fn status_body(&self) -> StatusBody<'_> {
        let d = &self.details;
        let has_details =
            !d.name.is_empty() || !d.kind.is_empty() || !d.causes.is_empty() || self.code == 429;
        StatusBody {
            kind: "Status",
            api_version: "v1",
            metadata: Empty {},
            status: "Failure",
            message: &self.message,
            reason: self.reason,
            details: has_details.then(|| StatusDetails {
                name: &d.name,
                group: &d.group,
                kind: &d.kind,
                causes: d
                    .causes
                    .iter()
                    .map(|c| StatusCause {
                        reason: &c.reason,
                        message: &c.message,
                        field: &c.field,
                    })
                    .collect(),
                retry_after_seconds: (self.code == 429).then_some(1),
            }),
            code: self.code,
        }
    }
}

#[derive(Serialize)]
struct Empty {}

/// `metav1.Status`, fields in the real server's order.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct StatusBody<'a> {
    kind: &'static str,
    api_version: &'static str,
    metadata: Empty,
    status: &'static str,
    message: &'a str,
    reason: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    details: Option<StatusDetails<'a>>,
    code: u16,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct StatusDetails<'a> {
    #[serde(skip_serializing_if = "str::is_empty")]
    name: &'a str,
    #[serde(skip_serializing_if = "str::is_empty")]
    group: &'a str,
    #[serde(skip_serializing_if = "str::is_empty")]
    kind: &'a str,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    causes: Vec<StatusCause<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    retry_after_seconds: Option<u32>,
}

#[derive(Serialize)]
struct StatusCause<'a> {
    reason: &'a str,
    message: &'a str,
    field: &'a str,
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}: {}", self.code, self.reason, self.message)
    }
}

impl std::error::Error for ApiError {}
