//! The write record: with `record_writes` every mutating request is kept with its user agent,
//! status and the Leases read before and after it was served (reads are not kept); without it
//! nothing is kept.

use crate::common::raw;
use cinder_sim::controllers::ControllersConfig;
use cinder_sim::{ClusterConfig, EmbeddedCluster};
use serde_json::json;

async fn cluster(record_writes: bool) -> EmbeddedCluster {
    EmbeddedCluster::start(ClusterConfig {
        controllers: ControllersConfig::all_off(),
        record_writes,
        ..ClusterConfig::default()
    })
    .await
    .unwrap()
}

const LEASES: &str = "/apis/coordination.k8s.io/v1/namespaces/default/leases";
const CONFIGMAPS: &str = "/api/v1/namespaces/default/configmaps";

fn lease_body(holder: &str) -> String {
    let now = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Micros, true);
    json!({
        "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": "dev"},
        "spec": {"holderIdentity": holder, "leaseDurationSeconds": 30, "renewTime": now, "acquireTime": now}
    })
    .to_string()
}

async fn send(c: &EmbeddedCluster, method: &str, path: &str, agent: &str, body: &str) -> u16 {
    let ct = if method == "PATCH" {
        "application/merge-patch+json"
    } else {
        "application/json"
    };
    raw(
        &c.url(),
        method,
        path,
        &[("User-Agent", agent), ("Content-Type", ct)],
        body,
    )
    .await
    .code
}

#[tokio::test]
async fn writes_carry_the_agent_and_the_leases_before_and_after() {
    let c = cluster(true).await;
    assert_eq!(
        send(&c, "POST", LEASES, "op-a", &lease_body("a")).await,
        201
    );
    let cm = json!({"metadata": {"name": "one"}}).to_string();
    assert_eq!(send(&c, "POST", CONFIGMAPS, "op-a", &cm).await, 201);
    assert_eq!(
        send(&c, "GET", &format!("{CONFIGMAPS}/one"), "op-a", "").await,
        200
    );
    // The Lease passes to b; b's patch of the ConfigMap sees b before and after.
    let to_b = json!({"spec": {"holderIdentity": "b"}}).to_string();
    assert_eq!(
        send(&c, "PATCH", &format!("{LEASES}/dev"), "op-b", &to_b).await,
        200
    );
    let patch = json!({"data": {"k": "v"}}).to_string();
    let path = format!("{CONFIGMAPS}/one");
    assert_eq!(send(&c, "PATCH", &path, "op-b", &patch).await, 200);
    assert_eq!(
        send(&c, "DELETE", &format!("{CONFIGMAPS}/none"), "op-b", "").await,
        404
    );

    // The fixture CRDs the cluster installed at start (no user agent) are writes too.
    let all = c.writes();
    assert!(
        all.iter()
            .any(|w| w.resource == "customresourcedefinitions" && w.user_agent.is_empty())
    );
    let writes: Vec<_> = all
        .into_iter()
        .filter(|w| w.user_agent.starts_with("op-"))
        .collect();
    let seen: Vec<_> = writes
        .iter()
        .map(|w| {
            (
                w.verb.as_str(),
                w.resource.as_str(),
                w.name.as_str(),
                w.user_agent.as_str(),
                w.status,
            )
        })
        .collect();
    assert_eq!(
        seen,
        [
            ("create", "leases", "dev", "op-a", 201),
            ("create", "configmaps", "one", "op-a", 201),
            ("patch", "leases", "dev", "op-b", 200),
            ("patch", "configmaps", "one", "op-b", 200),
            ("delete", "configmaps", "none", "op-b", 404),
        ]
    );
    // The Lease create: absent before, held by a after.
    assert_eq!(writes[0].before.lease("default", "dev"), None);
    assert_eq!(writes[0].after.holder("default", "dev"), Some("a"));
    assert_eq!(writes[1].before.holder("default", "dev"), Some("a"));
    assert_eq!(writes[1].after.holder("default", "dev"), Some("a"));
    assert_eq!(writes[2].before.holder("default", "dev"), Some("a"));
    assert_eq!(writes[2].after.holder("default", "dev"), Some("b"));
    assert_eq!(writes[3].before.holder("default", "dev"), Some("b"));
    assert!(writes[3].succeeded() && !writes[4].succeeded());
    // The snapshots follow the store's resourceVersion.
    for w in &writes {
        assert!(w.before.resource_version <= w.after.resource_version);
        assert!(w.before.time <= w.after.time);
    }
    assert!(writes[1].after.resource_version > writes[1].before.resource_version);
    assert_eq!(
        writes[4].after.resource_version,
        writes[4].before.resource_version
    );
    c.shutdown().await;
}

#[tokio::test]
async fn without_record_writes_nothing_is_kept() {
    let c = cluster(false).await;
    assert_eq!(
        send(&c, "POST", LEASES, "op-a", &lease_body("a")).await,
        201
    );
    assert!(c.writes().is_empty());
    assert!(c.requests().iter().any(|r| r.user_agent == "op-a"));
    assert!(!c.requests().is_empty());
    c.shutdown().await;
}
