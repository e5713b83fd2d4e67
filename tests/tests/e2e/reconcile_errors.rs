//! Errors outside the steps are visible: with the API server refusing the operator's patches of
//! Cinders, a failing finalizer add and then a failing status write are each logged at WARN
//! with the Cinder's name, counted in `cinder_operator_controller_errors_total{phase}` (every
//! phase at zero from start-up) and, once they persist, shown as a ReconcileFailed Warning Event.

use cinder_e2e::database_helpers::cinder_events;
use cinder_e2e::*;
use cinder_operator::crd::Cinder;
use cinder_operator::metrics::{ErrorPhase, ErrorPhaseLabels};
use cinder_sim::faults::ErrorRule;
use kube::Api;

const AGENT: &str = "cinder-operator-errors";

/// `cinder_operator_controller_errors_total{phase}` of the harness's operator (`None`: the series
/// does not exist).
fn errors(h: &Harness, phase: ErrorPhase) -> Option<u64> {
    h.ctx
        .metrics
        .controller_errors
        .get(&ErrorPhaseLabels { phase })
        .map(|c| c.get())
}

fn warned(h: &Harness, cinder: &str, phase: &str) -> bool {
    h.logs.text().lines().any(|l| {
        l.contains("WARN")
            && l.contains("reconcile failed")
            && l.contains(&format!("cinder={cinder}"))
            && l.contains(&format!("phase={phase}"))
    })
}

fn refuse_cinder_patches(h: &Harness) {
    let mut rule = ErrorRule::always(Some("patch"), Some("cinders"), 500);
    rule.user_agent = Some(AGENT.to_string());
    h.cluster.faults().add_error_rule(rule);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_finalizer_add_and_status_write_are_logged_counted_and_shown() {
    let h = Harness::start_with(HarnessConfig {
        operator_user_agent: Some(AGENT.to_string()),
        ..Default::default()
    })
    .await
    .unwrap();
    for phase in ErrorPhase::ALL {
        assert_eq!(errors(&h, phase), Some(0), "{phase} at zero from start-up");
    }

    // The finalizer add fails.
    refuse_cinder_patches(&h);
    create_cinder(&h.client, "errs", serde_json::json!({}))
        .await
        .unwrap();
    eventually("finalizer_add errors counted", || async {
        (errors(&h, ErrorPhase::FinalizerAdd) >= Some(1)).then_some(())
    })
    .await
    .unwrap();
    eventually("a WARN line naming the Cinder and the phase", || async {
        warned(&h, "errs", "finalizer_add").then_some(())
    })
    .await
    .unwrap();
    let event = eventually("a ReconcileFailed Warning on the Cinder", || async {
        cinder_events(&h.client, "errs", "ReconcileFailed")
            .await
            .into_iter()
            .next()
    })
    .await
    .unwrap();
    assert_eq!(event.type_.as_deref(), Some("Warning"));
    let note = event.note.unwrap_or_default();
    assert!(note.contains("finalizer_add"), "{note}");

    // The finalizer goes on; then the status write fails.
    h.cluster.faults().clear();
    let api: Api<Cinder> = h.api();
    eventually("the finalizer added", || async {
        let c = api.get("errs").await.ok()?;
        (!c.metadata.finalizers.unwrap_or_default().is_empty()).then_some(())
    })
    .await
    .unwrap();
    refuse_cinder_patches(&h);
    // A spec edit brings a pass at once, whose status differs from the stored one.
    let patch = serde_json::json!({"spec": {"region": "elsewhere"}});
    let _ = api
        .patch(
            "errs",
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(&patch),
        )
        .await;
    eventually("status_write errors counted", || async {
        (errors(&h, ErrorPhase::StatusWrite) >= Some(1)).then_some(())
    })
    .await
    .unwrap();
    eventually("a WARN line naming the Cinder and the phase", || async {
        warned(&h, "errs", "status_write").then_some(())
    })
    .await
    .unwrap();
    h.cluster.faults().clear();
    h.stop().await.unwrap();
}
