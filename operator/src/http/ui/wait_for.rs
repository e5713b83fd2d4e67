//! The wait-for graph of the lock coordinator: from each waiting transaction to the resource it
//! waits for, to the transactions holding that resource; the oldest waiter is marked. [`build`]
//! is pure; [`svg`] draws it server-side in three columns (waiters, resources, holders).

use super::html::millis;
use cinder_actors::CoordinatorSnapshot;
use maud::{Markup, html};
use std::collections::BTreeMap;

/// A resource that somebody waits for.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Awaited {
    /// `kind/id`.
    pub label: String,
    /// Transactions waiting for it, with how long they waited (ms).
    pub waiters: Vec<(u64, u64)>,
    /// Transactions holding it.
    pub holders: Vec<u64>,
}

/// The graph.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct WaitFor {
    /// Awaited resources, sorted by label.
    pub resources: Vec<Awaited>,
    /// The transaction that has waited longest, and for how long (ms).
    pub oldest_waiter: Option<(u64, u64)>,
}

impl WaitFor {
    /// Waiting transactions, longest wait first (each once).
    pub(crate) fn waiters(&self) -> Vec<(u64, u64)> {
        let mut all: BTreeMap<u64, u64> = BTreeMap::new();
        for r in &self.resources {
            for &(txn, ms) in &r.waiters {
                let e = all.entry(txn).or_default();
                *e = (*e).max(ms);
            }
        }
        let mut v: Vec<(u64, u64)> = all.into_iter().collect();
        v.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        v
    }

    /// Holding transactions (each once, ascending).
    pub(crate) fn holders(&self) -> Vec<u64> {
        let mut v: Vec<u64> = self
            .resources
            .iter()
            .flat_map(|r| r.holders.iter().copied())
            .collect();
        v.sort_unstable();
        v.dedup();
        v
    }
}

/// The wait-for graph of a coordinator snapshot: the resources with waiters (the waiters taken
/// from the resource actors' queues and from the transactions' `waiting_on`).
pub(crate) fn build(snapshot: &CoordinatorSnapshot) -> WaitFor {
    let mut by_label: BTreeMap<String, Awaited> = BTreeMap::new();
    for r in snapshot.resources.iter().filter(|r| !r.waiters.is_empty()) {
        let label = format!("{}/{}", r.kind, r.id);
        by_label.insert(
            label.clone(),
            Awaited {
                label,
                waiters: r.waiters.iter().map(|w| (w.txn, w.waited_ms)).collect(),
                holders: r.holders.clone(),
            },
        );
    }
    for t in &snapshot.transactions {
        let Some(w) = &t.waiting_on else { continue };
        let label = format!("{}/{}", w.lock.kind, w.lock.id);
        let entry = by_label.entry(label.clone()).or_insert_with(|| Awaited {
            holders: snapshot
                .resources
                .iter()
                .find(|r| r.kind == w.lock.kind && r.id == w.lock.id)
                .map(|r| r.holders.clone())
                .unwrap_or_default(),
            label,
            waiters: Vec::new(),
        });
        match entry.waiters.iter_mut().find(|(txn, _)| *txn == t.txn) {
            Some(existing) => existing.1 = existing.1.max(w.waited_ms),
            None => entry.waiters.push((t.txn, w.waited_ms)),
        }
    }
    let mut graph = WaitFor {
        resources: by_label.into_values().collect(),
        oldest_waiter: None,
    };
    graph.oldest_waiter = graph.waiters().first().copied();
    graph
}

const ROW: usize = 44;
const BOX_H: usize = 30;
const COLUMNS: [usize; 3] = [10, 290, 570];
const BOX_W: [usize; 3] = [180, 240, 180];

fn node(column: usize, row: usize, class: &str, label: &str, sub: &str) -> Markup {
    let (x, y) = (COLUMNS[column], 40 + row * ROW);
    html! {
        g class={ "node " (class) } {
            rect x=(x) y=(y) width=(BOX_W[column]) height=(BOX_H) rx="4" {}
            text x=(x + 6) y=(y + 13) { (label) }
            text class="sub" x=(x + 6) y=(y + 26) { (sub) }
        }
    }
}

fn edge(from: (usize, usize), to: (usize, usize), class: &str) -> Markup {
    html! {
        line class={ "edge " (class) }
            x1=(COLUMNS[from.0] + BOX_W[from.0]) y1=(40 + from.1 * ROW + BOX_H / 2)
            x2=(COLUMNS[to.0]) y2=(40 + to.1 * ROW + BOX_H / 2)
            marker-end="url(#arrow)" {}
    }
}

/// The graph as an SVG element (empty graph: a sentence instead).
pub(crate) fn svg(graph: &WaitFor) -> Markup {
    if graph.resources.is_empty() {
        return html! {
            p class="empty" id="wait-for-empty" { "No transaction waits for a lock." }
        };
    }
    let waiters = graph.waiters();
    let holders = graph.holders();
    let rows = waiters.len().max(holders.len()).max(graph.resources.len());
    let height = 50 + rows * ROW;
    let oldest = graph.oldest_waiter.map(|o| o.0);
    let row_of_waiter = |txn: u64| waiters.iter().position(|(t, _)| *t == txn).unwrap_or(0);
    let row_of_holder = |txn: u64| holders.iter().position(|t| *t == txn).unwrap_or(0);
    html! {
        svg id="wait-for" class="wait-for" xmlns="http://www.w3.org/2000/svg"
            viewBox={ "0 0 760 " (height) } width="760" height=(height) role="img"
            aria-label="wait-for graph" {
            defs {
                marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7"
                    markerHeight="7" orient="auto-start-reverse" {
                    path d="M 0 0 L 10 5 L 0 10 z" {}
                }
            }
            text class="heading" x=(COLUMNS[0]) y="22" { "waiting transaction" }
            text class="heading" x=(COLUMNS[1]) y="22" { "resource" }
            text class="heading" x=(COLUMNS[2]) y="22" { "held by" }
            @for (i, r) in graph.resources.iter().enumerate() {
                @for &(txn, _) in &r.waiters {
                    (edge(
                        (0, row_of_waiter(txn)),
                        (1, i),
                        if oldest == Some(txn) { "waits oldest" } else { "waits" },
                    ))
                }
                @for &txn in &r.holders {
                    (edge((1, i), (2, row_of_holder(txn)), "held"))
                }
            }
            @for (i, &(txn, ms)) in waiters.iter().enumerate() {
                (node(
                    0,
                    i,
                    if oldest == Some(txn) { "txn oldest" } else { "txn" },
                    &format!("txn {txn}"),
                    &format!("waits {}", millis(ms as f64)),
                ))
            }
            @for (i, r) in graph.resources.iter().enumerate() {
                (node(1, i, "resource", &r.label, &format!("{} waiting", r.waiters.len())))
            }
            @for (i, &txn) in holders.iter().enumerate() {
                (node(2, i, "txn holder", &format!("txn {txn}"), "holds"))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cinder_actors::inspect::{WaitSnapshot, WaiterSnapshot};
    use cinder_actors::{LockMode, LockStep, Priority, ResourceSnapshot, TransactionSnapshot};

    fn step(mode: LockMode, id: &str) -> LockStep {
        LockStep {
            mode,
            kind: "cinder".into(),
            id: id.into(),
        }
    }

    fn txn(txn: u64, held: Vec<LockStep>, waiting: Option<(LockMode, u64)>) -> TransactionSnapshot {
        TransactionSnapshot {
            phase: txn,
            txn,
            what: "lock",
            priority: Priority::Default,
            age_ms: 9000,
            held,
            waiting_on: waiting.map(|(mode, waited_ms)| WaitSnapshot {
                lock: step(mode, "ns/a"),
                waited_ms,
            }),
        }
    }

    fn snapshot() -> CoordinatorSnapshot {
        CoordinatorSnapshot {
            transactions: vec![
                txn(7, vec![step(LockMode::Write, "ns/a")], None),
                txn(8, Vec::new(), Some((LockMode::Write, 4000))),
                txn(9, Vec::new(), Some((LockMode::Read, 700))),
            ],
            resources: vec![ResourceSnapshot {
                kind: "cinder".into(),
                id: "ns/a".into(),
                mode: Some(LockMode::Write),
                holders: vec![7],
                waiters: vec![WaiterSnapshot {
                    txn: 8,
                    mode: LockMode::Write,
                    priority: Priority::High,
                    waited_ms: 4000,
                }],
                mailbox_len: 0,
                exists: true,
                value: None,
            }],
        }
    }

    #[test]
    fn waiters_point_at_the_resource_and_its_holders() {
        let g = build(&snapshot());
        assert_eq!(g.resources.len(), 1);
        assert_eq!(g.resources[0].label, "cinder/ns/a");
        assert_eq!(g.resources[0].holders, vec![7]);
        assert_eq!(g.resources[0].waiters, vec![(8, 4000), (9, 700)]);
        assert_eq!(g.oldest_waiter, Some((8, 4000)));
        let svg = svg(&g).into_string();
        assert!(svg.contains("txn 8") && svg.contains("txn 7") && svg.contains("cinder/ns/a"));
        assert_eq!(
            svg.matches("class=\"edge waits oldest\"").count(),
            1,
            "{svg}"
        );
        assert_eq!(svg.matches("class=\"edge held\"").count(), 1, "{svg}");
        assert!(svg.contains("class=\"node txn oldest\""), "{svg}");
    }

    #[test]
    fn nobody_waiting_draws_no_graph() {
        let g = build(&CoordinatorSnapshot {
            transactions: Vec::new(),
            resources: Vec::new(),
        });
        assert!(g.resources.is_empty() && g.oldest_waiter.is_none());
        assert!(svg(&g).into_string().contains("No transaction waits"));
    }
}
