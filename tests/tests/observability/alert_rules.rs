//! The PrometheusRule of deploy/monitoring: its rules pass `promtool check rules`, its unit tests
//! (deploy/monitoring/rules-test.yaml) pass `promtool test rules`, the unit tests catch a broken
//! rule (a CinderNotReady that fires after 5 minutes instead of 15 fails them), and every alert's
//! `runbook_url` names a section of docs/operations.md.

use cinder_e2e::deploy_helpers::{deploy_dir, ensure_prometheus};
use cinder_e2e::observability_helpers::{run, test_telemetry};
use std::path::{Path, PathBuf};

/// The PrometheusRule's `spec` (plain Prometheus rule groups) as YAML.
fn rule_groups() -> serde_norway::Value {
    let path = deploy_dir().join("monitoring/prometheus-rule.yaml");
    let text = std::fs::read_to_string(&path).unwrap();
    let rule: serde_norway::Value = serde_norway::from_str(&text).unwrap();
    assert_eq!(rule["kind"].as_str(), Some("PrometheusRule"));
    rule["spec"].clone()
}

/// A folder holding `rules.yaml` (from `groups`) and the unit tests beside it.
fn workspace(groups: &serde_norway::Value) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("rules.yaml"),
        serde_norway::to_string(groups).unwrap(),
    )
    .unwrap();
    std::fs::copy(
        deploy_dir().join("monitoring/rules-test.yaml"),
        dir.path().join("rules-test.yaml"),
    )
    .unwrap();
    dir
}

fn promtool(dir: &Path, args: &[&str]) -> (bool, String) {
    let out = run(&PathBuf::from("promtool"), args, &[]).unwrap();
    let _ = dir;
    (
        out.status.success(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

#[test]
fn promtool_accepts_and_unit_tests_the_alerts() {
    test_telemetry();
    if let Some(reason) = ensure_prometheus().unwrap() {
        println!("SKIPPED promtool_accepts_and_unit_tests_the_alerts: {reason}");
        return;
    }
    let groups = rule_groups();
    let alerts: Vec<&str> = groups["groups"][0]["rules"]
        .as_sequence()
        .unwrap()
        .iter()
        .filter_map(|r| r["alert"].as_str())
        .collect();
    assert_eq!(
        alerts,
        vec![
            "CinderOperatorDown",
            "CinderOperatorNoLeader",
            "CinderNotReady",
            "CinderReconcileErrors",
            "CinderUpgradeStuck",
            "CinderDeviceLeaseWaitHigh",
            "CinderDeviceLeaseLost",
            "CinderReconcilesQueued"
        ]
    );
    let dir = workspace(&groups);
    let rules = dir.path().join("rules.yaml").display().to_string();
    let tests = dir.path().join("rules-test.yaml").display().to_string();
    let (ok, report) = promtool(dir.path(), &["check", "rules", &rules]);
    assert!(ok && report.contains("SUCCESS: 8 rules found"), "{report}");
    let (ok, report) = promtool(dir.path(), &["test", "rules", &tests]);
    assert!(ok, "promtool test rules:\n{report}");
    // Every alert is exercised by the unit tests.
    let tests_text = std::fs::read_to_string(&tests).unwrap();
    for alert in alerts {
        assert!(
            tests_text.contains(&format!("alertname: {alert}")),
            "{alert} has no unit test"
        );
    }

    // The unit tests can fail: a CinderNotReady after 5 minutes fires at 10 minutes.
    let mut broken = groups.clone();
    broken["groups"][0]["rules"][2]["for"] = serde_norway::Value::String("5m".to_string());
    let dir = workspace(&broken);
    let tests = dir.path().join("rules-test.yaml").display().to_string();
    let (ok, report) = promtool(dir.path(), &["test", "rules", &tests]);
    assert!(!ok && report.contains("CinderNotReady"), "{report}");
}

/// GitHub's anchor of a Markdown heading: lower case, punctuation dropped, spaces as hyphens.
fn anchor(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || *c == ' ' || *c == '-' || *c == '_')
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

#[test]
fn every_alert_links_a_runbook_section_of_the_operations_guide() {
    let docs =
        std::fs::read_to_string(cinder_e2e::deploy_helpers::repo_root().join("docs/operations.md"))
            .unwrap();
    let anchors: Vec<String> = docs
        .lines()
        .filter(|l| l.starts_with('#'))
        .map(|l| anchor(l.trim_start_matches('#')))
        .collect();
    let groups = rule_groups();
    let rules = groups["groups"][0]["rules"].as_sequence().unwrap();
    assert!(!rules.is_empty());
    for rule in rules {
        let alert = rule["alert"].as_str().unwrap();
        let url = rule["annotations"]["runbook_url"]
            .as_str()
            .unwrap_or_else(|| panic!("{alert} has no runbook_url"));
        let (page, section) = url
            .split_once('#')
            .unwrap_or_else(|| panic!("{alert}: {url} names no section"));
        assert!(page.ends_with("/docs/operations.md"), "{alert}: {url}");
        assert!(
            anchors.iter().any(|a| a == section),
            "{alert}: docs/operations.md has no heading for #{section}"
        );
        assert_eq!(section, alert.to_lowercase(), "{alert}: {url}");
    }
}
