//! The transactions page (`/ui/transactions`): every in-flight lock phase with its age, phase,
//! the locks it holds and the one it awaits, and the wait-for graph.

use super::html::{escape, millis, table};
use super::wait_for;
use cinder_actors::{CoordinatorSnapshot, LockStep};

fn lock(l: &LockStep) -> String {
    format!(
        "{} {}/{}",
        escape(&format!("{:?}", l.mode).to_lowercase()),
        escape(&l.kind),
        escape(&l.id)
    )
}

/// The `main` of the page (`snapshot` is `Err` when the coordinator does not answer).
pub(crate) fn render(snapshot: Result<&CoordinatorSnapshot, String>) -> String {
    let snapshot = match snapshot {
        Ok(s) => s,
        Err(e) => {
            return format!(
                "<h1>Transactions</h1><p class=\"warning\">{}</p>",
                escape(&e)
            );
        }
    };
    let graph = wait_for::build(snapshot);
    let oldest = graph.oldest_waiter.map(|o| o.0);
    let mut transactions: Vec<_> = snapshot.transactions.iter().collect();
    transactions.sort_by(|a, b| b.age_ms.cmp(&a.age_ms).then(a.phase.cmp(&b.phase)));
    let rows: Vec<Vec<String>> = transactions
        .iter()
        .map(|t| {
            let held = if t.held.is_empty() {
                "<span class=\"muted\">none</span>".to_string()
            } else {
                t.held.iter().map(lock).collect::<Vec<_>>().join("<br>")
            };
            let waiting = match &t.waiting_on {
                Some(w) => {
                    let class = if oldest == Some(t.txn) {
                        "waiting oldest"
                    } else {
                        "waiting"
                    };
                    format!(
                        "<span class=\"{class}\">{} for {}</span>",
                        lock(&w.lock),
                        millis(w.waited_ms as f64)
                    )
                }
                None => "<span class=\"muted\">–</span>".to_string(),
            };
            vec![
                format!("<span class=\"txn\">txn {}</span>", t.txn),
                t.phase.to_string(),
                escape(t.what),
                escape(&format!("{:?}", t.priority).to_lowercase()),
                millis(t.age_ms as f64),
                held,
                waiting,
            ]
        })
        .collect();
    let oldest_line = match graph.oldest_waiter {
        Some((txn, ms)) => format!(
            "<p class=\"warning\">Oldest waiter: <strong>txn {txn}</strong>, waiting {}.</p>",
            millis(ms as f64)
        ),
        None => String::new(),
    };
    format!(
        "<h1>Transactions</h1>{}<h2>Wait-for graph</h2>{oldest_line}{}",
        table(
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
        ),
        wait_for::svg(&graph)
    )
}
