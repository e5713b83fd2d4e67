//! The figures of one run, as a table or one JSON object (keys `section.name`).

use crate::measure::Requests;
use serde_json::{Value, json};

/// One replica's resources.
#[derive(Clone, Debug)]
pub struct ReplicaFigures {
    pub rss_before: u64,
    pub rss_after: u64,
    /// CPU time from the first create to Ready.
    pub cpu_ms: u64,
    /// CPU time of the actor thread (every actor and every step body runs on it) over the same
    /// span.
    pub actor_thread_cpu_ms: u64,
}

/// Everything one run measured.
#[derive(Clone, Debug)]
pub struct Report {
    pub cinders: u32,
    pub backends: u32,
    pub targets: u32,
    pub replicas: u32,
    pub shards: Option<u32>,
    pub delay_scale: f64,
    pub api_qps: Option<f64>,
    pub created_ms: u64,
    pub makespan_ms: u64,
    /// The longest chain of simulated delays of one Cinder.
    pub chain_ms: u64,
    /// The busiest cluster's operator requests at the rate that cluster takes them.
    pub capacity_ms: u64,
    pub first: Requests,
    pub steady: Requests,
    pub steady_secs: u64,
    /// From Ready to the start of the steady window (the last write of the settling fleet plus
    /// the quiet period).
    pub settle_ms: u64,
    pub replica_figures: Vec<ReplicaFigures>,
    pub passes: u64,
    pub pass_p50_ms: u64,
    pub pass_p99_ms: u64,
    pub watches_open: usize,
}

fn per(x: u64, n: u32) -> f64 {
    if n == 0 { 0.0 } else { x as f64 / f64::from(n) }
}

fn round2(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}

impl Report {
    /// The JSON object (every key of the table, nested by section).
    pub fn json(&self) -> Value {
        let n = self.cinders;
        let rss_delta: u64 = self
            .replica_figures
            .iter()
            .map(|r| r.rss_after.saturating_sub(r.rss_before))
            .sum();
        let cpu_ms: u64 = self.replica_figures.iter().map(|r| r.cpu_ms).sum();
        let actor_cpu_ms: u64 = self
            .replica_figures
            .iter()
            .map(|r| r.actor_thread_cpu_ms)
            .sum();
        let minutes = self.steady_secs as f64 / 60.0;
        let limit_ms = self.chain_ms.max(self.capacity_ms);
        json!({
            "fleet": {
                "cinders": n, "backends": self.backends, "targets": self.targets,
                "replicas": self.replicas, "shards": self.shards, "delay_scale": self.delay_scale,
                "api_qps": self.api_qps, "created_ms": self.created_ms,
            },
            "ready": {
                "makespan_ms": self.makespan_ms,
                "limit_ms": limit_ms,
                "limit_chain_ms": self.chain_ms,
                "limit_capacity_ms": self.capacity_ms,
                "ratio": round2(self.makespan_ms as f64 / limit_ms.max(1) as f64),
            },
            "api": {
                "requests_total": self.first.total,
                "requests_per_cinder": round2(per(self.first.total, n)),
                "writes_per_cinder": round2(per(self.first.writes, n)),
                "throttled_total": self.first.throttled,
            },
            "steady": {
                "settle_ms": self.settle_ms,
                "window_s": self.steady_secs,
                "requests_per_cinder_per_min": round2(per(self.steady.total, n) / minutes.max(f64::MIN_POSITIVE)),
                "writes_total": self.steady.writes,
            },
            "operator": {
                "rss_bytes_per_cinder": round2(per(rss_delta, n)),
                "rss_after_bytes": self.replica_figures.iter().map(|r| r.rss_after).collect::<Vec<_>>(),
                "cpu_ms_per_replica": self.replica_figures.iter().map(|r| r.cpu_ms).collect::<Vec<_>>(),
                "actor_thread_cpu_ms_per_replica": self.replica_figures.iter().map(|r| r.actor_thread_cpu_ms).collect::<Vec<_>>(),
                // Of one core, over first create to Ready: how busy the one actor thread was.
                "actor_thread_busy": self.replica_figures.iter().map(|r| round2(r.actor_thread_cpu_ms as f64 / self.makespan_ms.max(1) as f64)).collect::<Vec<_>>(),
            },
            "reconcile": {
                "passes": self.passes,
                "pass_p50_ms": self.pass_p50_ms,
                "pass_p99_ms": self.pass_p99_ms,
                "cpu_ms_per_pass": round2(cpu_ms as f64 / self.passes.max(1) as f64),
                "actor_thread_cpu_ms_per_pass": round2(actor_cpu_ms as f64 / self.passes.max(1) as f64),
            },
            "watches": {"open": self.watches_open},
        })
    }

    /// The table: one `section.key  value` line per figure.
    pub fn table(&self) -> String {
        let mut out = String::new();
        if let Value::Object(sections) = self.json() {
            for (section, fields) in sections {
                if let Value::Object(fields) = fields {
                    for (key, value) in fields {
                        out.push_str(&format!("{:<40} {}\n", format!("{section}.{key}"), value));
                    }
                }
            }
        }
        out
    }
}
