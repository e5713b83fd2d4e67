//! Authentication and RBAC enforced by the simulator: ServiceAccount tokens from the
//! TokenRequest API, a namespaced Role, a ClusterRole, aggregation, the real 403 message, a bad
//! token's 401, and the review APIs (TokenReview, SubjectAccessReview).

use crate::common::raw;
use cinder_sim::auth::AuthorizationMode;
use cinder_sim::controllers::ControllersConfig;
use cinder_sim::{ClusterConfig, EmbeddedCluster};
use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, ServiceAccount};
use kube::api::{Api, DynamicObject, ListParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::{Value, json};

async fn rbac_cluster() -> EmbeddedCluster {
    EmbeddedCluster::start(ClusterConfig {
        controllers: ControllersConfig::all_off(),
        authorization: AuthorizationMode::Rbac,
        ..ClusterConfig::default()
    })
    .await
    .unwrap()
}

/// Creates `kind` objects from JSON through the administrator's client.
async fn create(client: &kube::Client, group: &str, kind: &str, plural: &str, obj: Value) {
    let ar = ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, "v1", kind), plural);
    let obj: DynamicObject = serde_json::from_value(obj).unwrap();
    let api: Api<DynamicObject> = match obj.metadata.namespace.clone() {
        Some(ns) => Api::namespaced_with(client.clone(), &ns, &ar),
        None => Api::all_with(client.clone(), &ar),
    };
    api.create(&PostParams::default(), &obj).await.unwrap();
}

async fn namespace(client: &kube::Client, name: &str) {
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": name}})).unwrap();
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await
        .unwrap();
}

/// Creates the ServiceAccount `ns/name` and answers a token for it (TokenRequest API).
async fn service_account_token(client: &kube::Client, ns: &str, name: &str) -> String {
    let sa: ServiceAccount = serde_json::from_value(json!({"metadata": {"name": name}})).unwrap();
    let api: Api<ServiceAccount> = Api::namespaced(client.clone(), ns);
    api.create(&PostParams::default(), &sa).await.unwrap();
    let request = TokenRequest {
        spec: Some(TokenRequestSpec {
            expiration_seconds: Some(3600),
            ..TokenRequestSpec::default()
        }),
        ..TokenRequest::default()
    };
    let answer = api
        .create_token_request(name, &PostParams::default(), &request)
        .await
        .unwrap();
    answer.status.and_then(|s| s.token).unwrap()
}

async fn client_with_token(cluster: &EmbeddedCluster, token: &str) -> kube::Client {
    let mut config = kube::Config::new(cluster.url().parse().unwrap());
    config.auth_info.token = Some(token.to_string().into());
    kube::Client::try_from(config).unwrap()
}

fn refusal(e: kube::Error) -> (u16, String) {
    match e {
        kube::Error::Api(s) => (s.code, s.message),
        other => panic!("not an API refusal: {other}"),
    }
}

const RBAC: &str = "rbac.authorization.k8s.io";

#[tokio::test]
async fn namespaced_role_allows_its_namespace_and_refuses_with_the_real_message() {
    let c = rbac_cluster().await;
    let admin = c.client().await;
    namespace(&admin, "team").await;
    namespace(&admin, "other").await;
    create(&admin, RBAC, "Role", "roles", json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
        "metadata": {"name": "cm-reader", "namespace": "team"},
        "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list", "watch"]}]})).await;
    create(
        &admin,
        RBAC,
        "RoleBinding",
        "rolebindings",
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
        "metadata": {"name": "app-reads", "namespace": "team"},
        "roleRef": {"apiGroup": RBAC, "kind": "Role", "name": "cm-reader"},
        "subjects": [{"kind": "ServiceAccount", "name": "app", "namespace": "team"}]}),
    )
    .await;
    let token = service_account_token(&admin, "team", "app").await;
    let app = client_with_token(&c, &token).await;

    let team: Api<ConfigMap> = Api::namespaced(app.clone(), "team");
    team.list(&ListParams::default()).await.unwrap();
    let cm: ConfigMap = serde_json::from_value(json!({"metadata": {"name": "x"}})).unwrap();
    let (code, message) = refusal(team.create(&PostParams::default(), &cm).await.unwrap_err());
    assert_eq!(code, 403);
    assert_eq!(
        message,
        "configmaps is forbidden: User \"system:serviceaccount:team:app\" cannot create resource \"configmaps\" in API group \"\" in the namespace \"team\""
    );
    let other: Api<ConfigMap> = Api::namespaced(app.clone(), "other");
    let (code, message) = refusal(other.get("x").await.unwrap_err());
    assert_eq!(code, 403);
    assert!(
        message.starts_with("configmaps \"x\" is forbidden"),
        "{message}"
    );
    assert!(message.ends_with("in the namespace \"other\""), "{message}");

    // the request record names who asked
    let refused: Vec<_> = c
        .requests()
        .into_iter()
        .filter(|r| r.status == 403)
        .collect();
    assert_eq!(refused.len(), 2);
    assert!(
        refused
            .iter()
            .all(|r| r.user == "system:serviceaccount:team:app")
    );

    // a token stops working when its ServiceAccount goes
    Api::<ServiceAccount>::namespaced(admin.clone(), "team")
        .delete("app", &Default::default())
        .await
        .unwrap();
    let (code, _) = refusal(team.list(&ListParams::default()).await.unwrap_err());
    assert_eq!(code, 401);
    let bad = raw(
        &c.url(),
        "GET",
        "/api/v1/namespaces/team/configmaps",
        &[("Authorization", "Bearer not-a-token")],
        "",
    )
    .await;
    assert_eq!(
        (bad.code, bad.json()["reason"].clone()),
        (401, json!("Unauthorized"))
    );
    let anonymous = raw(&c.url(), "GET", "/api/v1/namespaces", &[], "").await;
    assert_eq!(anonymous.code, 403, "{}", anonymous.body);
    assert!(
        anonymous.body.contains("system:anonymous"),
        "{}",
        anonymous.body
    );
    assert_eq!(raw(&c.url(), "GET", "/healthz", &[], "").await.code, 200);
    c.shutdown().await;
}

#[tokio::test]
async fn cluster_role_and_aggregation_allow_across_namespaces() {
    let c = rbac_cluster().await;
    let admin = c.client().await;
    namespace(&admin, "ops").await;
    namespace(&admin, "a").await;
    create(
        &admin,
        RBAC,
        "ClusterRole",
        "clusterroles",
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": {"name": "cm-lister"},
        "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["list"]}]}),
    )
    .await;
    create(
        &admin,
        RBAC,
        "ClusterRoleBinding",
        "clusterrolebindings",
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
        "metadata": {"name": "lister"},
        "roleRef": {"apiGroup": RBAC, "kind": "ClusterRole", "name": "cm-lister"},
        "subjects": [{"kind": "ServiceAccount", "name": "lister", "namespace": "ops"}]}),
    )
    .await;
    // an aggregated role: empty itself, it gathers the rules of the ClusterRoles it selects
    create(&admin, RBAC, "ClusterRole", "clusterroles", json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": {"name": "gathered"},
        "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {"example.com/aggregate-to-gathered": "true"}}]},
        "rules": []})).await;
    create(
        &admin,
        RBAC,
        "ClusterRoleBinding",
        "clusterrolebindings",
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
        "metadata": {"name": "gathered"},
        "roleRef": {"apiGroup": RBAC, "kind": "ClusterRole", "name": "gathered"},
        "subjects": [{"kind": "ServiceAccount", "name": "agg", "namespace": "ops"}]}),
    )
    .await;

    let lister = client_with_token(&c, &service_account_token(&admin, "ops", "lister").await).await;
    Api::<ConfigMap>::namespaced(lister.clone(), "a")
        .list(&ListParams::default())
        .await
        .unwrap();
    Api::<ConfigMap>::all(lister.clone())
        .list(&ListParams::default())
        .await
        .unwrap();
    let (code, message) = refusal(
        Api::<Namespace>::all(lister.clone())
            .list(&ListParams::default())
            .await
            .unwrap_err(),
    );
    assert_eq!(code, 403);
    assert!(
        message.ends_with(
            "cannot list resource \"namespaces\" in API group \"\" at the cluster scope"
        ),
        "{message}"
    );

    let agg = client_with_token(&c, &service_account_token(&admin, "ops", "agg").await).await;
    let agg_cms: Api<ConfigMap> = Api::namespaced(agg.clone(), "a");
    assert_eq!(
        refusal(agg_cms.list(&ListParams::default()).await.unwrap_err()).0,
        403
    );
    create(
        &admin,
        RBAC,
        "ClusterRole",
        "clusterroles",
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": {"name": "cm-part", "labels": {"example.com/aggregate-to-gathered": "true"}},
        "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["list"]}]}),
    )
    .await;
    agg_cms.list(&ListParams::default()).await.unwrap();
    c.shutdown().await;
}

#[tokio::test]
async fn token_review_and_subject_access_review_answer_from_tokens_and_rbac() {
    let c = rbac_cluster().await;
    let admin = c.client().await;
    namespace(&admin, "ops").await;
    create(
        &admin,
        RBAC,
        "ClusterRole",
        "clusterroles",
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": {"name": "metrics-reader"},
        "rules": [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]}),
    )
    .await;
    create(
        &admin,
        RBAC,
        "ClusterRoleBinding",
        "clusterrolebindings",
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
        "metadata": {"name": "scraper"},
        "roleRef": {"apiGroup": RBAC, "kind": "ClusterRole", "name": "metrics-reader"},
        "subjects": [{"kind": "ServiceAccount", "name": "prometheus", "namespace": "ops"}]}),
    )
    .await;
    let token = service_account_token(&admin, "ops", "prometheus").await;
    let admin_token = c
        .kubeconfig_yaml()
        .lines()
        .find_map(|l| l.trim().strip_prefix("token: ").map(str::to_string))
        .unwrap();
    let bearer = format!("Bearer {admin_token}");
    let post = |path: &'static str, body: Value| {
        let url = c.url();
        let bearer = bearer.clone();
        async move {
            raw(
                &url,
                "POST",
                path,
                &[
                    ("Authorization", &bearer),
                    ("Content-Type", "application/json"),
                ],
                body.to_string(),
            )
            .await
        }
    };
    let review = post(
        "/apis/authentication.k8s.io/v1/tokenreviews",
        json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {"token": token}}),
    )
    .await;
    assert_eq!(review.code, 201, "{}", review.body);
    let status = &review.json()["status"];
    assert_eq!(status["authenticated"], json!(true));
    assert_eq!(
        status["user"]["username"],
        json!("system:serviceaccount:ops:prometheus")
    );
    let unknown = post(
        "/apis/authentication.k8s.io/v1/tokenreviews",
        json!({"spec": {"token": "made-up"}}),
    )
    .await;
    assert_eq!(unknown.json()["status"]["authenticated"], json!(false));

    let sar = |user: &str, path: &str| {
        json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
            "spec": {"user": user, "groups": ["system:serviceaccounts", "system:authenticated"],
                     "nonResourceAttributes": {"path": path, "verb": "get"}}})
    };
    let allowed = post(
        "/apis/authorization.k8s.io/v1/subjectaccessreviews",
        sar("system:serviceaccount:ops:prometheus", "/metrics"),
    )
    .await;
    assert_eq!(
        allowed.json()["status"]["allowed"],
        json!(true),
        "{}",
        allowed.body
    );
    let refused = post(
        "/apis/authorization.k8s.io/v1/subjectaccessreviews",
        sar("system:serviceaccount:ops:someone", "/metrics"),
    )
    .await;
    assert_eq!(refused.json()["status"]["allowed"], json!(false));
    let invalid = post(
        "/apis/authorization.k8s.io/v1/subjectaccessreviews",
        json!({"spec": {"nonResourceAttributes": {"path": "/metrics", "verb": "get"}}}),
    )
    .await;
    assert_eq!(invalid.code, 422, "{}", invalid.body);
    // the reviews are create-only and need their own permission
    let listed = raw(
        &c.url(),
        "GET",
        "/apis/authorization.k8s.io/v1/subjectaccessreviews",
        &[("Authorization", &bearer)],
        "",
    )
    .await;
    assert_eq!(listed.code, 405);
    let sneaky = raw(
        &c.url(),
        "POST",
        "/apis/authentication.k8s.io/v1/tokenreviews",
        &[
            ("Authorization", &format!("Bearer {token}")),
            ("Content-Type", "application/json"),
        ],
        json!({"spec": {"token": token}}).to_string(),
    )
    .await;
    assert_eq!(sneaky.code, 403, "{}", sneaky.body);
    c.shutdown().await;
}

#[tokio::test]
async fn impersonation_needs_the_impersonate_verb_and_rules_reviews_list_the_grants() {
    let c = rbac_cluster().await;
    let admin = c.client().await;
    namespace(&admin, "team").await;
    create(
        &admin,
        RBAC,
        "Role",
        "roles",
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
        "metadata": {"name": "cm-reader", "namespace": "team"},
        "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list"]}]}),
    )
    .await;
    create(
        &admin,
        RBAC,
        "RoleBinding",
        "rolebindings",
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
        "metadata": {"name": "app-reads", "namespace": "team"},
        "roleRef": {"apiGroup": RBAC, "kind": "Role", "name": "cm-reader"},
        "subjects": [{"kind": "ServiceAccount", "name": "app", "namespace": "team"}]}),
    )
    .await;
    let app_token = service_account_token(&admin, "team", "app").await;
    let helper_token = service_account_token(&admin, "team", "helper").await;
    let as_app = [("Impersonate-User", "system:serviceaccount:team:app")];
    let bearer = |token: &str| format!("Bearer {token}");

    // the administrator may impersonate anyone: the request acts as the ServiceAccount
    let admin_token = cinder_kubeconfig_token(&c);
    let auth = bearer(&admin_token);
    let listed = raw(
        &c.url(),
        "GET",
        "/api/v1/namespaces/team/configmaps",
        &[("Authorization", auth.as_str()), as_app[0]],
        "",
    )
    .await;
    assert_eq!(listed.code, 200, "{}", listed.body);
    let refused = raw(
        &c.url(),
        "GET",
        "/api/v1/namespaces/team/secrets",
        &[("Authorization", auth.as_str()), as_app[0]],
        "",
    )
    .await;
    assert_eq!(refused.code, 403);
    assert!(
        refused.body.contains(
            "User \\\"system:serviceaccount:team:app\\\" cannot list resource \\\"secrets\\\""
        ),
        "{}",
        refused.body
    );

    // a ServiceAccount without the impersonate verb is refused, naming what it asked
    let helper = bearer(&helper_token);
    let refused = raw(
        &c.url(),
        "GET",
        "/api/v1/namespaces/team/configmaps",
        &[("Authorization", helper.as_str()), as_app[0]],
        "",
    )
    .await;
    assert_eq!(refused.code, 403, "{}", refused.body);
    assert_eq!(
        refused.json()["message"],
        "serviceaccounts \"app\" is forbidden: User \"system:serviceaccount:team:helper\" cannot impersonate resource \"serviceaccounts\" in API group \"\" in the namespace \"team\""
    );
    let groups_only = raw(
        &c.url(),
        "GET",
        "/api/v1/namespaces/team/configmaps",
        &[
            ("Authorization", helper.as_str()),
            ("Impersonate-Group", "x"),
        ],
        "",
    )
    .await;
    assert_eq!(groups_only.code, 400, "{}", groups_only.body);
    create(&admin, RBAC, "ClusterRole", "clusterroles", json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": {"name": "impersonator"},
        "rules": [{"apiGroups": [""], "resources": ["serviceaccounts"], "verbs": ["impersonate"]}]})).await;
    create(
        &admin,
        RBAC,
        "RoleBinding",
        "rolebindings",
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
        "metadata": {"name": "helper-impersonates", "namespace": "team"},
        "roleRef": {"apiGroup": RBAC, "kind": "ClusterRole", "name": "impersonator"},
        "subjects": [{"kind": "ServiceAccount", "name": "helper", "namespace": "team"}]}),
    )
    .await;
    let allowed = raw(
        &c.url(),
        "GET",
        "/api/v1/namespaces/team/configmaps",
        &[("Authorization", helper.as_str()), as_app[0]],
        "",
    )
    .await;
    assert_eq!(allowed.code, 200, "{}", allowed.body);

    // SelfSubjectRulesReview: the app's own rules in its namespace
    let review = json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectRulesReview",
                        "spec": {"namespace": "team"}});
    let app = bearer(&app_token);
    let answer = raw(
        &c.url(),
        "POST",
        "/apis/authorization.k8s.io/v1/selfsubjectrulesreviews",
        &[
            ("Authorization", app.as_str()),
            ("Content-Type", "application/json"),
        ],
        review.to_string(),
    )
    .await;
    assert_eq!(answer.code, 201, "{}", answer.body);
    let status = &answer.json()["status"];
    let rules = status["resourceRules"].as_array().unwrap();
    assert!(
        rules.contains(
            &json!({"verbs": ["get", "list"], "apiGroups": [""], "resources": ["configmaps"]})
        ),
        "{status}"
    );
    assert!(!rules.iter().any(|r| r["resources"] == json!(["secrets"])));
    assert_eq!(status["incomplete"], false);
    c.shutdown().await;
}

/// The administrator's token, from the kubeconfig the simulator wrote.
fn cinder_kubeconfig_token(c: &EmbeddedCluster) -> String {
    let text = std::fs::read_to_string(c.kubeconfig_path()).unwrap();
    text.lines()
        .find_map(|l| l.trim().strip_prefix("token:"))
        .map(|t| t.trim().trim_matches('"').to_owned())
        .unwrap()
}
