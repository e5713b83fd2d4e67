//! The figures of a run, the lock core's targets with PASS/MISS, and the two outputs: a
//! human-readable table and one JSON object.

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

use crate::args::Options;
use crate::workload::backend_update::BackendUpdate;
use crate::workload::create_publish::{CreatePublish, Limit};
use crate::workload::overhead::{LOCKS_PER_TXN, Overhead};
use crate::workload::scale::Scale;
use crate::workload::throughput::{self, Throughput};

/// Everything measured in one run, per workload and engine.
#[derive(Default)]
pub struct Report {
    pub overhead: BTreeMap<String, Overhead>,
    pub create_publish: BTreeMap<String, CreatePublish>,
    pub limit: Option<Limit>,
    pub backend_update: BTreeMap<String, BackendUpdate>,
    pub scale: BTreeMap<String, Scale>,
    /// Throughput by (arbiters / workers, engine).
    pub throughput: BTreeMap<(usize, String), Throughput>,
    /// With `--arbiters N` (N >= 2): the same workloads of ordered_rwlock and actors on one
    /// thread, measured in the same process.
    pub one_arbiter: Option<Box<Report>>,
    /// Engines or workloads that failed, with why.
    pub errors: Vec<String>,
    /// 1-minute load average before and after the run.
    pub load: (Option<f64>, Option<f64>),
}

/// One target of the lock core.
pub struct Target {
    pub name: String,
    /// The measured figure (a ratio, µs, bytes or ms), when both sides were measured.
    pub value: Option<f64>,
    pub threshold: f64,
    /// Whether larger values pass (a speed-up) or smaller ones (a cost).
    pub at_least: bool,
    pub note: String,
}

impl Target {
    pub fn status(&self) -> &'static str {
        match self.value {
            None => "N/A",
            Some(v)
                if (self.at_least && v >= self.threshold)
                    || (!self.at_least && v <= self.threshold) =>
            {
                "PASS"
            }
            Some(_) => "MISS",
        }
    }
}

/// One figure of a report (e.g. the actors' overhead), when measured.
type Figure = dyn Fn(&Report) -> Option<f64>;

fn ratio(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(a), Some(b)) if b > 0.0 => Some(a / b),
        _ => None,
    }
}

impl Report {
    fn cp(&self, engine: &str) -> Option<f64> {
        self.create_publish.get(engine).map(|c| c.makespan_ms)
    }

    fn bu(&self, engine: &str) -> Option<f64> {
        self.backend_update.get(engine).map(|b| b.makespan_ms)
    }

    fn oh(&self, engine: &str) -> Option<f64> {
        self.overhead.get(engine).map(|o| o.ns_per_txn)
    }

    fn sc(&self, engine: &str) -> Option<&Scale> {
        self.scale.get(engine)
    }

    fn tp(&self, n: usize, engine: &str) -> Option<f64> {
        self.throughput
            .get(&(n, engine.to_string()))
            .map(|t| t.txns_per_sec)
    }

    /// The figures on one thread: this run's with `--arbiters 1`, else the comparison run's.
    fn one(&self, arbiters: usize) -> Option<&Report> {
        if arbiters >= 2 {
            self.one_arbiter.as_deref()
        } else {
            Some(self)
        }
    }

    /// The lock core's targets (issue 32), evaluated on this run: the one-arbiter targets (from
    /// this run with `--arbiters 1`, from its one-thread comparison run with `--arbiters N`), the
    /// N-arbiter targets (N/A with `--arbiters 1`) and the throughput targets.
    pub fn targets(&self, arbiters: usize) -> Vec<Target> {
        let one = self.one(arbiters);
        let from = if arbiters >= 2 {
            " (the one-thread comparison run)"
        } else {
            ""
        };
        let one_f = |f: &Figure| one.and_then(f);
        let listed = one.and_then(|r| r.sc("actors")).map_or(0, |s| s.volumes);
        let oh_ratio = one_f(&|r| ratio(r.oh("actors"), r.oh("ordered_rwlock")));
        let mut targets = vec![
            Target {
                name: format!("1 arbiter: overhead <= 10 us per txn ({LOCKS_PER_TXN} locks)"),
                value: one_f(&|r| r.oh("actors").map(|ns| ns / 1e3)),
                threshold: 10.0,
                at_least: false,
                note: match oh_ratio {
                    Some(r) => format!("us per txn; {r:.2} x ordered_rwlock{from}"),
                    None => format!("us per txn{from}"),
                },
            },
            Target {
                name: "1 arbiter: overhead <= 1.0 x ordered_rwlock".into(),
                value: oh_ratio,
                threshold: 1.0,
                at_least: false,
                note: format!("ratio actors / ordered_rwlock{from}"),
            },
            Target {
                name: "1 arbiter: create_publish <= 1.1 x physical limit".into(),
                value: one_f(&|r| ratio(r.cp("actors"), r.limit.map(|l| l.limit_ms))),
                threshold: 1.1,
                at_least: false,
                note: format!("ratio makespan / limit{from}"),
            },
            Target {
                name: "1 arbiter: create_publish <= 1.0 x ordered_rwlock".into(),
                value: one_f(&|r| ratio(r.cp("actors"), r.cp("ordered_rwlock"))),
                threshold: 1.0,
                at_least: false,
                note: format!("ratio of makespans actors / ordered_rwlock{from}"),
            },
            Target {
                name: "1 arbiter: backend_update <= 1.0 x ordered_rwlock".into(),
                value: one_f(&|r| ratio(r.bu("actors"), r.bu("ordered_rwlock"))),
                threshold: 1.0,
                at_least: false,
                note: format!("ratio of makespans actors / ordered_rwlock{from}"),
            },
            Target {
                name: "1 arbiter: <= 2 KiB resident per idle volume beyond its value".into(),
                value: one_f(&|r| r.sc("actors").map(|s| s.bytes_per_volume)),
                threshold: 2048.0,
                at_least: false,
                note: format!("bytes per volume, {listed} volumes{from}"),
            },
            Target {
                name: "1 arbiter: list 100000 volumes within 100 ms".into(),
                value: one_f(&|r| r.sc("actors").map(|s| s.list_all_ms)),
                threshold: 100.0,
                at_least: false,
                note: format!("ms to list {listed} volumes{from}"),
            },
        ];
        // N arbiters against one: each figure a ratio N / 1 that must not exceed 1.
        let n = arbiters.max(2);
        let many = (arbiters >= 2).then_some(self);
        let vs_one = |f: &Figure| match (many, one) {
            (Some(m), Some(o)) if arbiters >= 2 => ratio(f(m), f(o)),
            _ => None,
        };
        let na = if arbiters >= 2 {
            String::new()
        } else {
            format!("; N/A: run with --arbiters {n}")
        };
        let compared: [(&str, &Figure); 5] = [
            ("overhead us per txn", &|r| r.oh("actors")),
            ("create_publish makespan", &|r| r.cp("actors")),
            ("backend_update makespan", &|r| r.bu("actors")),
            ("bytes per idle volume", &|r| {
                r.sc("actors").map(|s| s.bytes_per_volume)
            }),
            ("list all volumes ms", &|r| {
                r.sc("actors").map(|s| s.list_all_ms)
            }),
        ];
        for (what, f) in compared {
            targets.push(Target {
                name: format!("{n} arbiters: {what} <= 1.0 x 1 arbiter"),
                value: vs_one(f),
                threshold: 1.0,
                at_least: false,
                note: format!("ratio {n} arbiters / 1 arbiter{na}"),
            });
        }
        targets.push(Target {
            name: format!("{n} arbiters: create_publish <= 1.0 x ordered_rwlock on {n} workers"),
            value: many.and_then(|m| ratio(m.cp("actors"), m.cp("ordered_rwlock"))),
            threshold: 1.0,
            at_least: false,
            note: format!("ratio of makespans actors / ordered_rwlock{na}"),
        });
        for n in throughput::SETTINGS.into_iter().filter(|n| *n >= 2) {
            targets.push(Target {
                name: format!("throughput: actors ahead of ordered_rwlock on {n} arbiters"),
                value: ratio(self.tp(n, "actors"), self.tp(n, "ordered_rwlock")),
                threshold: 1.0,
                at_least: true,
                note: format!("ratio of txns/s actors / ordered_rwlock ({n} workers)"),
            });
        }
        targets
    }

    /// The figures of the in-process workloads and scale, as JSON sections.
    fn sections(&self, o: &Options) -> Map<String, Value> {
        let mut overhead = Map::new();
        overhead.insert("txns".into(), json!(o.overhead_txns));
        overhead.insert("locks_per_txn".into(), json!(LOCKS_PER_TXN));
        for (engine, oh) in &self.overhead {
            overhead.insert(
                engine.clone(),
                json!({"ns_per_txn": oh.ns_per_txn, "txns": oh.txns, "lock_ns": oh.lock_ns,
                       "body_ns": oh.body_ns, "unlock_ns": oh.unlock_ns}),
            );
        }
        if let Some(r) = ratio(self.oh("actors"), self.oh("ordered_rwlock")) {
            overhead.insert("actors_to_ordered_rwlock".into(), json!(r));
        }

        let mut cp = Map::new();
        cp.insert(
            "shape".into(),
            json!({"volumes": o.volumes, "backends": o.backends, "nodes": o.nodes,
                   "call_ms": o.call.as_secs_f64() * 1e3, "device_concurrency": o.device_concurrency,
                   "snapshot_percent": o.snapshot_percent, "workers": o.workers}),
        );
        if let Some(l) = self.limit {
            cp.insert("limit_ms".into(), json!(l.limit_ms));
            cp.insert("chain_ms".into(), json!(l.chain_ms));
            cp.insert("device_ms".into(), json!(l.device_ms));
        }
        for (engine, c) in &self.create_publish {
            let mut e = json!({
                "makespan_ms": c.makespan_ms, "measured_ms": c.measured_ms, "volumes_run": c.volumes_run,
                "p50_ms": c.p50_ms, "p99_ms": c.p99_ms, "txns": c.txns, "device_calls": c.device_calls, "mean_call_ms": c.mean_call_ms, "cpu_ms": c.cpu_ms,
                "scaled_from_sample": c.sample,
            });
            if let (Some(l), Some(map)) = (self.limit, e.as_object_mut()) {
                map.insert("limit_ratio".into(), json!(c.makespan_ms / l.limit_ms));
            }
            cp.insert(engine.clone(), e);
        }

        let mut bu = Map::new();
        bu.insert(
            "shape".into(),
            json!({"existing_volumes": o.update_volumes, "creates": o.update_creates, "backends": o.backends}),
        );
        for (engine, b) in &self.backend_update {
            bu.insert(
                engine.clone(),
                json!({"makespan_ms": b.makespan_ms, "nested_volumes": b.nested_volumes,
                       "creates": b.creates, "device_calls": b.device_calls, "mean_call_ms": b.mean_call_ms, "cpu_ms": b.cpu_ms,
                       "device_limit_ms": b.device_limit_ms}),
            );
        }

        let mut scale = Map::new();
        if let Some(s) = self.scale.get("actors") {
            scale.insert("volumes".into(), json!(s.volumes));
            scale.insert("bytes_per_volume".into(), json!(s.bytes_per_volume));
            scale.insert("list_all_ms".into(), json!(s.list_all_ms));
            scale.insert("lock_one_us".into(), json!(s.lock_one_us));
        }
        for (engine, s) in &self.scale {
            scale.insert(
                engine.clone(),
                serde_json::to_value(s).unwrap_or(Value::Null),
            );
        }

        let mut out = Map::new();
        out.insert("overhead".into(), Value::Object(overhead));
        out.insert("create_publish".into(), Value::Object(cp));
        out.insert("backend_update".into(), Value::Object(bu));
        out.insert("scale".into(), Value::Object(scale));
        out
    }

    /// The JSON object of `--json`.
    pub fn to_json(&self, o: &Options) -> Value {
        let targets: Vec<Value> = self
            .targets(o.arbiters)
            .iter()
            .map(|t| {
                json!({"name": t.name, "value": t.value, "threshold": t.threshold,
                            "status": t.status(), "note": t.note})
            })
            .collect();
        let mut tp = Map::new();
        if !self.throughput.is_empty() {
            tp.insert("volumes".into(), json!(o.throughput_volumes));
            tp.insert("call_ms".into(), json!(0));
        }
        for ((n, engine), t) in &self.throughput {
            let setting = tp
                .entry(n.to_string())
                .or_insert_with(|| Value::Object(Map::new()));
            if let Some(map) = setting.as_object_mut() {
                map.insert(
                    engine.clone(),
                    json!({"txns": t.txns, "measured_ms": t.measured_ms,
                           "txns_per_sec": t.txns_per_sec, "cpu_ms": t.cpu_ms}),
                );
            }
        }
        let mut out = Map::new();
        out.insert(
            "machine".into(),
            json!({
                "cpus": std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1),
                "load_average_before": self.load.0,
                "load_average_after": self.load.1,
            }),
        );
        out.insert("arbiters".into(), json!(o.arbiters));
        out.insert("quick".into(), json!(o.quick));
        out.extend(self.sections(o));
        if let Some(one) = &self.one_arbiter {
            out.insert("one_arbiter".into(), Value::Object(one.sections(o)));
        }
        out.insert("throughput".into(), Value::Object(tp));
        out.insert("targets".into(), Value::Array(targets));
        out.insert("errors".into(), json!(self.errors));
        Value::Object(out)
    }

    /// The table of the in-process workloads and scale.
    fn figures_table(&self, o: &Options) -> String {
        let mut out = String::new();
        let mut line = |s: String| {
            out.push_str(&s);
            out.push('\n');
        };
        if !self.overhead.is_empty() {
            line(format!(
                "overhead: worked example 1 (Lock of 2 queries, {LOCKS_PER_TXN} locks, 3 commits, unlock), uncontended, {} txns",
                o.overhead_txns
            ));
            for (engine, oh) in &self.overhead {
                line(format!(
                    "  {engine:<16} {:>10.2} us/txn  (lock {:.2}, checks + 3 commits {:.2}, unlock {:.2})",
                    oh.ns_per_txn / 1e3,
                    oh.lock_ns / 1e3,
                    oh.body_ns / 1e3,
                    oh.unlock_ns / 1e3
                ));
            }
            if let Some(r) = ratio(self.oh("actors"), self.oh("ordered_rwlock")) {
                line(format!("  actors / ordered_rwlock: {r:.2}"));
            }
            line(String::new());
        }
        if !self.create_publish.is_empty() {
            line(format!(
                "create_publish: {} volumes, {} backends, {} nodes, {} ms calls, {} concurrent calls/device, {} % snapshots",
                o.volumes,
                o.backends,
                o.nodes,
                o.call.as_millis(),
                o.device_concurrency,
                o.snapshot_percent
            ));
            if let Some(l) = self.limit {
                line(format!(
                    "  physical limit {:.1} ms (longest chain {:.1} ms, busiest device {:.1} ms)",
                    l.limit_ms, l.chain_ms, l.device_ms
                ));
            }
            line(format!(
                "  {:<16} {:>12} {:>8} {:>10} {:>10} {:>8} {:>8}",
                "engine", "makespan ms", "x limit", "p50 ms", "p99 ms", "call ms", "cpu ms"
            ));
            for (engine, c) in &self.create_publish {
                let x = self
                    .limit
                    .map(|l| c.makespan_ms / l.limit_ms)
                    .unwrap_or(0.0);
                let sampled = match c.sample {
                    Some(f) => format!(
                        "  (ran {} volumes = {:.0} %, measured {:.0} ms, scaled linearly)",
                        c.volumes_run,
                        f * 100.0,
                        c.measured_ms
                    ),
                    None => String::new(),
                };
                line(format!(
                    "  {engine:<16} {:>12.1} {:>8.2} {:>10.2} {:>10.2} {:>8.3} {:>8}{sampled}",
                    c.makespan_ms,
                    x,
                    c.p50_ms,
                    c.p99_ms,
                    c.mean_call_ms,
                    c.cpu_ms.map_or("-".into(), |v| format!("{v:.0}"))
                ));
            }
            line(String::new());
        }
        if !self.backend_update.is_empty() {
            line(format!(
                "backend_update: {} backends updated with nested locks on {} existing volumes while {} creates run",
                o.backends, o.update_volumes, o.update_creates
            ));
            for (engine, b) in &self.backend_update {
                line(format!(
                    "  {engine:<16} {:>10.1} ms makespan, {} ms cpu ({} volumes nested-locked, busiest device {:.1} ms of work, mean call {:.3} ms)",
                    b.makespan_ms,
                    b.cpu_ms.map_or("-".into(), |v| format!("{v:.0}")),
                    b.nested_volumes,
                    b.device_limit_ms,
                    b.mean_call_ms
                ));
            }
            line(String::new());
        }
        if !self.scale.is_empty() {
            line("scale (fresh process per engine):".into());
            for (engine, s) in &self.scale {
                line(format!(
                    "  {engine:<16} {} volumes: {:.0} B/volume beyond value ({:.0} total, {:.0} value), list all {:.2} ms, lock one {:.2} us, populate {:.0} ms",
                    s.volumes,
                    s.bytes_per_volume,
                    s.total_bytes_per_volume,
                    s.value_bytes_per_volume,
                    s.list_all_ms,
                    s.lock_one_us,
                    s.populate_ms
                ));
            }
            line(String::new());
        }
        out
    }

    /// The human-readable table.
    pub fn to_table(&self, o: &Options) -> String {
        let mut out = self.figures_table(o);
        if let Some(one) = &self.one_arbiter {
            out.push_str(
                "the same on one thread (ordered_rwlock and actors, for the N-arbiter targets):\n",
            );
            let one_o = Options {
                arbiters: 1,
                ..o.clone()
            };
            for l in one.figures_table(&one_o).lines() {
                out.push_str("  ");
                out.push_str(l);
                out.push('\n');
            }
        }
        let mut line = |s: String| {
            out.push_str(&s);
            out.push('\n');
        };
        if !self.throughput.is_empty() {
            line(format!(
                "throughput: create_publish of {} volumes, calls of no time (actors on N arbiters, baselines on N workers)",
                o.throughput_volumes
            ));
            for ((n, engine), t) in &self.throughput {
                line(format!(
                    "  N = {n}  {engine:<16} {:>10.0} txns/s  ({} txns in {:.1} ms, cpu {} ms)",
                    t.txns_per_sec,
                    t.txns,
                    t.measured_ms,
                    t.cpu_ms.map_or("-".into(), |v| format!("{v:.0}"))
                ));
            }
            line(String::new());
        }
        let baselines = if o.arbiters >= 2 {
            format!("a multi-thread runtime of {} workers", o.arbiters)
        } else {
            "the same thread".to_owned()
        };
        line(format!(
            "machine: {} cpus, 1-minute load average {} before, {} after; actors on {} arbiter(s), baselines on {baselines}",
            std::thread::available_parallelism().map_or(1, |n| n.get()),
            self.load.0.map_or("-".into(), |l| format!("{l:.2}")),
            self.load.1.map_or("-".into(), |l| format!("{l:.2}")),
            o.arbiters,
        ));
        line(String::new());
        line("targets:".into());
        for t in self.targets(o.arbiters) {
            let value = t
                .value
                .map(|v| format!("{v:.2}"))
                .unwrap_or_else(|| "-".into());
            line(format!(
                "  {:<5} {:<62} {:>10}  {}",
                t.status(),
                t.name,
                value,
                t.note
            ));
        }
        for e in &self.errors {
            line(format!("error: {e}"));
        }
        out
    }
}
