//! Admitting a request: the authorization mode, authentication from the bearer token, the
//! attributes a request asks for and the decision on them.

use super::impersonation::Impersonation;
use super::policy_cache::PolicyCache;
use super::rbac::{self, Attributes, Decision, ResourceAttributes};
use super::tokens::Tokens;
use super::user::UserInfo;
use crate::api::route::Route;
use crate::error::ApiError;
use crate::store::Store;

/// How requests are authorized.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum AuthorizationMode {
    /// Every authenticated or anonymous request is allowed.
    #[default]
    AlwaysAllow,
    /// The RBAC objects of the cluster decide.
    Rbac,
}

impl std::str::FromStr for AuthorizationMode {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.to_ascii_lowercase().as_str() {
            "alwaysallow" | "always-allow" | "allow-all" => Ok(AuthorizationMode::AlwaysAllow),
            "rbac" => Ok(AuthorizationMode::Rbac),
            other => Err(format!(
                "unknown authorization mode {other:?} (known: rbac, always-allow)"
            )),
        }
    }
}

/// The authentication and authorization state of a running simulator.
#[derive(Clone, Debug, Default)]
pub struct Auth {
    pub mode: AuthorizationMode,
    pub tokens: Tokens,
    /// The RBAC objects decisions read, kept while none changes.
    pub policies: PolicyCache,
}

/// What a request asks, for the authorizer; None for the simulator's own control endpoint.
pub fn attributes(route: &Route, verb: &str, path: &str, method: &str) -> Option<Attributes> {
    match route {
        Route::SimFaults => None,
        Route::Resource(p) => {
            let name = p.name.clone().unwrap_or_default();
            // a namespace is addressed within itself, so a RoleBinding can grant reading it
            let namespace = match &p.namespace {
                Some(ns) => ns.clone(),
                None if p.group.is_empty() && p.resource == "namespaces" => name.clone(),
                None => String::new(),
            };
            Some(Attributes::Resource(ResourceAttributes {
                verb: verb.to_string(),
                group: p.group.clone(),
                resource: p.resource.clone(),
                subresource: p.subresource.clone().unwrap_or_default(),
                namespace,
                name,
            }))
        }
        _ => Some(Attributes::NonResource {
            path: path.to_string(),
            verb: method.to_ascii_lowercase(),
        }),
    }
}

impl Auth {
    /// A state with the given mode and a fresh administrator token.
    pub fn new(mode: AuthorizationMode) -> Auth {
        Auth {
            mode,
            tokens: Tokens::new(),
            policies: PolicyCache::default(),
        }
    }

    /// Who sends a request with this `Authorization` header (401 for a bad credential).
    pub fn authenticate(&self, header: Option<&str>, store: &Store) -> Result<UserInfo, ApiError> {
        let Some(header) = header.map(str::trim).filter(|h| !h.is_empty()) else {
            return Ok(UserInfo::anonymous());
        };
        let token = header
            .strip_prefix("Bearer ")
            .or_else(|| header.strip_prefix("bearer "))
            .map(str::trim)
            .ok_or_else(ApiError::unauthorized)?;
        self.tokens
            .review(token, &[], store)
            .map(|r| r.user)
            .ok_or_else(ApiError::unauthorized)
    }

    /// Whether `user` may do `attrs`.
    pub fn decide(&self, store: &Store, user: &UserInfo, attrs: &Attributes) -> Decision {
        match self.mode {
            // kube-apiserver's AlwaysAllow authorizer gives no reason.
            AuthorizationMode::AlwaysAllow => Decision {
                allowed: true,
                reason: String::new(),
            },
            AuthorizationMode::Rbac => {
                let namespace = match attrs {
                    Attributes::Resource(r) => r.namespace.as_str(),
                    Attributes::NonResource { .. } => "",
                };
                rbac::authorize(&self.policies.policy(store, namespace), user, attrs)
            }
        }
    }

    /// What `user` may do in `namespace` (a SelfSubjectRulesReview's answer).
    pub fn rules(&self, store: &Store, user: &UserInfo, namespace: &str) -> rbac::Rules {
        match self.mode {
            AuthorizationMode::AlwaysAllow => rbac::Rules::everything(),
            AuthorizationMode::Rbac => {
                rbac::rules_for(&self.policies.policy(store, namespace), user, namespace)
            }
        }
    }

    /// Authenticates and authorizes a request, acting as the user its impersonation headers
    /// name once the requester may impersonate them: the (acting) user, or the 400 / 401 / 403
    /// to answer with the name of the user refused (empty for a 401).
    pub fn admit(
        &self,
        store: &Store,
        header: Option<&str>,
        impersonation: &Impersonation,
        attrs: Option<&Attributes>,
    ) -> Result<UserInfo, (String, ApiError)> {
        let mut user = self
            .authenticate(header, store)
            .map_err(|e| (String::new(), e))?;
        if impersonation.requested() {
            let needed = impersonation
                .needed()
                .map_err(|message| (user.name.clone(), ApiError::bad_request(message)))?;
            if let Some(refused) = needed
                .iter()
                .find(|wanted| !self.decide(store, &user, wanted).allowed)
            {
                return Err((user.name.clone(), refusal(&user, refused)));
            }
            user = impersonation.acting_user();
        }
        let Some(attrs) = attrs else {
            return Ok(user);
        };
        if self.decide(store, &user, attrs).allowed {
            return Ok(user);
        }
        let refused = refusal(&user, attrs);
        Err((user.name, refused))
    }
}

/// The 403 refusing `attrs` to `user`, worded as a real API server words it.
fn refusal(user: &UserInfo, attrs: &Attributes) -> ApiError {
    let message = rbac::forbidden_message(user, attrs);
    match attrs {
        Attributes::Resource(r) => {
            ApiError::forbidden_with(&r.group, &r.resource, &r.name, message)
        }
        Attributes::NonResource { .. } => ApiError::forbidden_with("", "", "", message),
    }
}
