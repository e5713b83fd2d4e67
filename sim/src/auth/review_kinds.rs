//! The review kinds the server serves (create-only, answered by `reviews.rs`): their groups and
//! discovery facts.

use crate::registry::ResourceInfo;

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
        "selfsubjectrulesreviews",
        "SelfSubjectRulesReview",
        false,
    ),
    (
        AUTHORIZATION,
        "localsubjectaccessreviews",
        "LocalSubjectAccessReview",
        true,
    ),
];

/// The review kinds, for discovery (create-only; answered by `reviews::answer`).
pub fn review_resources() -> Vec<ResourceInfo> {
    REVIEWS
        .iter()
        .map(|(group, resource, kind, namespaced)| ResourceInfo {
            group: group.to_string(),
            versions: vec!["v1".into()],
            resource: resource.to_string(),
            kind: kind.to_string(),
            singular: kind.to_lowercase(),
            list_kind: format!("{kind}List"),
            namespaced: *namespaced,
            short_names: Vec::new(),
            categories: Vec::new(),
            has_status: false,
            has_proxy: false,
            crd: None,
        })
        .collect()
}
