//! What an operator user sees, tested with the tools users use: `kubectl apply -k` of deploy/
//! on a cluster without the monitoring CRDs, promtool on the alerting rules, the metric series at
//! zero from start-up, the Events `kubectl describe` shows, the admin pages in headless Chromium,
//! the HTTPS metrics certificate reloaded by the running binary, and the OTLP span tree and log
//! lines of a pass. One module per scenario; every scenario first installs the binary's shared
//! telemetry ([`test_telemetry`]).
//!
//! [`test_telemetry`]: cinder_e2e::observability_helpers::test_telemetry

mod admin_guard;
mod admin_pages;
mod alert_rules;
mod events;
mod install_without_monitoring;
mod lock_wait;
mod metrics_certificate;
mod otlp_tree;
mod zero_series;
