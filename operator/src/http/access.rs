//! Who may read an endpoint: the bearer token of a request is checked with a TokenReview, then
//! the user it names must be allowed a verb on a non-resource URL by a SubjectAccessReview (as
//! the kubebuilder metrics filter and kube-rbac-proxy do). Missing or invalid tokens get 401,
//! users without the permission 403, a review the API server cannot answer 503; the token is
//! never logged or echoed.

use actix_web::HttpResponse;
use actix_web::http::StatusCode;
use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
use k8s_openapi::api::authorization::v1::{
    NonResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use kube::api::{Api, PostParams};
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::fmt::Debug;

/// The verb the admin endpoint asks for on `/admin` (a custom verb, so a role that may `get`
/// every non-resource URL does not open the admin views by accident).
pub const ADMIN_VERB: &str = "admin";
/// The non-resource URL the admin endpoint's permission names.
pub const ADMIN_PATH: &str = "/admin";

/// Checks requests against the API server's TokenReview and SubjectAccessReview.
#[derive(Clone)]
pub struct AccessReviewer {
    client: kube::Client,
    /// The non-resource URL the permission names (`/metrics`, `/admin`).
    pub path: String,
    /// The verb asked for on it (`get`, `admin`).
    pub verb: String,
}

impl std::fmt::Debug for AccessReviewer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AccessReviewer")
            .field("path", &self.path)
            .field("verb", &self.verb)
            .finish()
    }
}

/// Why a request was not admitted: the HTTP status and a message for the caller.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Refusal {
    pub status: StatusCode,
    pub message: String,
}

impl Refusal {
    fn new(status: StatusCode, message: impl Into<String>) -> Refusal {
        Refusal {
            status,
            message: message.into(),
        }
    }

    /// The plain-text answer.
    pub(crate) fn response(&self) -> HttpResponse {
        let mut r = HttpResponse::build(self.status);
        if self.status == StatusCode::UNAUTHORIZED {
            r.insert_header(("WWW-Authenticate", "Bearer"));
        }
        r.content_type("text/plain; charset=utf-8")
            .body(format!("{}\n", self.message))
    }
}

/// The token of an `Authorization: Bearer <token>` header.
pub(crate) fn bearer_token(header: Option<&str>) -> Option<&str> {
    let value = header?.trim();
    let (scheme, token) = value.split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

impl AccessReviewer {
    pub fn new(client: kube::Client, path: &str, verb: &str) -> AccessReviewer {
        AccessReviewer {
            client,
            path: path.to_string(),
            verb: verb.to_string(),
        }
    }

    /// Creates `review` (a TokenReview or a SubjectAccessReview) and returns the API server's
    /// answer; a review it cannot answer is a 503.
    async fn ask<K>(&self, review: &K) -> Result<K, Refusal>
    where
        K: kube::Resource<DynamicType = ()> + Clone + Debug + DeserializeOwned + Serialize,
    {
        let what = K::kind(&());
        Api::<K>::all(self.client.clone())
            .create(&PostParams::default(), review)
            .await
            .map_err(|e| {
                tracing::warn!(error = %e, "cannot ask the API server for a {what}");
                Refusal::new(
                    StatusCode::SERVICE_UNAVAILABLE,
                    format!("cannot ask the API server for a {what}: {e}"),
                )
            })
    }

    /// Admits the request with this `Authorization` header, or says why not.
    pub(crate) async fn check(&self, authorization: Option<&str>) -> Result<(), Refusal> {
        let token = bearer_token(authorization).ok_or_else(|| {
            Refusal::new(
                StatusCode::UNAUTHORIZED,
                "Unauthorized: send a ServiceAccount token as `Authorization: Bearer <token>`",
            )
        })?;
        let review = TokenReview {
            spec: TokenReviewSpec {
                token: token.to_string(),
                audiences: None,
            },
            ..TokenReview::default()
        };
        let reviewed = self.ask(&review).await?;
        let status = reviewed.status.unwrap_or_default();
        let user = match (status.authenticated, status.user) {
            (Some(true), Some(user)) => user,
            _ => {
                return Err(Refusal::new(
                    StatusCode::UNAUTHORIZED,
                    "Unauthorized: the token did not pass the TokenReview",
                ));
            }
        };
        let name = user.username.clone().unwrap_or_default();
        let access = SubjectAccessReview {
            spec: SubjectAccessReviewSpec {
                user: user.username,
                groups: user.groups,
                uid: user.uid,
                extra: user.extra,
                non_resource_attributes: Some(NonResourceAttributes {
                    path: Some(self.path.clone()),
                    verb: Some(self.verb.clone()),
                }),
                resource_attributes: None,
            },
            ..SubjectAccessReview::default()
        };
        let decided = self.ask(&access).await?;
        if decided.status.is_some_and(|s| s.allowed) {
            return Ok(());
        }
        Err(Refusal::new(
            StatusCode::FORBIDDEN,
            format!(
                "Forbidden: User \"{name}\" cannot {} path \"{}\"",
                self.verb, self.path
            ),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bearer_tokens_are_read_from_the_header_only_in_the_bearer_scheme() {
        assert_eq!(bearer_token(Some("Bearer abc")), Some("abc"));
        assert_eq!(bearer_token(Some("bearer  abc ")), Some("abc"));
        assert_eq!(bearer_token(Some("Basic abc")), None);
        assert_eq!(bearer_token(Some("Bearer ")), None);
        assert_eq!(bearer_token(None), None);
    }
}
