//! The trace of a pass, exported over OTLP/gRPC to an in-process receiver: a root span per pass
//! named for the Cinder (with its namespace and name as attributes), a child per step, below the
//! steps a child per Kubernetes API call (kube's `HTTP` spans, kind client) and per device or
//! lock wait; and the JSON log lines of that pass carry the Cinder, the step and the trace id.

use cinder_e2e::database_helpers::*;
use cinder_e2e::observability_helpers::{span_attr, test_telemetry};
use cinder_e2e::*;
use opentelemetry_proto::tonic::trace::v1::Span as OtlpSpan;
use opentelemetry_proto::tonic::trace::v1::span::SpanKind;
use std::collections::BTreeSet;

const PASS: &str = "reconcile cinder-e2e/traced";

/// One pass's tree: the root, its step children, and their children.
struct PassTree {
    trace_id: String,
    steps: BTreeSet<String>,
    api_calls: usize,
    waits: BTreeSet<String>,
}

fn children<'a>(spans: &'a [OtlpSpan], parent: &'a OtlpSpan) -> impl Iterator<Item = &'a OtlpSpan> {
    spans
        .iter()
        .filter(move |s| s.trace_id == parent.trace_id && s.parent_span_id == parent.span_id)
}

fn tree(spans: &[OtlpSpan], root: &OtlpSpan) -> PassTree {
    let mut t = PassTree {
        trace_id: hex::encode(&root.trace_id),
        steps: BTreeSet::new(),
        api_calls: 0,
        waits: BTreeSet::new(),
    };
    for step in children(spans, root) {
        t.steps.insert(step.name.clone());
        for call in children(spans, step) {
            if call.kind == SpanKind::Client as i32 && span_attr(call, "http.method").is_some() {
                t.api_calls += 1;
            }
            if call.name.starts_with("wait ") {
                t.waits.insert(call.name.clone());
            }
        }
    }
    t
}

/// What was received, for a failure message: span names with counts and each pass's tree.
fn summary(spans: &[OtlpSpan]) -> String {
    let mut names: std::collections::BTreeMap<&str, usize> = Default::default();
    for s in spans {
        *names.entry(s.name.as_str()).or_default() += 1;
    }
    let trees: Vec<String> = spans
        .iter()
        .filter(|s| s.name == PASS)
        .map(|r| {
            let t = tree(spans, r);
            format!(
                "root(parent {:?}): steps {:?}, {} API calls, waits {:?}",
                hex::encode(&r.parent_span_id),
                t.steps,
                t.api_calls,
                t.waits
            )
        })
        .collect();
    format!("{names:?}\n{}", trees.join("\n"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pass_is_one_span_tree_and_its_log_lines_carry_the_trace_id() {
    let telemetry = test_telemetry();
    let h = Harness::start().await.unwrap();
    database_environment(&h.client, "otlp").await.unwrap();
    create_cinder(&h.client, "traced", serde_json::json!({}))
        .await
        .unwrap();
    wait_cinder_condition(
        &h.client,
        "traced",
        "DatabaseReady",
        "True",
        "DatabaseSynced",
    )
    .await
    .unwrap();

    let trees = eventually(
        "passes of `traced` with steps, API calls and a wait",
        || async {
            telemetry.flush();
            let spans = telemetry.spans.all();
            let roots: Vec<&OtlpSpan> = spans
                .iter()
                .filter(|s| s.name == PASS && s.parent_span_id.is_empty())
                .collect();
            let trees: Vec<PassTree> = roots.iter().map(|r| tree(&spans, r)).collect();
            let waited = trees.iter().any(|t| !t.waits.is_empty());
            let called = trees
                .iter()
                .any(|t| t.api_calls > 0 && t.steps.contains("Secrets"));
            (waited && called).then_some(trees)
        },
    )
    .await
    .unwrap_or_else(|e| panic!("{e}; received: {}", summary(&telemetry.spans.all())));

    // Every root names its Cinder in its attributes.
    let spans = telemetry.spans.all();
    for root in spans.iter().filter(|s| s.name == PASS) {
        assert_eq!(span_attr(root, "cinder").as_deref(), Some("traced"));
        assert_eq!(span_attr(root, "namespace").as_deref(), Some(NS));
    }
    let full = trees
        .iter()
        .find(|t| t.api_calls > 0 && t.steps.contains("Secrets"))
        .unwrap();
    assert!(full.steps.len() >= 2, "steps of one pass: {:?}", full.steps);
    let waits: BTreeSet<&String> = trees.iter().flat_map(|t| t.waits.iter()).collect();
    assert!(
        waits.iter().any(|w| w.starts_with("wait device db:")),
        "waits: {waits:?}"
    );

    // The log lines of that pass carry the Cinder, the step and the trace id.
    let logs = telemetry.logs.text();
    let line = logs
        .lines()
        .find(|l| l.contains(&full.trace_id) && l.contains("\"name\":\"step\""))
        .unwrap_or_else(|| panic!("no log line of trace {} inside a step", full.trace_id));
    let v: serde_json::Value = serde_json::from_str(line).unwrap();
    let spans = v["spans"].as_array().unwrap();
    let pass = spans.iter().find(|s| s["name"] == "reconcile").unwrap();
    assert_eq!(pass["cinder"], "traced", "{line}");
    assert_eq!(pass["trace_id"], full.trace_id.as_str(), "{line}");
    assert!(
        spans
            .iter()
            .any(|s| s["name"] == "step" && s["step"].is_string()),
        "{line}"
    );
    h.stop().await.unwrap();
}
