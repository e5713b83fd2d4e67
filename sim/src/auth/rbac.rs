//! The RBAC authorizer: decides whether a user may do what a request asks from the Roles,
//! ClusterRoles (with aggregation), RoleBindings and ClusterRoleBindings of a `Policy` snapshot,
//! plus the built-in grants a real cluster's bootstrap policy makes (system:masters may do
//! anything; every authenticated user may read discovery and ask about their own access; anyone
//! may read the health and version endpoints). Pure: no store access, unit-tested.

use super::user::UserInfo;
use super::user::{AUTHENTICATED, MASTERS};
use serde_json::{Value, json};
use std::sync::Arc;

/// What a request asks to do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Attributes {
    Resource(ResourceAttributes),
    /// A path outside the resource tree (`/metrics`, `/healthz`, `/apis`), with the lower-case
    /// HTTP verb (get, post, put, patch, delete, head) or a custom one.
    NonResource {
        path: String,
        verb: String,
    },
}

/// A request on a resource.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ResourceAttributes {
    pub verb: String,
    pub group: String,
    pub resource: String,
    pub subresource: String,
    /// Empty for cluster-scoped requests (and lists across all namespaces).
    pub namespace: String,
    /// Empty for lists, watches of a collection and creates.
    pub name: String,
}

/// The RBAC objects a decision reads (as stored JSON; shared, as the cluster-wide ones are by
/// the policies of every namespace).
#[derive(Clone, Debug, Default)]
pub struct Policy {
    pub cluster_roles: Arc<Vec<Value>>,
    pub cluster_role_bindings: Arc<Vec<Value>>,
    /// The Roles of the request's namespace.
    pub roles: Arc<Vec<Value>>,
    /// The RoleBindings of the request's namespace.
    pub role_bindings: Arc<Vec<Value>>,
}

/// The answer to one question.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Decision {
    pub allowed: bool,
    /// Which grant allowed it, or why nothing did.
    pub reason: String,
}

/// Paths any authenticated user may `get` (the system:discovery and system:basic-user roles).
const DISCOVERY_PATHS: &[&str] = &[
    "/api",
    "/api/*",
    "/apis",
    "/apis/*",
    "/openapi",
    "/openapi/*",
    "/version",
    "/version/",
    "/healthz",
    "/livez",
    "/readyz",
];
/// Paths anyone may `get` (the system:public-info-viewer role).
const PUBLIC_PATHS: &[&str] = &["/healthz", "/livez", "/readyz", "/version", "/version/"];

fn strings(v: Option<&Value>) -> Vec<&str> {
    v.and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

fn name_of(v: &Value) -> &str {
    v.pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default()
}

fn namespace_of(v: &Value) -> &str {
    v.pointer("/metadata/namespace")
        .and_then(Value::as_str)
        .unwrap_or_default()
}

/// Whether one PolicyRule covers `attrs`.
pub fn rule_allows(rule: &Value, attrs: &Attributes) -> bool {
    let verbs = strings(rule.get("verbs"));
    match attrs {
        Attributes::Resource(r) => {
            if !verbs.iter().any(|v| *v == "*" || *v == r.verb) {
                return false;
            }
            if !strings(rule.get("apiGroups"))
                .iter()
                .any(|g| *g == "*" || *g == r.group)
            {
                return false;
            }
            let combined = if r.subresource.is_empty() {
                r.resource.clone()
            } else {
                format!("{}/{}", r.resource, r.subresource)
            };
            let resource_matches = strings(rule.get("resources")).iter().any(|res| {
                *res == "*"
                    || *res == combined
                    || (!r.subresource.is_empty()
                        && (*res == format!("*/{}", r.subresource)
                            || *res == format!("{}/*", r.resource)))
            });
            if !resource_matches {
                return false;
            }
            let names = strings(rule.get("resourceNames"));
            names.is_empty() || (!r.name.is_empty() && names.contains(&r.name.as_str()))
        }
        Attributes::NonResource { path, verb } => {
            verbs.iter().any(|v| *v == "*" || v == verb)
                && strings(rule.get("nonResourceURLs"))
                    .iter()
                    .any(|u| path_matches(u, path))
        }
    }
}

fn path_matches(pattern: &str, path: &str) -> bool {
    match pattern.strip_suffix('*') {
        Some(prefix) => path.starts_with(prefix),
        None => pattern == path,
    }
}

/// Whether a `metav1.LabelSelector` (matchLabels, matchExpressions) selects an object's labels;
/// an empty selector selects everything.
pub fn label_selector_matches(selector: &Value, labels: &Value) -> bool {
    let label = |k: &str| labels.get(k).and_then(Value::as_str);
    let by_map = selector
        .get("matchLabels")
        .and_then(Value::as_object)
        .is_none_or(|m| m.iter().all(|(k, v)| label(k) == v.as_str()));
    let by_expressions = selector
        .get("matchExpressions")
        .and_then(Value::as_array)
        .is_none_or(|exprs| {
            exprs.iter().all(|e| {
                let key = e.get("key").and_then(Value::as_str).unwrap_or_default();
                let values = strings(e.get("values"));
                match e
                    .get("operator")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                {
                    "In" => label(key).is_some_and(|x| values.contains(&x)),
                    "NotIn" => label(key).is_none_or(|x| !values.contains(&x)),
                    "Exists" => label(key).is_some(),
                    "DoesNotExist" => label(key).is_none(),
                    _ => false,
                }
            })
        });
    by_map && by_expressions
}

impl Policy {
    fn cluster_role(&self, name: &str) -> Option<&Value> {
        self.cluster_roles.iter().find(|r| name_of(r) == name)
    }

    /// The rules of a ClusterRole: its own, or with an aggregationRule the rules of every
    /// ClusterRole one of its selectors picks (as the aggregation controller fills them in).
    pub fn cluster_role_rules(&self, name: &str) -> Vec<&Value> {
        let Some(role) = self.cluster_role(name) else {
            return Vec::new();
        };
        let selectors = role
            .pointer("/aggregationRule/clusterRoleSelectors")
            .and_then(Value::as_array);
        let mut rules: Vec<&Value> = own_rules(role);
        if let Some(selectors) = selectors {
            for other in self.cluster_roles.iter() {
                let labels = other.pointer("/metadata/labels").unwrap_or(&Value::Null);
                if name_of(other) != name
                    && selectors.iter().any(|s| label_selector_matches(s, labels))
                {
                    rules.extend(own_rules(other));
                }
            }
        }
        rules
    }

    fn role_rules(&self, namespace: &str, name: &str) -> Vec<&Value> {
        self.roles
            .iter()
            .find(|r| name_of(r) == name && namespace_of(r) == namespace)
            .map(own_rules)
            .unwrap_or_default()
    }
}

fn own_rules(role: &Value) -> Vec<&Value> {
    role.get("rules")
        .and_then(Value::as_array)
        .map(|r| r.iter().collect())
        .unwrap_or_default()
}

/// Whether a binding's subject is `user` (ServiceAccount subjects without a namespace take the
/// binding's).
fn subject_is(subject: &Value, binding_namespace: &str, user: &UserInfo) -> bool {
    let field = |k: &str| subject.get(k).and_then(Value::as_str).unwrap_or_default();
    match field("kind") {
        "User" => field("name") == user.name,
        "Group" => user.groups.iter().any(|g| g == field("name")),
        "ServiceAccount" => {
            let ns = match field("namespace") {
                "" => binding_namespace,
                ns => ns,
            };
            // system:serviceaccount:<namespace>:<name>, compared without building it
            user.name
                .strip_prefix("system:serviceaccount:")
                .and_then(|rest| rest.strip_prefix(ns))
                .and_then(|rest| rest.strip_prefix(':'))
                == Some(field("name"))
        }
        _ => false,
    }
}

fn binds(binding: &Value, user: &UserInfo) -> bool {
    binding
        .get("subjects")
        .and_then(Value::as_array)
        .is_some_and(|s| s.iter().any(|s| subject_is(s, namespace_of(binding), user)))
}

fn role_ref(binding: &Value) -> (&str, &str) {
    let field = |k: &str| {
        binding
            .pointer(&format!("/roleRef/{k}"))
            .and_then(Value::as_str)
            .unwrap_or_default()
    };
    (field("kind"), field("name"))
}

fn builtin_grant(user: &UserInfo, attrs: &Attributes) -> Option<&'static str> {
    let member = |g: &str| user.groups.iter().any(|x| x == g);
    if member(MASTERS) {
        return Some("member of system:masters");
    }
    match attrs {
        Attributes::NonResource { path, verb } if verb == "get" => {
            let allowed = |paths: &[&str]| paths.iter().any(|p| path_matches(p, path));
            if member(AUTHENTICATED) && allowed(DISCOVERY_PATHS) {
                return Some("discovery is open to authenticated users");
            }
            allowed(PUBLIC_PATHS).then_some("health and version are public")
        }
        Attributes::Resource(r) if member(AUTHENTICATED) && r.verb == "create" => {
            let own = matches!(
                (r.group.as_str(), r.resource.as_str()),
                (
                    "authorization.k8s.io",
                    "selfsubjectaccessreviews" | "selfsubjectrulesreviews"
                ) | ("authentication.k8s.io", "selfsubjectreviews")
            );
            own.then_some("users may ask about their own access")
        }
        _ => None,
    }
}

/// Decides `attrs` for `user`.
pub fn authorize(policy: &Policy, user: &UserInfo, attrs: &Attributes) -> Decision {
    if let Some(why) = builtin_grant(user, attrs) {
        return Decision {
            allowed: true,
            reason: why.to_string(),
        };
    }
    let allows = |rules: Vec<&Value>| rules.iter().any(|r| rule_allows(r, attrs));
    for binding in policy
        .cluster_role_bindings
        .iter()
        .filter(|b| binds(b, user))
    {
        let (kind, name) = role_ref(binding);
        if kind == "ClusterRole" && allows(policy.cluster_role_rules(name)) {
            return Decision {
                allowed: true,
                reason: format!(
                    "RBAC: allowed by ClusterRoleBinding \"{}\" of ClusterRole \"{name}\"",
                    name_of(binding)
                ),
            };
        }
    }
    if let Attributes::Resource(r) = attrs
        && !r.namespace.is_empty()
    {
        for binding in policy
            .role_bindings
            .iter()
            .filter(|b| namespace_of(b) == r.namespace && binds(b, user))
        {
            let (kind, name) = role_ref(binding);
            let rules = match kind {
                "Role" => policy.role_rules(&r.namespace, name),
                "ClusterRole" => policy.cluster_role_rules(name),
                _ => Vec::new(),
            };
            if allows(rules) {
                return Decision {
                    allowed: true,
                    reason: format!(
                        "RBAC: allowed by RoleBinding \"{}/{}\" of {kind} \"{name}\"",
                        r.namespace,
                        name_of(binding)
                    ),
                };
            }
        }
    }
    Decision {
        allowed: false,
        reason: String::new(),
    }
}

/// What a user may do in a namespace, as a SelfSubjectRulesReview lists it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Rules {
    /// `{verbs, apiGroups, resources, resourceNames}` rules.
    pub resource: Vec<Value>,
    /// `{verbs, nonResourceURLs}` rules.
    pub non_resource: Vec<Value>,
}

impl Rules {
    /// Everything (system:masters, or authorization mode AlwaysAllow).
    pub fn everything() -> Rules {
        Rules {
            resource: vec![json!({"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]})],
            non_resource: vec![json!({"verbs": ["*"], "nonResourceURLs": ["*"]})],
        }
    }

    fn add(&mut self, rule: &Value) {
        let list =
            |k: &str| Value::Array(strings(rule.get(k)).into_iter().map(Value::from).collect());
        if rule.get("nonResourceURLs").is_some() {
            self.non_resource
                .push(json!({"verbs": list("verbs"), "nonResourceURLs": list("nonResourceURLs")}));
        } else {
            let mut out = json!({"verbs": list("verbs"), "apiGroups": list("apiGroups"),
                                 "resources": list("resources")});
            if rule.get("resourceNames").is_some() {
                out["resourceNames"] = list("resourceNames");
            }
            self.resource.push(out);
        }
    }
}

/// The rules `user` holds in `namespace` (cluster-wide ones included): the built-in grants and
/// the rules of every role bound to the user.
pub fn rules_for(policy: &Policy, user: &UserInfo, namespace: &str) -> Rules {
    let member = |g: &str| user.groups.iter().any(|x| x == g);
    if member(MASTERS) {
        return Rules::everything();
    }
    let mut rules = Rules::default();
    if member(AUTHENTICATED) {
        rules.add(
            &json!({"verbs": ["create"], "apiGroups": ["authorization.k8s.io"],
                          "resources": ["selfsubjectaccessreviews", "selfsubjectrulesreviews"]}),
        );
        rules.add(
            &json!({"verbs": ["create"], "apiGroups": ["authentication.k8s.io"],
                          "resources": ["selfsubjectreviews"]}),
        );
        rules.add(&json!({"verbs": ["get"], "nonResourceURLs": DISCOVERY_PATHS}));
    }
    rules.add(&json!({"verbs": ["get"], "nonResourceURLs": PUBLIC_PATHS}));
    for binding in policy
        .cluster_role_bindings
        .iter()
        .filter(|b| binds(b, user))
    {
        if let ("ClusterRole", name) = role_ref(binding) {
            for rule in policy.cluster_role_rules(name) {
                rules.add(rule);
            }
        }
    }
    for binding in policy
        .role_bindings
        .iter()
        .filter(|b| namespace_of(b) == namespace && binds(b, user))
    {
        let (kind, name) = role_ref(binding);
        let bound = match kind {
            "Role" => policy.role_rules(namespace, name),
            "ClusterRole" => policy.cluster_role_rules(name),
            _ => Vec::new(),
        };
        for rule in bound {
            rules.add(rule);
        }
    }
    rules
}

/// The message of a refusal, worded as a real API server words it.
pub fn forbidden_message(user: &UserInfo, attrs: &Attributes) -> String {
    match attrs {
        Attributes::NonResource { path, verb } => {
            format!(
                "forbidden: User \"{}\" cannot {verb} path \"{path}\"",
                user.name
            )
        }
        Attributes::Resource(r) => {
            let qualified = if r.group.is_empty() {
                r.resource.clone()
            } else {
                format!("{}.{}", r.resource, r.group)
            };
            let subject = if r.name.is_empty() {
                qualified
            } else {
                format!("{qualified} \"{}\"", r.name)
            };
            let resource = if r.subresource.is_empty() {
                r.resource.clone()
            } else {
                format!("{}/{}", r.resource, r.subresource)
            };
            let scope = if r.namespace.is_empty() {
                "at the cluster scope".to_string()
            } else {
                format!("in the namespace \"{}\"", r.namespace)
            };
            format!(
                "{subject} is forbidden: User \"{}\" cannot {} resource \"{resource}\" in API group \"{}\" {scope}",
                user.name, r.verb, r.group
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn sa(ns: &str, name: &str) -> UserInfo {
        UserInfo::service_account(ns, name, "uid")
    }

    fn res(verb: &str, group: &str, resource: &str, ns: &str) -> Attributes {
        Attributes::Resource(ResourceAttributes {
            verb: verb.into(),
            group: group.into(),
            resource: resource.into(),
            namespace: ns.into(),
            ..Default::default()
        })
    }

    fn policy() -> Policy {
        Policy {
            roles: Arc::new(vec![
                json!({"metadata": {"name": "reader", "namespace": "team"},
                "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list"]},
                          {"apiGroups": [""], "resources": ["secrets"], "resourceNames": ["one"], "verbs": ["get"]}]}),
            ]),
            role_bindings: Arc::new(vec![
                json!({"metadata": {"name": "rb", "namespace": "team"},
                "roleRef": {"kind": "Role", "name": "reader"},
                "subjects": [{"kind": "ServiceAccount", "name": "app"}]}),
            ]),
            cluster_roles: Arc::new(vec![
                json!({"metadata": {"name": "deployer"},
                    "rules": [{"apiGroups": ["apps"], "resources": ["deployments", "deployments/status"], "verbs": ["*"]},
                              {"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]}),
                json!({"metadata": {"name": "aggregate"},
                    "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {"agg": "yes"}}]}}),
                json!({"metadata": {"name": "part", "labels": {"agg": "yes"}},
                    "rules": [{"apiGroups": ["batch"], "resources": ["jobs"], "verbs": ["list"]}]}),
            ]),
            cluster_role_bindings: Arc::new(vec![
                json!({"metadata": {"name": "crb"}, "roleRef": {"kind": "ClusterRole", "name": "deployer"},
                    "subjects": [{"kind": "ServiceAccount", "name": "op", "namespace": "sys"}]}),
                json!({"metadata": {"name": "agg"}, "roleRef": {"kind": "ClusterRole", "name": "aggregate"},
                    "subjects": [{"kind": "Group", "name": "auditors"}]}),
            ]),
        }
    }

    #[test]
    fn namespaced_role_allows_its_rules_in_its_namespace_only() {
        let p = policy();
        let app = sa("team", "app");
        assert!(authorize(&p, &app, &res("list", "", "configmaps", "team")).allowed);
        assert!(!authorize(&p, &app, &res("list", "", "configmaps", "other")).allowed);
        assert!(!authorize(&p, &app, &res("delete", "", "configmaps", "team")).allowed);
        assert!(
            !authorize(
                &p,
                &sa("team", "other"),
                &res("list", "", "configmaps", "team")
            )
            .allowed
        );
        let mut one = ResourceAttributes {
            verb: "get".into(),
            resource: "secrets".into(),
            namespace: "team".into(),
            name: "one".into(),
            ..Default::default()
        };
        assert!(authorize(&p, &app, &Attributes::Resource(one.clone())).allowed);
        one.name = "two".into();
        assert!(!authorize(&p, &app, &Attributes::Resource(one)).allowed);
    }

    #[test]
    fn cluster_role_binding_allows_everywhere_and_subresources_explicitly() {
        let p = policy();
        let op = sa("sys", "op");
        assert!(authorize(&p, &op, &res("patch", "apps", "deployments", "x")).allowed);
        assert!(authorize(&p, &op, &res("list", "apps", "deployments", "")).allowed);
        assert!(!authorize(&p, &op, &res("list", "apps", "statefulsets", "x")).allowed);
        let scale = Attributes::Resource(ResourceAttributes {
            verb: "update".into(),
            group: "apps".into(),
            resource: "deployments".into(),
            subresource: "scale".into(),
            namespace: "x".into(),
            name: "d".into(),
        });
        assert!(!authorize(&p, &op, &scale).allowed);
        let metrics = Attributes::NonResource {
            path: "/metrics".into(),
            verb: "get".into(),
        };
        assert!(authorize(&p, &op, &metrics).allowed);
        assert!(!authorize(&p, &sa("team", "app"), &metrics).allowed);
    }

    #[test]
    fn aggregated_cluster_role_collects_selected_rules() {
        let p = policy();
        let auditor = UserInfo {
            name: "alice".into(),
            uid: String::new(),
            groups: vec!["auditors".into(), AUTHENTICATED.into()],
        };
        assert!(authorize(&p, &auditor, &res("list", "batch", "jobs", "any")).allowed);
        assert!(!authorize(&p, &auditor, &res("get", "batch", "jobs", "any")).allowed);
    }

    #[test]
    fn builtin_grants() {
        let p = Policy::default();
        let anon = UserInfo::anonymous();
        let get = |path: &str| Attributes::NonResource {
            path: path.into(),
            verb: "get".into(),
        };
        assert!(authorize(&p, &anon, &get("/healthz")).allowed);
        assert!(!authorize(&p, &anon, &get("/apis")).allowed);
        let app = sa("team", "app");
        assert!(authorize(&p, &app, &get("/apis/apps/v1")).allowed);
        assert!(
            authorize(
                &p,
                &app,
                &res(
                    "create",
                    "authorization.k8s.io",
                    "selfsubjectaccessreviews",
                    ""
                )
            )
            .allowed
        );
        let admin = UserInfo::admin();
        assert!(authorize(&p, &admin, &res("delete", "", "nodes", "")).allowed);
    }

    #[test]
    fn refusals_are_worded_like_a_real_api_server() {
        let app = sa("team", "app");
        assert_eq!(
            forbidden_message(&app, &res("list", "apps", "deployments", "team")),
            "deployments.apps is forbidden: User \"system:serviceaccount:team:app\" cannot list resource \"deployments\" in API group \"apps\" in the namespace \"team\""
        );
        let named = Attributes::Resource(ResourceAttributes {
            verb: "create".into(),
            resource: "serviceaccounts".into(),
            subresource: "token".into(),
            name: "x".into(),
            ..Default::default()
        });
        assert_eq!(
            forbidden_message(&app, &named),
            "serviceaccounts \"x\" is forbidden: User \"system:serviceaccount:team:app\" cannot create resource \"serviceaccounts/token\" in API group \"\" at the cluster scope"
        );
    }
}
