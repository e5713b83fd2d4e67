//! The operator under the RBAC of deploy/, enforced: the embedded cluster authorizes every
//! request with its RBAC objects, deploy/'s Namespace, ServiceAccount, ClusterRoles, Roles and
//! bindings are applied, and the operator runs with a token of deploy/'s ServiceAccount through
//! the happy path (a Cinder with an NFS backend to Ready), an upgrade, a detach and the
//! Cinder's deletion; any request refused with 403 fails the test by name. Its `/metrics` is
//! served over HTTPS to callers allowed `get` on `/metrics` only. With one verb removed from the
//! ClusterRole, the operator names the missing verb and resource in the Cinder's conditions.
//!
//! The other way round, every verb on every resource deploy/'s rules grant is one the operator
//! issued in that run, or one of [`NOT_WALKED`]: grants the run does not exercise, each naming
//! the source file that issues it and a string that file holds at the call (checked), so a
//! grant outlives its code only as long as the call does.

use cinder_e2e::database_helpers::*;
use cinder_e2e::deploy_helpers::*;
use cinder_e2e::*;
use cinder_operator::crd::{Cinder, CinderBackend};
use std::collections::BTreeSet;
use std::time::Duration;

/// The requests of the operator's client the API server refused.
fn refused(op: &DeployedOperator) -> BTreeSet<String> {
    op.operator_refusals().into_iter().collect()
}

/// `(group, resource, verb)` of deploy/'s grants the happy path, the upgrade, the detach and
/// the deletion do not issue, with the file that does and a string it holds at that call.
const NOT_WALKED: &[(&str, &str, &str, &str, &str)] = &[
    // The API's health check through the Service proxy (issue 33 replaces it; the rule goes
    // with it).
    (
        "",
        "services/proxy",
        "get",
        "operator/src/steps/health_check.rs",
        "/proxy/healthcheck",
    ),
    // The Unhealthy events of a workload's running pods that are not ready (their readiness
    // check failed: on real Cinder, a service Cinder records as down); simulated pods are ready.
    (
        "",
        "events",
        "list",
        "operator/src/workloads/readiness.rs",
        "reason=Unhealthy",
    ),
    // A changed config renders a new ConfigMap; the old ones are swept.
    (
        "",
        "configmaps",
        "delete",
        "operator/src/steps/config.rs",
        "use crate::kube_ext::sweep;",
    ),
    // The termination message of a failed Job's pod.
    (
        "",
        "pods",
        "get",
        "operator/src/steps/database/jobs.rs",
        "Api<Pod>",
    ),
    // A database Job whose image, release or database changed is replaced, and an aborted
    // upgrade's phase Jobs are deleted; the upgrade's own Jobs replace none (the steady state's
    // db-sync is not run again after a completed contract).
    (
        "batch",
        "jobs",
        "delete",
        "operator/src/steps/database/jobs.rs",
        "delete_background(&api, names)",
    ),
    // A rotated credential replaces the derived Secret.
    (
        "",
        "secrets",
        "update",
        "operator/src/children/create.rs",
        "replace_unless_changed(&api, &name, &replacement)",
    ),
    // A changed Service or PodDisruptionBudget spec replaces it; a changed purge schedule the
    // CronJob.
    (
        "",
        "services",
        "update",
        "operator/src/steps/deployment.rs",
        "Some(_) => {",
    ),
    (
        "policy",
        "poddisruptionbudgets",
        "update",
        "operator/src/steps/deployment.rs",
        "PodDisruptionBudget",
    ),
    (
        "batch",
        "cronjobs",
        "update",
        "operator/src/steps/db_purge.rs",
        "replace_unless_changed(&api, &name, &replacement)",
    ),
    // The optional children: applied when the spec asks for them, deleted when it stops.
    (
        "autoscaling",
        "horizontalpodautoscalers",
        "create",
        "operator/src/steps/hpa.rs",
        "apply(&api, &hpa_name, &desired)",
    ),
    (
        "autoscaling",
        "horizontalpodautoscalers",
        "patch",
        "operator/src/steps/hpa.rs",
        "apply(&api, &hpa_name, &desired)",
    ),
    (
        "autoscaling",
        "horizontalpodautoscalers",
        "delete",
        "operator/src/steps/hpa.rs",
        "is deleted",
    ),
    (
        "autoscaling.k8s.io",
        "verticalpodautoscalers",
        "create",
        "operator/src/steps/vpa.rs",
        "apply(&api, &vpa_name, &vpa)",
    ),
    (
        "autoscaling.k8s.io",
        "verticalpodautoscalers",
        "patch",
        "operator/src/steps/vpa.rs",
        "apply(&api, &vpa_name, &vpa)",
    ),
    (
        "autoscaling.k8s.io",
        "verticalpodautoscalers",
        "delete",
        "operator/src/steps/vpa.rs",
        "every VPA of the Cinder is deleted",
    ),
    (
        "gateway.networking.k8s.io",
        "httproutes",
        "create",
        "operator/src/steps/http_route.rs",
        "apply(&api, &route_name, &desired)",
    ),
    (
        "gateway.networking.k8s.io",
        "httproutes",
        "patch",
        "operator/src/steps/http_route.rs",
        "apply(&api, &route_name, &desired)",
    ),
    (
        "gateway.networking.k8s.io",
        "httproutes",
        "delete",
        "operator/src/steps/http_route.rs",
        "Not wanted: delete it",
    ),
    (
        "networking.k8s.io",
        "networkpolicies",
        "create",
        "operator/src/steps/network_policy.rs",
        "apply(&api, &np_name, &policy)",
    ),
    (
        "networking.k8s.io",
        "networkpolicies",
        "patch",
        "operator/src/steps/network_policy.rs",
        "apply(&api, &np_name, &policy)",
    ),
    (
        "networking.k8s.io",
        "networkpolicies",
        "delete",
        "operator/src/steps/network_policy.rs",
        "an existing policy is deleted",
    ),
    // A changed database spec is merged into the MariaDB Database, User and Grant.
    (
        "k8s.mariadb.com",
        "databases",
        "patch",
        "operator/src/steps/database/provisioning.rs",
        "Patch::Merge(&json!({ \"spec\": spec }))",
    ),
    (
        "k8s.mariadb.com",
        "users",
        "patch",
        "operator/src/steps/database/provisioning.rs",
        "Patch::Merge(&json!({ \"spec\": spec }))",
    ),
    (
        "k8s.mariadb.com",
        "grants",
        "patch",
        "operator/src/steps/database/provisioning.rs",
        "Patch::Merge(&json!({ \"spec\": spec }))",
    ),
    // CinderBackupBackends: the run has none; their controller reads, patches and finalizes
    // them as it does CinderBackends.
    (
        "cinder.openstack.c5c3.io",
        "cinderbackupbackends",
        "patch",
        "operator/src/controller/satellites/reconcile.rs",
        "finalizer::remove(api, obj, finalizer_name)",
    ),
    (
        "cinder.openstack.c5c3.io",
        "cinderbackupbackends/status",
        "patch",
        "operator/src/controller/satellites/reconcile.rs",
        "let api: Api<S> = Api::namespaced",
    ),
    // --shards: the membership Leases are listed each round and a replica deletes its own.
    (
        "coordination.k8s.io",
        "leases",
        "list",
        "operator/src/shards/holder.rs",
        "self.leases.list(&ListParams::default())",
    ),
    (
        "coordination.k8s.io",
        "leases",
        "delete",
        "operator/src/shards/holder.rs",
        "self.leases.delete(&member",
    ),
];

/// `(group, resource, verb)` of every grant of `rules` (cluster-wide and namespaced).
fn grants(rules: &RbacRules) -> BTreeSet<(String, String, String)> {
    rules
        .cluster
        .iter()
        .chain(rules.namespaced.iter().flat_map(|(_, r)| r.iter()))
        .flat_map(|rule| {
            let groups = rule.api_groups.clone().unwrap_or_default();
            let resources = rule.resources.clone().unwrap_or_default();
            let verbs = rule.verbs.clone();
            groups.into_iter().flat_map(move |g| {
                let verbs = verbs.clone();
                resources.clone().into_iter().flat_map(move |r| {
                    let g = g.clone();
                    verbs
                        .clone()
                        .into_iter()
                        .map(move |v| (g.clone(), r.clone(), v))
                })
            })
        })
        .collect()
}

/// The grants of deploy/'s rules that no request of `requests` used and [`NOT_WALKED`] does not
/// account for, one line each.
fn unused_grants(requests: &[cinder_sim::RequestRecord]) -> Vec<String> {
    let rules = RbacRules::for_service_account(
        &deploy_manifests().unwrap(),
        DEPLOY_ACCOUNT,
        DEPLOY_NAMESPACE,
    )
    .unwrap();
    let mut used: BTreeSet<(String, String, String)> = BTreeSet::new();
    for r in requests
        .iter()
        .filter(|r| r.status != 401 && r.status != 403 && !r.resource.is_empty())
    {
        let resource = if r.subresource.is_empty() {
            r.resource.clone()
        } else {
            format!("{}/{}", r.resource, r.subresource)
        };
        // A server-side apply that creates its object needs `create` as well as `patch`.
        if r.verb == "patch" && r.status == 201 {
            used.insert((r.group.clone(), resource.clone(), "create".to_string()));
        }
        // The cached reader GETs a watched kind until its watch has listed it once
        // (kube_ext/reader/stores.rs), a race the run may not hit.
        if r.verb == "watch" {
            used.insert((r.group.clone(), resource.clone(), "get".to_string()));
        }
        used.insert((r.group.clone(), resource, r.verb.clone()));
    }
    let root = repo_root();
    for (group, resource, verb, file, evidence) in NOT_WALKED {
        let text = std::fs::read_to_string(root.join(file)).unwrap_or_default();
        assert!(
            text.contains(evidence),
            "NOT_WALKED names {file} for {verb} {group}/{resource}, which does not hold {evidence:?}"
        );
    }
    grants(&rules)
        .into_iter()
        .filter(|g| !used.contains(g))
        .filter(|(g, r, v)| {
            !NOT_WALKED
                .iter()
                .any(|(ng, nr, nv, _, _)| ng == g && nr == r && nv == v)
        })
        .map(|(g, r, v)| format!("{v} {}/{r}", if g.is_empty() { "core" } else { &g }))
        .collect()
}

/// Creates ServiceAccount `name` in [`NS`], binds it to ClusterRole `role`, and answers a token.
async fn bound_account(op: &DeployedOperator, name: &str, role: &str) -> String {
    let binding = serde_json::json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
        "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
        "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": NS}]
    });
    let manifests = cinder_operator::embedded::parse_stream(
        std::path::Path::new("binding.yaml"),
        &serde_norway::to_string(&binding).unwrap(),
    )
    .unwrap();
    apply_service_account(&op.client, &manifests, NS, name)
        .await
        .unwrap()
}

async fn secure_metrics_admit_only_metrics_readers(op: &DeployedOperator) {
    let addr = op.endpoints.metrics_addr.to_string();
    let (code, body) = https_get(&addr, "/metrics", None).await.unwrap();
    assert_eq!(code, 401, "{body}");
    let (code, body) = https_get(&addr, "/metrics", Some("not-a-token"))
        .await
        .unwrap();
    assert_eq!(code, 401, "{body}");
    let stranger = bound_account(op, "stranger", "cinder-operator-admin-viewer").await;
    let (code, body) = https_get(&addr, "/metrics", Some(&stranger)).await.unwrap();
    assert_eq!(code, 403, "{body}");
    assert!(
        body.contains(&format!("system:serviceaccount:{NS}:stranger"))
            && body.contains("cannot get path \"/metrics\""),
        "{body}"
    );
    let reader = bound_account(op, "scraper", "cinder-operator-metrics-reader").await;
    let (code, body) = https_get(&addr, "/metrics", Some(&reader)).await.unwrap();
    assert_eq!(code, 200, "{body}");
    assert!(body.ends_with("# EOF\n"), "{body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_operator_runs_under_deploy_rbac_without_a_refusal() {
    let op = DeployedOperator::start_with(DeploySetup {
        under_rbac: true,
        metrics_secure: true,
        ..DeploySetup::default()
    })
    .await
    .unwrap();
    // every phase Job of the upgrade is quick
    for suffix in ["-db-expand", "-db-migrate", "-db-contract"] {
        job_rule(
            &op.cluster,
            suffix,
            cinder_sim::controllers::PodOutcome::success(),
            Duration::from_secs(1),
        )
        .unwrap();
    }
    database_environment(&op.client, "enforced").await.unwrap();
    create_cinder(
        &op.client,
        "enforced",
        serde_json::json!({"openStackRelease": "2025.2", "image": {"repository": "registry.example/cinder", "tag": "2025.2"}}),
    )
    .await
    .unwrap();
    create_nfs_backend(&op.client, "nfs1", "enforced")
        .await
        .unwrap();
    let happy = wait_cinder_condition(&op.client, "enforced", "Ready", "True", "AllReady").await;
    assert!(refused(&op).is_empty(), "refused: {:?}", refused(&op));
    happy.unwrap();

    secure_metrics_admit_only_metrics_readers(&op).await;

    set_release(&op.client, "enforced", "2026.1").await.unwrap();
    wait_status(&op.client, "enforced", "installedRelease 2026.1", |s| {
        s.installed_release.as_deref() == Some("2026.1") && s.upgrade_phase.is_none()
    })
    .await
    .unwrap();

    let backends: kube::Api<CinderBackend> = kube::Api::namespaced(op.client.clone(), NS);
    backends.delete("nfs1", &Default::default()).await.unwrap();
    eventually("the deleted backend is gone (detach)", || {
        let backends = backends.clone();
        async move { backends.get_opt("nfs1").await.ok()?.is_none().then_some(()) }
    })
    .await
    .unwrap();

    let cinders: kube::Api<Cinder> = kube::Api::namespaced(op.client.clone(), NS);
    cinders
        .delete("enforced", &Default::default())
        .await
        .unwrap();
    let deleted = eventually("the deleted Cinder is gone", || {
        let cinders = cinders.clone();
        async move {
            cinders
                .get_opt("enforced")
                .await
                .ok()?
                .is_none()
                .then_some(())
        }
    })
    .await;
    if deleted.is_err() {
        let left = cinders.get_opt("enforced").await.ok().flatten();
        panic!(
            "{deleted:?}; refused: {:?}; the Cinder: {:?}",
            refused(&op),
            left.map(|c| (c.metadata.finalizers, c.status))
        );
    }

    let refusals = refused(&op);
    let Some(embedded) = op.cluster.embedded() else {
        // A real control plane keeps no request record to hold deploy/'s grants against.
        println!("the unused-grant check needs the embedded cluster's request record: not run");
        op.stop().await.unwrap();
        assert!(
            refusals.is_empty(),
            "{} operator requests were refused under deploy/'s RBAC:\n{}",
            refusals.len(),
            refusals.into_iter().collect::<Vec<_>>().join("\n")
        );
        return;
    };
    let requests = op.operator_requests();
    let made = requests.len();
    let logged = embedded.requests().len();
    op.stop().await.unwrap();
    assert!(made > 0, "no request carried the operator's user agent");
    assert!(
        logged < HarnessConfig::default().cluster.request_log_capacity,
        "the request log filled up: the unused-grant check below would miss early requests"
    );
    let unused = unused_grants(&requests);
    assert!(
        unused.is_empty(),
        "{} grants of deploy/rbac were not used by the operator (remove them, or walk the path that \
         issues them, or list it in NOT_WALKED with the code that does):\n{}",
        unused.len(),
        unused.join("\n")
    );
    assert!(
        refusals.is_empty(),
        "{} kinds of operator requests were refused under deploy/'s RBAC:\n{}",
        refusals.len(),
        refusals.into_iter().collect::<Vec<_>>().join("\n")
    );
}

/// Removes `verb` on core `resource` from the operator's ClusterRole.
fn without(verb: &'static str, resource: &'static str) -> DeploySetup {
    without_in("", verb, resource)
}

/// Removes `verb` on `resource` of API group `group` from the operator's ClusterRole.
fn without_in(group: &'static str, verb: &'static str, resource: &'static str) -> DeploySetup {
    DeploySetup {
        under_rbac: true,
        edit_rbac: Some(Box::new(move |manifests| {
            for m in manifests.iter_mut().filter(|m| {
                m.gvk.kind == "ClusterRole"
                    && m.object.metadata.name.as_deref() == Some(DEPLOY_ACCOUNT)
            }) {
                let rules = m.object.data["rules"].as_array_mut().unwrap();
                for rule in rules.iter_mut().filter(|r| {
                    r["apiGroups"] == serde_json::json!([group])
                        && r["resources"]
                            .as_array()
                            .unwrap()
                            .iter()
                            .any(|x| x == resource)
                }) {
                    rule["verbs"].as_array_mut().unwrap().retain(|v| v != verb);
                }
            }
        })),
        ..DeploySetup::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_permission_is_named_in_the_conditions() {
    let op = DeployedOperator::start_with(without("create", "configmaps"))
        .await
        .unwrap();
    database_environment(&op.client, "missing").await.unwrap();
    create_cinder(&op.client, "missing", serde_json::json!({}))
        .await
        .unwrap();
    let wanted = "cannot create resource \"configmaps\" in API group \"\"";
    let named = eventually("a condition naming the missing permission", || {
        let client = op.client.clone();
        async move {
            let cinders: kube::Api<Cinder> = kube::Api::namespaced(client, NS);
            let status = cinders.get("missing").await.ok()?.status?;
            status
                .conditions
                .into_iter()
                .find(|c| c.message.contains(wanted))
        }
    })
    .await;
    let refusals = refused(&op);
    op.stop().await.unwrap();
    let condition = named.unwrap();
    assert_eq!(condition.status, "False");
    assert!(
        condition.message.contains(&format!(
            "User \"system:serviceaccount:{DEPLOY_NAMESPACE}:{DEPLOY_ACCOUNT}\""
        )),
        "{}",
        condition.message
    );
    // the refusals are that permission only
    assert!(
        !refusals.is_empty()
            && refusals
                .iter()
                .all(|r| r.starts_with("create core/v1 configmaps")),
        "{refusals:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_finalization_the_api_server_refuses_is_a_warning_event() {
    let op = DeployedOperator::start_with(without_in("k8s.mariadb.com", "delete", "databases"))
        .await
        .unwrap();
    database_environment(&op.client, "stuck").await.unwrap();
    create_cinder(&op.client, "stuck", serde_json::json!({}))
        .await
        .unwrap();
    let created = eventually("the Cinder's Database", || {
        let client = op.client.clone();
        async move { mariadb_object(&client, "Database", "stuck").await }
    })
    .await;
    let cinders: kube::Api<Cinder> = kube::Api::namespaced(op.client.clone(), NS);
    let deleted = cinders
        .delete("stuck", &kube::api::DeleteParams::default())
        .await;
    let warned = eventually("a FinalizationFailed event", || {
        let client = op.client.clone();
        async move {
            cinder_events(&client, "stuck", "FinalizationFailed")
                .await
                .into_iter()
                .next()
        }
    })
    .await;
    let still_there = cinders.get_opt("stuck").await;
    op.stop().await.unwrap();
    created.unwrap();
    deleted.unwrap();
    let event = warned.unwrap();
    assert_eq!(event.type_.as_deref(), Some("Warning"));
    let note = event.note.unwrap_or_default();
    assert!(
        note.contains("cannot delete resource \"databases\" in API group \"k8s.mariadb.com\""),
        "{note}"
    );
    // the finalizer holds the Cinder until the cleanup can run
    let cinder = still_there
        .unwrap()
        .expect("the Cinder stays while its cleanup fails");
    assert!(cinder.metadata.deletion_timestamp.is_some());
}
