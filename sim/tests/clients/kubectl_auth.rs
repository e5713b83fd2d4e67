//! kubectl against a simulator enforcing RBAC: a ServiceAccount, a Role and a RoleBinding made
//! with `kubectl create`, a token from `kubectl create token`, `kubectl auth can-i` answering yes
//! and no for it, `kubectl auth can-i --list`, impersonation (`--as`, allowed for the
//! administrator, refused for the ServiceAccount), `kubectl auth whoami`, and a refused
//! `kubectl get` showing the real message.
//! Skipped (with a printed reason) when no kubectl is on PATH.

use crate::tools::cluster_and_kubectl_with;
use cinder_sim::ClusterConfig;
use cinder_sim::auth::AuthorizationMode;
use cinder_sim::controllers::ControllersConfig;

#[tokio::test]
async fn auth_can_i_answers_from_rbac() {
    let Some((c, k, _dir)) = cluster_and_kubectl_with(ClusterConfig {
        controllers: ControllersConfig::all_off(),
        authorization: AuthorizationMode::Rbac,
        ..ClusterConfig::default()
    })
    .await
    else {
        return;
    };
    k.ok(&["create", "namespace", "team"]).await;
    k.ok(&["create", "serviceaccount", "app", "-n", "team"])
        .await;
    k.ok(&[
        "create",
        "role",
        "cm-reader",
        "--verb=get,list",
        "--resource=configmaps",
        "-n",
        "team",
    ])
    .await;
    k.ok(&[
        "create",
        "rolebinding",
        "app",
        "--role=cm-reader",
        "--serviceaccount=team:app",
        "-n",
        "team",
    ])
    .await;
    let token = k.ok(&["create", "token", "app", "-n", "team"]).await;
    let token = format!("--token={}", token.trim());

    let yes = k
        .run(&["auth", "can-i", "list", "configmaps", "-n", "team", &token])
        .await;
    assert!(yes.ok, "{}", yes.stderr);
    assert_eq!(yes.stdout.trim(), "yes");
    let no = k
        .run(&[
            "auth",
            "can-i",
            "create",
            "configmaps",
            "-n",
            "team",
            &token,
        ])
        .await;
    assert!(!no.ok, "can-i answers no with exit status 1");
    assert_eq!(no.stdout.trim(), "no");
    let elsewhere = k
        .run(&[
            "auth",
            "can-i",
            "list",
            "configmaps",
            "-n",
            "default",
            &token,
        ])
        .await;
    assert_eq!(elsewhere.stdout.trim(), "no");
    // the rules the token holds in its namespace
    let list = k
        .ok(&["auth", "can-i", "--list", "-n", "team", &token])
        .await;
    assert!(
        list.lines()
            .any(|l| l.starts_with("configmaps ") && l.contains("[get list]")),
        "{list}"
    );
    assert!(!list.contains("secrets"), "{list}");
    // the administrator acting as the ServiceAccount (impersonation)
    let as_app = "--as=system:serviceaccount:team:app";
    let yes = k
        .run(&["auth", "can-i", "list", "configmaps", "-n", "team", as_app])
        .await;
    assert_eq!(yes.stdout.trim(), "yes", "{}", yes.stderr);
    let no = k
        .run(&["auth", "can-i", "create", "pods", "-n", "team", as_app])
        .await;
    assert_eq!(no.stdout.trim(), "no", "{}", no.stderr);
    // the ServiceAccount itself may not impersonate anyone
    let refused = k
        .run(&["get", "configmaps", "-n", "team", &token, "--as=jane"])
        .await;
    assert!(!refused.ok);
    assert!(
        refused.stderr.contains(
            "users \"jane\" is forbidden: User \"system:serviceaccount:team:app\" cannot impersonate resource \"users\" in API group \"\" at the cluster scope"
        ),
        "{}",
        refused.stderr
    );
    // the kubeconfig's administrator may do anything
    let admin = k.run(&["auth", "can-i", "delete", "nodes"]).await;
    assert_eq!(admin.stdout.trim(), "yes", "{}", admin.stderr);

    let whoami = k.run(&["auth", "whoami", &token]).await;
    assert!(
        whoami.stdout.contains("system:serviceaccount:team:app"),
        "{} {}",
        whoami.stdout,
        whoami.stderr
    );
    k.ok(&["get", "configmaps", "-n", "team", &token]).await;
    let refused = k.run(&["get", "secrets", "-n", "team", &token]).await;
    assert!(!refused.ok);
    assert!(
        refused.stderr.contains(
            "secrets is forbidden: User \"system:serviceaccount:team:app\" cannot list resource \"secrets\" in API group \"\" in the namespace \"team\""
        ),
        "{}",
        refused.stderr
    );
    c.shutdown().await;
}
