//! What the operator keeps of an object goes with the object: a Cinder that leaves the cluster
//! without the finalizer's release (deleted before its finalizer was added, here because its
//! target cluster does not resolve) is dropped from the pipeline registry all the same, through
//! the index's Cinder departures. The other per-object maps have their own unit tests (step
//! memories, the index, device actors in `cinder-lease`); `soakbench` measures the whole.

use cinder_e2e::*;
use cinder_operator::crd::Cinder;

/// The names of the Cinders the `/pipelines` view lists.
async fn pipeline_names(h: &Harness) -> Vec<String> {
    let view = cinder_operator::pipeline::snapshot(&h.ctx.pipelines).await;
    view["pipelines"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|p| p["name"].as_str().map(str::to_string))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cinder_gone_without_its_finalizer_leaves_no_pipeline_behind() {
    let h = Harness::start().await.unwrap();
    create_cinder(
        &h.client,
        "stray",
        serde_json::json!({"targetClusterRef": {"name": "nowhere"}}),
    )
    .await
    .unwrap();
    eventually("the gate's pass is recorded", || async {
        pipeline_names(&h)
            .await
            .contains(&"stray".to_string())
            .then_some(())
    })
    .await
    .unwrap();
    let cinder = h.api::<Cinder>().get("stray").await.unwrap();
    assert!(
        cinder.metadata.finalizers.unwrap_or_default().is_empty(),
        "the gate stops before the finalizer is added"
    );
    h.api::<Cinder>()
        .delete("stray", &Default::default())
        .await
        .unwrap();
    eventually("the pipeline is forgotten", || async {
        pipeline_names(&h).await.is_empty().then_some(())
    })
    .await
    .unwrap();
    h.stop().await.unwrap();
}
