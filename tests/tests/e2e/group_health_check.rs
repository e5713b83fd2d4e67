//! The HealthCheck member end to end, probing `/healthcheck` of the API Service through the API
//! server's Service proxy: a failing endpoint gives CinderAPIReady=False/APIUnhealthy and is
//! probed again only after the 10 s retry interval (then APIHealthy once it passes); a passing
//! result is reused for 30 s, so several passes in that window send one probe. Probes are
//! counted in the simulator's request record.

use cinder_e2e::group_helpers::*;
use cinder_e2e::*;
use cinder_sim::ServiceFault;
use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failing_endpoint_is_unhealthy_and_retried_after_ten_seconds() {
    let h = Harness::start().await.unwrap();
    h.cluster.faults().set_service_fault(ServiceFault {
        namespace: NS.to_string(),
        name: "sick-api".to_string(),
        status: Some(500),
        delay: Duration::ZERO,
    });
    group_cinder(&h.client, "sick", serde_json::json!({}))
        .await
        .unwrap();
    let c = wait_cinder_condition(&h.client, "sick", "CinderAPIReady", "False", "APIUnhealthy")
        .await
        .unwrap();
    assert!(c.message.contains("500"), "{}", c.message);

    // The failure is retried (the step requeues after 10 s) but not before the failed result's
    // 10 s in the cache ran out, however many passes ran meanwhile.
    let failed = eventually("a retried probe", || async {
        let probes: Vec<_> = health_probes(&h.cluster, "sick")
            .into_iter()
            .filter(|r| r.status == 500)
            .collect();
        (probes.len() >= 3).then_some(probes)
    })
    .await
    .unwrap();
    for gap in gaps_seconds(&failed) {
        assert!(gap >= 9.5, "a failed probe was retried after {gap}s");
    }

    h.cluster.faults().clear_service_fault(NS, "sick-api");
    wait_cinder_condition(&h.client, "sick", "CinderAPIReady", "True", "APIHealthy")
        .await
        .unwrap();

    h.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_passing_probe_is_reused_for_thirty_seconds() {
    let h = Harness::start().await.unwrap();
    group_cinder(&h.client, "well", serde_json::json!({}))
        .await
        .unwrap();
    wait_cinder_condition(&h.client, "well", "CinderAPIReady", "True", "APIHealthy")
        .await
        .unwrap();

    // Provoke passes (each annotation change is a watch event the controller reconciles).
    let start = passes(&h, "well").await;
    for i in 0..5 {
        merge_patch_cinder(
            &h.client,
            "well",
            serde_json::json!({"metadata": {"annotations": {"test/poke": i.to_string()}}}),
        )
        .await
        .unwrap();
        let want = start + i + 1;
        eventually("another pass", || async {
            (passes(&h, "well").await >= want).then_some(())
        })
        .await
        .unwrap();
    }
    let healthy: Vec<_> = health_probes(&h.cluster, "well")
        .into_iter()
        .filter(|r| r.status == 200)
        .collect();
    assert!(!healthy.is_empty());
    let passed = passes(&h, "well").await - start;
    assert!(
        (healthy.len() as u64) < passed + 1,
        "{} probes for {passed} passes",
        healthy.len(),
    );
    for gap in gaps_seconds(&healthy) {
        assert!(gap >= 29.5, "a passing probe was repeated after {gap}s");
    }

    h.stop().await.unwrap();
}
