//! deploy/dashboards/cinder-operator.json: valid JSON, uid `cinder-operator`, and every metric a
//! panel queries is one the operator exports (the names come from the operator's own registry,
//! with a sample in every family so that histogram and counter series show their full names).

use cinder_e2e::deploy_helpers::{deploy_dir, every_metric_family_text};
use std::collections::BTreeSet;

/// Every sample name the operator's `/metrics` can show.
fn exported_sample_names() -> BTreeSet<String> {
    let text = every_metric_family_text().unwrap();
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .filter_map(|l| l.split(['{', ' ']).next())
        .map(str::to_string)
        .collect()
}

fn exprs(v: &serde_json::Value, out: &mut Vec<String>) {
    match v {
        serde_json::Value::Object(map) => {
            for (k, v) in map {
                if k == "expr" {
                    if let Some(s) = v.as_str() {
                        out.push(s.to_string());
                    }
                } else {
                    exprs(v, out);
                }
            }
        }
        serde_json::Value::Array(items) => items.iter().for_each(|i| exprs(i, out)),
        _ => {}
    }
}

#[test]
fn the_dashboard_queries_only_exported_metrics() {
    let path = deploy_dir().join("dashboards/cinder-operator.json");
    let text = std::fs::read_to_string(&path).unwrap();
    let dashboard: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(dashboard["uid"], "cinder-operator");
    let panels = dashboard["panels"].as_array().unwrap();
    assert!(!panels.is_empty());

    let exported = exported_sample_names();
    let metric = regex::Regex::new(r"\bcinder_operator_[a-z0-9_]+").unwrap();
    let mut queried = BTreeSet::new();
    let mut all = Vec::new();
    exprs(&dashboard, &mut all);
    let mut variable_queries = Vec::new();
    for variable in dashboard["templating"]["list"].as_array().unwrap() {
        if variable["type"] == "query" {
            variable_queries.push(variable["query"].as_str().unwrap().to_string());
        }
    }
    for expr in &all {
        let names: Vec<&str> = metric.find_iter(expr).map(|m| m.as_str()).collect();
        assert!(
            !names.is_empty(),
            "a panel query names no operator metric: {expr}"
        );
        for name in names {
            assert!(
                exported.contains(name),
                "the dashboard queries {name}, which the operator does not export (query: {expr}); exported: {exported:#?}"
            );
            queried.insert(name.to_string());
        }
    }
    for query in &variable_queries {
        for name in metric.find_iter(query).map(|m| m.as_str()) {
            assert!(
                exported.contains(name),
                "a variable queries {name}: {query}"
            );
        }
    }
    // Every panel with targets queries something.
    for panel in panels {
        if let Some(targets) = panel["targets"].as_array() {
            assert!(!targets.is_empty(), "panel {} has no query", panel["title"]);
        }
    }
    // The issue's list: reconcile duration quantiles, error rate, the three Job pairs, lock wait,
    // device waits and mailbox depth.
    for needed in [
        "cinder_operator_reconcile_duration_seconds_bucket",
        "cinder_operator_reconcile_errors_total",
        "cinder_operator_db_sync_duration_seconds_bucket",
        "cinder_operator_db_sync_total",
        "cinder_operator_db_purge_duration_seconds_bucket",
        "cinder_operator_db_purge_total",
        "cinder_operator_service_remove_duration_seconds_bucket",
        "cinder_operator_service_remove_total",
        "cinder_operator_lock_wait_seconds_bucket",
        "cinder_operator_device_lock_wait_seconds_bucket",
        "cinder_operator_mailbox_depth",
    ] {
        assert!(queried.contains(needed), "no panel queries {needed}");
    }
    for q in ["0.5", "0.95", "0.99"] {
        assert!(
            all.iter()
                .any(|e| e.contains(&format!("histogram_quantile({q}"))
                    && e.contains("cinder_operator_reconcile_duration_seconds_bucket")
                    && e.contains("sub_reconciler")),
            "no p{q} of the reconcile duration per sub_reconciler"
        );
    }
    assert!(
        all.iter()
            .any(|e| e.contains("reconcile_errors_total") && e.contains("condition_type")),
        "no error rate per condition_type"
    );
}
