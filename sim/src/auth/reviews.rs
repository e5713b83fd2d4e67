//! The create-only APIs of authentication and authorization: TokenRequest
//! (`serviceaccounts/<name>/token`), TokenReview, SubjectAccessReview,
//! LocalSubjectAccessReview, SelfSubjectAccessReview (`kubectl auth can-i`) and
//! SelfSubjectReview (`kubectl auth whoami`). Each answers the request's object with its
//! `status` filled in; nothing is stored.

use super::Auth;
use super::rbac::{Attributes, ResourceAttributes};
use super::tokens::{API_AUDIENCE, DEFAULT_EXPIRATION};
use super::user::UserInfo;
use crate::api::route::ResourcePath;
use crate::error::{ApiError, Cause};
use crate::store::Store;
use serde_json::{Value, json};

pub const AUTHENTICATION: &str = "authentication.k8s.io";
pub const AUTHORIZATION: &str = "authorization.k8s.io";

/// The review kinds: (group, plural, kind, namespaced).
pub const REVIEWS: &[(&str, &str, &str, bool)] = &[
    (AUTHENTICATION, "tokenreviews", "TokenReview", false),
    (
        AUTHENTICATION,
        "selfsubjectreviews",
        "SelfSubjectReview",
        false,
    ),
    (
        AUTHORIZATION,
        "subjectaccessreviews",
        "SubjectAccessReview",
        false,
    ),
    (
        AUTHORIZATION,
        "selfsubjectaccessreviews",
        "SelfSubjectAccessReview",
        false,
    ),
    (
        AUTHORIZATION,
        "localsubjectaccessreviews",
        "LocalSubjectAccessReview",
        true,
    ),
];

/// What a review request is, if `p` addresses one.
fn review_kind(p: &ResourcePath) -> Option<&'static str> {
    if p.group.is_empty() && p.resource == "serviceaccounts" {
        return (p.subresource.as_deref() == Some("token")).then_some("TokenRequest");
    }
    REVIEWS
        .iter()
        .find(|(g, r, _, _)| *g == p.group && *r == p.resource)
        .map(|(_, _, kind, _)| *kind)
}

fn strings(v: Option<&Value>) -> Vec<String> {
    v.and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

fn text<'a>(v: &'a Value, pointer: &str) -> &'a str {
    v.pointer(pointer)
        .and_then(Value::as_str)
        .unwrap_or_default()
}

fn user_json(u: &UserInfo) -> Value {
    json!({"username": u.name, "uid": u.uid, "groups": u.groups})
}

/// The attributes a (Self/Local)SubjectAccessReview's spec asks about.
fn spec_attributes(spec: &Value, kind: &str) -> Result<Attributes, ApiError> {
    if let Some(r) = spec.get("resourceAttributes").filter(|r| r.is_object()) {
        return Ok(Attributes::Resource(ResourceAttributes {
            verb: text(r, "/verb").into(),
            group: text(r, "/group").into(),
            resource: text(r, "/resource").into(),
            subresource: text(r, "/subresource").into(),
            namespace: text(r, "/namespace").into(),
            name: text(r, "/name").into(),
        }));
    }
    if let Some(n) = spec.get("nonResourceAttributes").filter(|n| n.is_object()) {
        return Ok(Attributes::NonResource {
            path: text(n, "/path").into(),
            verb: text(n, "/verb").into(),
        });
    }
    Err(ApiError::invalid(
        AUTHORIZATION,
        kind,
        "",
        vec![Cause::new(
            "FieldValueRequired",
            "spec.resourceAttributes",
            "exactly one of nonResourceAttributes or resourceAttributes must be specified",
        )],
    ))
}

/// Answers a review or token request: None when `p` is not one (the request goes on to the
/// resource handlers), else the status code and object, or the refusal.
pub fn answer(
    auth: &Auth,
    store: &Store,
    requester: &UserInfo,
    p: &ResourcePath,
    method: &actix_web::http::Method,
    body: &[u8],
) -> Option<Result<(u16, Value), ApiError>> {
    let kind = review_kind(p)?;
    if method != actix_web::http::Method::POST {
        return Some(Err(ApiError::method_not_allowed(format!(
            "{kind} only supports create"
        ))));
    }
    Some(answer_kind(auth, store, requester, p, kind, body))
}

fn answer_kind(
    auth: &Auth,
    store: &Store,
    requester: &UserInfo,
    p: &ResourcePath,
    kind: &str,
    body: &[u8],
) -> Result<(u16, Value), ApiError> {
    let mut review: Value = if body.is_empty() && kind == "SelfSubjectReview" {
        json!({})
    } else {
        serde_json::from_slice(body)
            .map_err(|e| ApiError::bad_request(format!("cannot decode the {kind}: {e}")))?
    };
    let spec = review.get("spec").cloned().unwrap_or(Value::Null);
    let status = match kind {
        "TokenRequest" => token_request(auth, store, p, &spec)?,
        "TokenReview" => {
            let token = text(&spec, "/token");
            let audiences = strings(spec.get("audiences"));
            match auth.tokens.review(token, &audiences, store) {
                Some(r) => {
                    json!({"authenticated": true, "user": user_json(&r.user), "audiences": r.audiences})
                }
                None => json!({"authenticated": false, "error": "invalid bearer token"}),
            }
        }
        "SelfSubjectReview" => json!({"userInfo": user_json(requester)}),
        _ => {
            let (user, mut attrs) = match kind {
                "SelfSubjectAccessReview" => (requester.clone(), spec_attributes(&spec, kind)?),
                _ => (reviewed_user(&spec, kind)?, spec_attributes(&spec, kind)?),
            };
            if kind == "LocalSubjectAccessReview"
                && let Attributes::Resource(r) = &mut attrs
            {
                r.namespace = p.namespace.clone().unwrap_or_default();
            }
            let d = auth.decide(store, &user, &attrs);
            json!({"allowed": d.allowed, "reason": d.reason})
        }
    };
    let (group, version) = if kind == "TokenRequest" {
        (AUTHENTICATION, "v1")
    } else {
        (p.group.as_str(), p.version.as_str())
    };
    review["kind"] = json!(kind);
    review["apiVersion"] = json!(format!("{group}/{version}"));
    if review.get("metadata").is_none_or(|m| !m.is_object()) {
        review["metadata"] = json!({});
    }
    review["metadata"]["creationTimestamp"] = Value::Null;
    review["status"] = status;
    Ok((201, review))
}

/// The user a SubjectAccessReview asks about (user or groups required).
fn reviewed_user(spec: &Value, kind: &str) -> Result<UserInfo, ApiError> {
    let name = text(spec, "/user").to_string();
    let groups = strings(spec.get("groups"));
    if name.is_empty() && groups.is_empty() {
        return Err(ApiError::invalid(
            AUTHORIZATION,
            kind,
            "",
            vec![Cause::new(
                "FieldValueRequired",
                "spec.user",
                "at least one of user or group must be specified",
            )],
        ));
    }
    Ok(UserInfo {
        name,
        uid: text(spec, "/uid").into(),
        groups,
    })
}

/// Issues a token for the ServiceAccount the path names.
fn token_request(
    auth: &Auth,
    store: &Store,
    p: &ResourcePath,
    spec: &Value,
) -> Result<Value, ApiError> {
    let namespace = p.namespace.clone().unwrap_or_default();
    let name = p.name.clone().unwrap_or_default();
    let account = store
        .get("", "serviceaccounts", &namespace, &name)
        .ok_or_else(|| ApiError::not_found("", "serviceaccounts", &name))?;
    let mut audiences = strings(spec.get("audiences"));
    if audiences.is_empty() {
        audiences.push(API_AUDIENCE.to_string());
    }
    let seconds = spec
        .get("expirationSeconds")
        .and_then(Value::as_i64)
        .unwrap_or(DEFAULT_EXPIRATION);
    let (token, expires) = auth.tokens.issue(
        &namespace,
        &name,
        text(&account, "/metadata/uid"),
        audiences,
        seconds,
    );
    Ok(json!({
        "token": token,
        "expirationTimestamp": expires.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
    }))
}
