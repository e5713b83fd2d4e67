//! The transactions page (`/ui/transactions`): every in-flight lock phase with its age, phase,
//! the locks it holds and the one it awaits, and the wait-for graph.

use super::html::{millis, table};
use super::wait_for;
use cinder_actors::{CoordinatorSnapshot, LockStep, TransactionSnapshot};
use maud::{Markup, html};

fn lock(l: &LockStep) -> Markup {
    html! { (format!("{:?}", l.mode).to_lowercase()) " " (l.kind) "/" (l.id) }
}

fn row(t: &TransactionSnapshot, oldest: Option<u64>) -> Vec<Markup> {
    vec![
        html! { span class="txn" { "txn " (t.txn) } },
        html! { (t.phase) },
        html! { (t.what) },
        html! { (format!("{:?}", t.priority).to_lowercase()) },
        html! { (millis(t.age_ms as f64)) },
        html! {
            @if t.held.is_empty() {
                span class="muted" { "none" }
            } @else {
                @for (i, l) in t.held.iter().enumerate() {
                    @if i > 0 { br; }
                    (lock(l))
                }
            }
        },
        html! {
            @match &t.waiting_on {
                Some(w) => {
                    span class=(if oldest == Some(t.txn) { "waiting oldest" } else { "waiting" }) {
                        (lock(&w.lock)) " for " (millis(w.waited_ms as f64))
                    }
                }
                None => span class="muted" { "–" },
            }
        },
    ]
}

/// The `main` of the page (`snapshot` is `Err` when the coordinator does not answer).
pub(crate) fn render(snapshot: Result<&CoordinatorSnapshot, String>) -> Markup {
    let snapshot = match snapshot {
        Ok(s) => s,
        Err(e) => {
            return html! {
                h1 { "Transactions" }
                p class="warning" { (e) }
            };
        }
    };
    let graph = wait_for::build(snapshot);
    let oldest = graph.oldest_waiter.map(|o| o.0);
    let mut transactions: Vec<_> = snapshot.transactions.iter().collect();
    transactions.sort_by(|a, b| b.age_ms.cmp(&a.age_ms).then(a.phase.cmp(&b.phase)));
    let rows: Vec<Vec<Markup>> = transactions.iter().map(|t| row(t, oldest)).collect();
    html! {
        h1 { "Transactions" }
        (table(
            "transactions",
            &[
                "Transaction",
                "Phase",
                "What",
                "Priority",
                "Age",
                "Holds",
                "Waits for"
            ],
            &rows,
            "No transaction in flight.",
        ))
        h2 { "Wait-for graph" }
        @if let Some((txn, ms)) = graph.oldest_waiter {
            p class="warning" {
                "Oldest waiter: " strong { "txn " (txn) } ", waiting " (millis(ms as f64)) "."
            }
        }
        (wait_for::svg(&graph))
    }
}
