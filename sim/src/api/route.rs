//! Parsing a request path into what it addresses: discovery documents, OpenAPI, or a resource
//! (group, version, namespace, resource, name, subresource, and the proxied rest).

use crate::registry::Registry;

/// What a path addresses.
#[derive(Clone, Debug, PartialEq)]
pub enum Route {
    Version,
    Health,
    /// `/api`
    CoreVersions,
    /// `/apis`
    Groups,
    /// `/apis/{group}`
    Group(String),
    /// `/api/v1` or `/apis/{group}/{version}`
    GroupVersion(String, String),
    OpenApi(String),
    /// `/sim/faults`: the fault injection settings (JSON GET / PUT).
    SimFaults,
    Resource(ResourcePath),
    Unknown,
}

/// A resource path.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct ResourcePath {
    pub group: String,
    pub version: String,
    /// Some for namespaced paths (`/namespaces/{ns}/...`).
    pub namespace: Option<String>,
    pub resource: String,
    pub name: Option<String>,
    pub subresource: Option<String>,
    /// What follows the subresource (the proxied path).
    pub rest: String,
}

fn resource_path(group: &str, version: &str, rest: &[&str], registry: &Registry) -> Route {
    let namespaced = rest.first() == Some(&"namespaces")
        && rest.len() >= 3
        && (rest.len() >= 4
            || registry
                .find(group, version, rest[2])
                .is_some_and(|r| r.namespaced));
    let (namespace, rest) = if namespaced {
        (Some(rest[1].to_string()), &rest[2..])
    } else {
        (None, rest)
    };
    let Some(resource) = rest.first() else {
        return Route::Unknown;
    };
    Route::Resource(ResourcePath {
        group: group.to_string(),
        version: version.to_string(),
        namespace,
        resource: resource.to_string(),
        name: rest.get(1).map(|s| s.to_string()),
        subresource: rest.get(2).map(|s| s.to_string()),
        rest: if rest.len() > 3 {
            rest[3..].join("/")
        } else {
            String::new()
        },
    })
}

/// Parses `path` (without the query string).
pub fn parse(path: &str, registry: &Registry) -> Route {
    let segs: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    match segs.as_slice() {
        ["version"] => Route::Version,
        ["healthz" | "livez" | "readyz", ..] => Route::Health,
        ["api"] => Route::CoreVersions,
        ["api", v] => Route::GroupVersion(String::new(), v.to_string()),
        ["api", v, rest @ ..] => resource_path("", v, rest, registry),
        ["apis"] => Route::Groups,
        ["apis", g] => Route::Group(g.to_string()),
        ["apis", g, v] => Route::GroupVersion(g.to_string(), v.to_string()),
        ["apis", g, v, rest @ ..] => resource_path(g, v, rest, registry),
        ["openapi", rest @ ..] => Route::OpenApi(rest.join("/")),
        ["sim", "faults"] => Route::SimFaults,
        _ => Route::Unknown,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths() {
        let r = Registry::with_builtins();
        let Route::Resource(p) = parse("/api/v1/namespaces/default/pods/a/status", &r) else {
            panic!()
        };
        assert_eq!(
            (
                p.namespace.as_deref(),
                p.resource.as_str(),
                p.name.as_deref(),
                p.subresource.as_deref()
            ),
            (Some("default"), "pods", Some("a"), Some("status"))
        );
        let Route::Resource(p) = parse("/api/v1/namespaces/default", &r) else {
            panic!()
        };
        assert_eq!(
            (p.namespace, p.resource.as_str(), p.name.as_deref()),
            (None, "namespaces", Some("default"))
        );
        let Route::Resource(p) = parse("/api/v1/namespaces/x/status", &r) else {
            panic!()
        };
        assert_eq!(
            (p.resource.as_str(), p.subresource.as_deref()),
            ("namespaces", Some("status"))
        );
        let Route::Resource(p) = parse(
            "/api/v1/namespaces/ns/services/svc:8776/proxy/healthcheck",
            &r,
        ) else {
            panic!()
        };
        assert_eq!(
            (p.subresource.as_deref(), p.rest.as_str()),
            (Some("proxy"), "healthcheck")
        );
        let Route::Resource(p) = parse("/apis/apps/v1/deployments", &r) else {
            panic!()
        };
        assert_eq!((p.namespace, p.name), (None, None));
        assert_eq!(parse("/apis/apps", &r), Route::Group("apps".into()));
    }
}
