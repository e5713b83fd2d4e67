//! The metrics registry: exact names and labels, OpenMetrics framing, per-Cinder removal.

use cinder_operator::metrics::{JobKind, JobResult, Metrics, encode_openmetrics};
use std::time::Duration;

/// Checks the OpenMetrics text framing: metadata lines, samples `name{labels} value`, one final `# EOF`.
fn assert_openmetrics(text: &str) {
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.last(), Some(&"# EOF"), "must end with # EOF");
    assert_eq!(lines.iter().filter(|l| **l == "# EOF").count(), 1);
    for line in &lines[..lines.len() - 1] {
        if let Some(meta) = line.strip_prefix("# ") {
            let kw = meta.split(' ').next().unwrap();
            assert!(
                ["HELP", "TYPE", "UNIT"].contains(&kw),
                "bad metadata line {line:?}"
            );
            continue;
        }
        let (series, value) = line
            .rsplit_once(' ')
            .unwrap_or_else(|| panic!("bad sample {line:?}"));
        assert!(
            value.parse::<f64>().is_ok() || value == "+Inf",
            "bad value in {line:?}"
        );
        let name_end = series.find('{').unwrap_or(series.len());
        let name = &series[..name_end];
        assert!(
            name.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':'),
            "bad name {name:?}"
        );
        if name_end < series.len() {
            assert!(series.ends_with('}'), "unterminated labels in {line:?}");
        }
    }
}

#[test]
fn pipeline_and_job_families_are_exposed_under_the_documented_names() {
    let (registry, m) = Metrics::new_registry();
    m.observe_step("Database", Duration::from_millis(20));
    m.count_step_error("Database", "DatabaseReady");
    m.job(JobKind::DbSync)
        .observe("ns", "c1", JobResult::Succeeded, Duration::from_secs(42));
    m.job(JobKind::DbPurge)
        .observe("ns", "c1", JobResult::Failed, Duration::from_secs(3));
    m.job(JobKind::ServiceRemove)
        .observe("ns", "c1", JobResult::Succeeded, Duration::from_secs(7));
    m.mailbox_depth
        .get_or_create(&cinder_operator::metrics::KindLabels {
            kind: "volume".into(),
        })
        .set(3);
    m.transactions_in_flight.set(2);
    m.lock_wait_seconds
        .get_or_create(&cinder_operator::metrics::LockLabels {
            kind: "backend".into(),
            mode: "read".into(),
        })
        .observe(0.002);
    let text = encode_openmetrics(&registry).unwrap();
    assert_openmetrics(&text);
    for needle in [
        r#"cinder_operator_reconcile_duration_seconds_bucket{le="0.025",sub_reconciler="Database"} 1"#,
        r#"cinder_operator_reconcile_errors_total{sub_reconciler="Database",condition_type="DatabaseReady"} 1"#,
        r#"cinder_operator_db_sync_total{cinder="c1",namespace="ns",result="succeeded"} 1"#,
        r#"cinder_operator_db_sync_duration_seconds_bucket{le="60.0",cinder="c1",namespace="ns"} 1"#,
        r#"cinder_operator_db_purge_total{cinder="c1",namespace="ns",result="failed"} 1"#,
        r#"cinder_operator_service_remove_duration_seconds_count{cinder="c1",namespace="ns"} 1"#,
        r#"cinder_operator_mailbox_depth{kind="volume"} 3"#,
        "cinder_operator_transactions_in_flight 2",
        "# TYPE cinder_operator_lock_wait_seconds histogram",
        r#"cinder_operator_lock_wait_seconds_count{kind="backend",mode="read"} 1"#,
    ] {
        assert!(text.contains(needle), "missing {needle:?} in\n{text}");
    }
    for le in [
        "1.0", "5.0", "10.0", "30.0", "60.0", "120.0", "300.0", "600.0",
    ] {
        assert!(
            text.contains(&format!(
                r#"cinder_operator_db_sync_duration_seconds_bucket{{le="{le}""#
            )),
            "bucket {le}"
        );
    }
}

#[test]
fn forgetting_a_cinder_drops_only_its_series() {
    let (registry, m) = Metrics::new_registry();
    for c in ["gone", "kept"] {
        m.job(JobKind::DbSync)
            .observe("ns", c, JobResult::Succeeded, Duration::from_secs(1));
        m.job(JobKind::DbPurge)
            .observe("ns", c, JobResult::Failed, Duration::from_secs(1));
    }
    m.forget_cinder("ns", "gone");
    let text = encode_openmetrics(&registry).unwrap();
    assert!(!text.contains(r#"cinder="gone""#), "{text}");
    assert!(text.contains(
        r#"cinder_operator_db_sync_total{cinder="kept",namespace="ns",result="succeeded"} 1"#
    ));
    assert_openmetrics(&text);
}
