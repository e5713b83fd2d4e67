//! Authentication and authorization, as a real API server does them: every request is
//! authenticated from its bearer token (the administrator's token of the simulator's
//! kubeconfig, or a ServiceAccount token from the TokenRequest API; no token is the anonymous
//! user; an unknown token is 401), then authorized by the configured mode: `AlwaysAllow` (the
//! default, for convenience) or `Rbac` (Roles, ClusterRoles with aggregation and their
//! bindings; a refusal is 403 with the real message). The review APIs (TokenReview,
//! SubjectAccessReview, SelfSubjectAccessReview, ...) answer from the same tokens and policy.

pub mod admit;
pub mod impersonation;
pub mod policy_cache;
pub mod rbac;
pub mod review_kinds;
pub mod reviews;
pub mod tls;
pub mod tokens;
pub mod user;

pub use admit::{Auth, AuthorizationMode, attributes};
pub use review_kinds::review_resources;
