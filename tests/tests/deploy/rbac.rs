//! The RBAC rules of deploy/ (the ClusterRole and the Role bound to the operator's
//! ServiceAccount) cover every request the operator makes: it runs in-process against an
//! embedded cluster with its own user agent through the happy path (a Cinder with an NFS backend
//! up to Ready) and a detach (the backend deleted until it is gone), then each recorded request
//! of that user agent is checked against the rules; an uncovered request fails the test by name.
//! The rules also stay narrow: pods get and list only, events create and patch, no
//! `services/proxy` (the in-process operator here probes through the API server, as an operator
//! outside the cluster does with the grant of `--health-check-through-api-server`; its
//! `get services/proxy` requests are left out of the check).

use cinder_e2e::database_helpers::database_environment;
use cinder_e2e::deploy_helpers::*;
use cinder_e2e::*;
use cinder_operator::crd::CinderBackend;
use std::collections::BTreeSet;

const DEPLOY_NAMESPACE: &str = "cinder-system";

fn operator_rules() -> RbacRules {
    let manifests = deploy_manifests().unwrap();
    RbacRules::for_service_account(&manifests, "cinder-operator", DEPLOY_NAMESPACE).unwrap()
}

#[test]
fn the_rules_stay_least_privilege() {
    let rules = operator_rules();
    assert_eq!(rules.cluster_verbs("", "pods"), ["get", "list"]);
    // In a cluster the health check GETs the API Services itself: no proxy through the API
    // server.
    assert!(rules.cluster_verbs("", "services/proxy").is_empty());
    assert_eq!(
        rules.cluster_verbs("events.k8s.io", "events"),
        ["create", "patch"]
    );
    let all_verbs: Vec<&String> = rules
        .cluster
        .iter()
        .chain(rules.namespaced.iter().flat_map(|(_, r)| r.iter()))
        .flat_map(|r| r.verbs.iter())
        .collect();
    assert!(all_verbs.iter().all(|v| *v != "*"), "a wildcard verb");
    let leases: Vec<&String> = rules
        .namespaced
        .iter()
        .filter(|(ns, _)| ns == DEPLOY_NAMESPACE)
        .flat_map(|(_, r)| r.iter())
        .filter(|r| {
            r.resources
                .as_ref()
                .is_some_and(|x| x.iter().any(|x| x == "leases"))
        })
        .flat_map(|r| r.verbs.iter())
        .collect();
    assert!(
        !leases.is_empty(),
        "no Lease rule in the operator's namespace"
    );
    assert!(
        rules
            .cluster_verbs("coordination.k8s.io", "leases")
            .is_empty(),
        "Leases are granted cluster-wide"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_rules_cover_every_request_of_the_happy_path_and_a_detach() {
    let rules = operator_rules().relocated(DEPLOY_NAMESPACE, NS);
    let op = DeployedOperator::start().await.unwrap();
    database_environment(&op.client, "rbac").await.unwrap();
    create_cinder(&op.client, "rbac", serde_json::json!({}))
        .await
        .unwrap();
    create_nfs_backend(&op.client, "nfs1", "rbac")
        .await
        .unwrap();
    let happy = wait_cinder_condition(&op.client, "rbac", "Ready", "True", "AllReady").await;

    let backends: kube::Api<CinderBackend> = kube::Api::namespaced(op.client.clone(), NS);
    let detached = match backends.delete("nfs1", &Default::default()).await {
        Ok(_) => {
            eventually("the deleted backend is gone (detach)", || {
                let backends = backends.clone();
                async move { backends.get_opt("nfs1").await.ok()?.is_none().then_some(()) }
            })
            .await
        }
        Err(e) => Err(e.into()),
    };

    let requests = op.operator_requests();
    op.stop().await.unwrap();
    assert!(
        !requests.is_empty(),
        "no request carried the operator's user agent"
    );
    // This operator runs outside the cluster, so its health check goes through the API server
    // (the grant of --health-check-through-api-server), which deploy/rbac leaves out.
    let uncovered: BTreeSet<String> = requests
        .iter()
        .filter(|r| !(r.resource == "services" && r.subresource == "proxy" && r.verb == "get"))
        .filter(|r| !rules.allows(r))
        .map(describe_request)
        .collect();
    assert!(
        uncovered.is_empty(),
        "{} kinds of operator requests are not covered by deploy/rbac:\n{}",
        uncovered.len(),
        uncovered.into_iter().collect::<Vec<_>>().join("\n")
    );
    happy.unwrap();
    detached.unwrap();
}
