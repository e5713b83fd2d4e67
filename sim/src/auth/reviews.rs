//! The create-only APIs of authentication and authorization: TokenRequest
//! (`serviceaccounts/<name>/token`), TokenReview, SubjectAccessReview,
//! LocalSubjectAccessReview, SelfSubjectAccessReview (`kubectl auth can-i`),
//! SelfSubjectRulesReview (`kubectl auth can-i --list`) and SelfSubjectReview (`kubectl auth
//! whoami`). Each answers the request's object with its
//! `status` filled in; nothing is stored.

use super::admit::Auth;
use super::rbac::{Attributes, ResourceAttributes};
use super::review_kinds::{AUTHENTICATION, AUTHORIZATION, REVIEWS};
use super::tokens::{API_AUDIENCE, DEFAULT_EXPIRATION};
use super::user::UserInfo;
use crate::api::route::ResourcePath;
use crate::error::{ApiError, Cause};
use crate::json::strings;
use crate::store::Store;
use serde_json::{Value, json};

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
    manager: &str,
) -> Option<Result<(u16, Value), ApiError>> {
    let kind = review_kind(p)?;
    if method != actix_web::http::Method::POST {
        return Some(Err(ApiError::method_not_allowed(format!(
            "{kind} only supports create"
        ))));
    }
    Some(answer_kind(auth, store, requester, p, kind, body, manager))
}

fn answer_kind(
    auth: &Auth,
    store: &Store,
    requester: &UserInfo,
    p: &ResourcePath,
    kind: &str,
    body: &[u8],
    manager: &str,
) -> Result<(u16, Value), ApiError> {
    let mut review: Value = if body.is_empty() && kind == "SelfSubjectReview" {
        json!({})
    } else if body.starts_with(crate::api::protobuf::MAGIC) {
        from_protobuf(kind, body)?
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
        "SelfSubjectRulesReview" => {
            let rules = auth.rules(store, requester, text(&spec, "/namespace"));
            json!({"resourceRules": rules.resource, "nonResourceRules": rules.non_resource,
                   "incomplete": false})
        }
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
            let mut status = json!({"allowed": d.allowed});
            if !d.reason.is_empty() {
                status["reason"] = json!(d.reason);
            }
            status
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
    // A review is created as any object is, so its answer names what the requester sent
    // (a TokenRequest, a subresource of a ServiceAccount, does not).
    if kind != "TokenRequest" {
        if let Some(m) = review.get_mut("metadata").and_then(Value::as_object_mut) {
            m.remove("managedFields");
        }
        if let Some(m) = review.as_object_mut() {
            m.remove("status");
        }
        crate::objects::managed_fields::record_update(
            None,
            &mut review,
            manager,
            &format!("{group}/{version}"),
            "",
            &crate::objects::meta::now(),
        );
        crate::objects::managed_fields::encode_as_server(&mut review, false);
    }
    review["status"] = status;
    Ok((201, review))
}

/// The parts of the protobuf review bodies the simulator reads (kubectl sends protobuf for
/// `create token`, `auth can-i` and `auth whoami`): the `runtime.Unknown` envelope's raw bytes,
/// then each kind's spec fields (numbers from the Kubernetes .proto files).
mod pb {
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Unknown {
        #[prost(bytes = "vec", tag = "2")]
        pub raw: Vec<u8>,
    }

    /// Any of the kinds: `spec` is field 2.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct WithSpec<S: prost::Message + Default + Clone + PartialEq + std::fmt::Debug> {
        #[prost(message, optional, tag = "2")]
        pub spec: Option<S>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct TokenRequestSpec {
        #[prost(string, repeated, tag = "1")]
        pub audiences: Vec<String>,
        #[prost(int64, optional, tag = "2")]
        pub expiration_seconds: Option<i64>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct TokenReviewSpec {
        #[prost(string, optional, tag = "1")]
        pub token: Option<String>,
        #[prost(string, repeated, tag = "2")]
        pub audiences: Vec<String>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct ResourceAttributes {
        #[prost(string, optional, tag = "1")]
        pub namespace: Option<String>,
        #[prost(string, optional, tag = "2")]
        pub verb: Option<String>,
        #[prost(string, optional, tag = "3")]
        pub group: Option<String>,
        #[prost(string, optional, tag = "5")]
        pub resource: Option<String>,
        #[prost(string, optional, tag = "6")]
        pub subresource: Option<String>,
        #[prost(string, optional, tag = "7")]
        pub name: Option<String>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct NonResourceAttributes {
        #[prost(string, optional, tag = "1")]
        pub path: Option<String>,
        #[prost(string, optional, tag = "2")]
        pub verb: Option<String>,
    }

    /// SelfSubjectRulesReviewSpec.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct RulesReviewSpec {
        #[prost(string, optional, tag = "1")]
        pub namespace: Option<String>,
    }

    /// SubjectAccessReviewSpec; the self review's spec uses fields 1 and 2 only.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct AccessReviewSpec {
        #[prost(message, optional, tag = "1")]
        pub resource_attributes: Option<ResourceAttributes>,
        #[prost(message, optional, tag = "2")]
        pub non_resource_attributes: Option<NonResourceAttributes>,
        #[prost(string, optional, tag = "3")]
        pub user: Option<String>,
        #[prost(string, repeated, tag = "4")]
        pub groups: Vec<String>,
        #[prost(string, optional, tag = "6")]
        pub uid: Option<String>,
    }
}

fn spec_of<S: prost::Message + Default + Clone + PartialEq + std::fmt::Debug>(
    raw: &[u8],
) -> Result<S, prost::DecodeError> {
    use prost::Message as _;
    Ok(pb::WithSpec::<S>::decode(raw)?.spec.unwrap_or_default())
}

/// The JSON form of a protobuf review body (what the handlers read of it).
fn from_protobuf(kind: &str, body: &[u8]) -> Result<Value, ApiError> {
    use prost::Message as _;
    let bad = |e: prost::DecodeError| {
        ApiError::bad_request(format!("the protobuf {kind} cannot be decoded: {e}"))
    };
    let inner = &body[crate::api::protobuf::MAGIC.len()..];
    let raw = pb::Unknown::decode(inner).map_err(bad)?.raw;
    let spec = match kind {
        "TokenRequest" => {
            let s: pb::TokenRequestSpec = spec_of(&raw).map_err(bad)?;
            let mut spec = json!({"audiences": s.audiences});
            if let Some(seconds) = s.expiration_seconds {
                spec["expirationSeconds"] = json!(seconds);
            }
            spec
        }
        "TokenReview" => {
            let s: pb::TokenReviewSpec = spec_of(&raw).map_err(bad)?;
            json!({"token": s.token, "audiences": s.audiences})
        }
        "SelfSubjectReview" => json!({}),
        "SelfSubjectRulesReview" => {
            let s: pb::RulesReviewSpec = spec_of(&raw).map_err(bad)?;
            json!({"namespace": s.namespace})
        }
        _ => {
            let s: pb::AccessReviewSpec = spec_of(&raw).map_err(bad)?;
            let mut spec = json!({"user": s.user, "groups": s.groups, "uid": s.uid});
            if let Some(r) = s.resource_attributes {
                spec["resourceAttributes"] = json!({"namespace": r.namespace, "verb": r.verb,
                    "group": r.group, "resource": r.resource, "subresource": r.subresource, "name": r.name});
            }
            if let Some(n) = s.non_resource_attributes {
                spec["nonResourceAttributes"] = json!({"path": n.path, "verb": n.verb});
            }
            spec
        }
    };
    Ok(json!({ "spec": spec }))
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
