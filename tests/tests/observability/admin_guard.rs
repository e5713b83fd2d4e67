//! The admin endpoint cannot leak or be reached by accident: it refuses a non-loopback address
//! without --admin-auth; with it, only callers whose token the API server's TokenReview accepts
//! and whom RBAC allows the verb `admin` on `/admin` get in (401 without a token, 403 without the
//! permission); and every value of the HTML views is escaped, shown here with a Cinder and a
//! backend whose names, a label and a condition message carry markup.

use cinder_e2e::deploy_helpers::*;
use cinder_e2e::observability_helpers::raw_get;
use cinder_e2e::*;
use cinder_operator::crd::{Cinder, CinderBackend};
use cinder_operator::http::access::{ADMIN_PATH, ADMIN_VERB, AccessReviewer};
use cinder_operator::http::{
    AdminSources, Binds, Endpoints, Inventory, InventorySource, MetricsEndpoint, Security,
};
use cinder_operator::metrics::Metrics;
use std::sync::Arc;

const MARKUP: &str = "<script>alert(1)</script>";
/// A label value with markup: the Cinder's page shows its labels.
const LABEL_MARKUP: &str = "<em onmouseover=alert(3)>label</em>";

fn binds(admin: &str) -> Binds {
    Binds {
        metrics: "127.0.0.1:0".into(),
        probes: "127.0.0.1:0".into(),
        admin: admin.into(),
    }
}

fn endpoints(
    op: &DeployedOperator,
    admin_bind: &str,
    security: &Security,
    admin: AdminSources,
) -> Result<Endpoints, cinder_operator::http::BindError> {
    let (registry, metrics) = Metrics::new_registry();
    Endpoints::start_secured(
        &binds(admin_bind),
        security,
        MetricsEndpoint::new(registry, Arc::new(metrics), None),
        cinder_operator::cmd_run::readiness(&op.ctx),
        admin,
    )
}

/// `curl -s` of `http://addr/path` with an optional bearer token: the status and body.
async fn get(addr: &str, path: &str, token: Option<&str>) -> (u16, String) {
    let mut cmd = tokio::process::Command::new("curl");
    cmd.args(["-s", "--max-time", "30", "-w", "\n%{http_code}"]);
    if let Some(token) = token {
        cmd.arg("-H").arg(format!("Authorization: Bearer {token}"));
    }
    let out = cmd
        .arg(format!("http://{addr}{path}"))
        .output()
        .await
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let (body, code) = text.rsplit_once('\n').unwrap();
    (code.trim().parse().unwrap(), body.to_string())
}

/// Creates ServiceAccount `name` in [`NS`] bound to ClusterRole `role`; answers its token.
async fn bound_account(op: &DeployedOperator, name: &str, role: &str) -> String {
    let yaml = format!(
        "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\nmetadata: {{name: {name}}}\nroleRef: {{apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: {role}}}\nsubjects: [{{kind: ServiceAccount, name: {name}, namespace: {NS}}}]\n"
    );
    let manifests =
        cinder_operator::embedded::parse_stream(std::path::Path::new("binding.yaml"), &yaml)
            .unwrap();
    apply_service_account(&op.client, &manifests, NS, name)
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_admin_endpoint_needs_loopback_or_a_reviewed_token() {
    let op = DeployedOperator::start_with(DeploySetup {
        under_rbac: true,
        ..DeploySetup::default()
    })
    .await
    .unwrap();
    let sources = cinder_operator::cmd_run::admin_sources(&op.ctx);
    let refused = endpoints(&op, "0.0.0.0:0", &Security::default(), sources.clone())
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(
        refused.contains("non-loopback") && refused.contains("--admin-auth"),
        "{refused:?}"
    );

    let security = Security {
        metrics: None,
        admin: Some(AccessReviewer::new(
            op.ctx.client.clone(),
            ADMIN_PATH,
            ADMIN_VERB,
        )),
    };
    let guarded = endpoints(&op, "0.0.0.0:0", &security, sources).unwrap();
    let addr = format!("127.0.0.1:{}", guarded.admin_addr.port());
    let (code, body) = get(&addr, "/actors", None).await;
    assert_eq!(code, 401, "{body}");
    let reader = bound_account(&op, "metrics-only", "cinder-operator-metrics-reader").await;
    let (code, body) = get(&addr, "/actors", Some(&reader)).await;
    assert_eq!(code, 403, "{body}");
    assert!(body.contains("cannot admin path \"/admin\""), "{body}");
    let viewer = bound_account(&op, "admin-viewer", "cinder-operator-admin-viewer").await;
    let (code, body) = get(&addr, "/actors", Some(&viewer)).await;
    assert_eq!(code, 200, "{body}");
    let (code, body) = get(&addr, "/", Some(&viewer)).await;
    assert_eq!(code, 200, "{body}");
    guarded.stop().await;
    op.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_value_in_the_html_views_is_escaped() {
    let op = DeployedOperator::start().await.unwrap();
    let mut cinder = cinder_json(MARKUP, serde_json::json!({}));
    cinder["metadata"]["namespace"] = serde_json::json!("ns\"><img src=x onerror=alert(2)>");
    cinder["metadata"]["labels"] = serde_json::json!({"x": LABEL_MARKUP});
    cinder["status"] = serde_json::json!({"conditions": [{"type": "Ready", "status": "False",
        "reason": "<b>Reason</b>", "message": MARKUP, "lastTransitionTime": "2026-01-01T00:00:00Z"}]});
    let cinder: Cinder = serde_json::from_value(cinder).unwrap();
    let backend: CinderBackend = serde_json::from_value(serde_json::json!({
        "apiVersion": "cinder.openstack.c5c3.io/v1alpha1", "kind": "CinderBackend",
        "metadata": {"name": "<i>backend</i>", "namespace": "ns\"><img src=x onerror=alert(2)>"},
        "spec": {"cinderRef": {"name": MARKUP}, "type": "NFS",
                 "nfs": {"server": "<u>nfs</u>", "path": "/exports/cinder"}}
    }))
    .unwrap();
    let inventory: InventorySource = Arc::new(move || {
        let inventory = Inventory {
            cinders: vec![cinder.clone()],
            backends: vec![backend.clone()],
        };
        Box::pin(async move { Ok(inventory) })
    });
    let sources = AdminSources {
        inventory,
        ..cinder_operator::cmd_run::admin_sources(&op.ctx)
    };
    let plain = endpoints(&op, "127.0.0.1:0", &Security::default(), sources).unwrap();
    let addr = plain.admin_addr.to_string();
    let ns = "ns%22%3E%3Cimg%20src%3Dx%20onerror%3Dalert%282%29%3E";
    let name = "%3Cscript%3Ealert%281%29%3C%2Fscript%3E";
    for path in ["/".to_string(), format!("/ui/cinders/{ns}/{name}")] {
        let page = tokio::task::spawn_blocking({
            let addr = addr.clone();
            let path = path.clone();
            move || raw_get(&addr, &path)
        })
        .await
        .unwrap()
        .unwrap();
        assert_eq!(page.status, 200, "{path}: {}", page.body);
        for raw in [MARKUP, "<img", "<b>Reason", "<i>backend", "<em"] {
            assert!(!page.body.contains(raw), "{path} carries {raw:?} unescaped");
        }
        if path.starts_with("/ui/cinders/") {
            assert!(
                page.body
                    .contains("x=&lt;em onmouseover=alert(3)&gt;label&lt;/em&gt;"),
                "{path} shows the label escaped: {}",
                page.body
            );
        }
        assert!(
            page.body.contains("&lt;script&gt;alert(1)&lt;/script&gt;"),
            "{path}: {}",
            page.body
        );
    }
    plain.stop().await;
    op.stop().await.unwrap();
}
