//! The devices page (`/ui/devices`): per device its Lease holder (this replica or which other),
//! the Lease's renewals and transitions, hand-overs, and the waiters by priority with their ages.

use super::html::{escape, millis, table};
use cinder_lease::DevicesSnapshot;
use cinder_lease::inspection::{DeviceSnapshot, WaiterSnapshot};

/// Who holds the device's Lease, in words.
pub(crate) fn holder_text(snapshot: &DevicesSnapshot, d: &DeviceSnapshot) -> String {
    if d.lease_held_here {
        return format!("this replica ({})", snapshot.identity);
    }
    match d.lease.as_ref().and_then(|l| l.holder.as_deref()) {
        Some(other) if !other.is_empty() => format!("other replica {other}"),
        _ => "nobody".to_string(),
    }
}

fn waiters(label: &str, list: &[WaiterSnapshot]) -> String {
    if list.is_empty() {
        return String::new();
    }
    let items: Vec<String> = list
        .iter()
        .map(|w| format!("txn {} ({})", w.txn, millis(w.waited_ms as f64)))
        .collect();
    format!(
        "<div class=\"prio\"><strong>{label}</strong>: {}</div>",
        escape(&items.join(", "))
    )
}

/// The `main` of the page.
pub(crate) fn render(snapshot: &DevicesSnapshot) -> String {
    let rows: Vec<Vec<String>> = snapshot
        .devices
        .iter()
        .map(|d| {
            let holder = holder_text(snapshot, d);
            let class = if d.lease_held_here { "ok" } else { "unknown" };
            let in_process = match &d.holder {
                Some(h) => format!(
                    "{} for {}{}",
                    escape(&format!("{:?}", h.priority).to_lowercase()),
                    millis(h.held_ms as f64),
                    if h.lost {
                        " <span class=\"bad\">Lease lost</span>"
                    } else {
                        ""
                    }
                ),
                None => "<span class=\"muted\">none</span>".to_string(),
            };
            let lease = d.lease.as_ref().map_or_else(
                || "<span class=\"muted\">not seen yet</span>".to_string(),
                |l| {
                    escape(&format!(
                        "renewed {}, {} transitions, {} s",
                        l.renew_time.as_deref().unwrap_or("never"),
                        l.lease_transitions.unwrap_or(0),
                        l.lease_duration_seconds.unwrap_or(0)
                    ))
                },
            );
            let queued = [
                waiters("high", &d.waiters.high),
                waiters("default", &d.waiters.default),
                waiters("baseline", &d.waiters.baseline),
            ]
            .concat();
            vec![
                format!("<span class=\"device\">{}</span>", escape(&d.device)),
                escape(&d.lease_name),
                format!("<span class=\"badge {class}\">{}</span>", escape(&holder)),
                lease,
                in_process,
                d.handovers.to_string(),
                if queued.is_empty() {
                    "<span class=\"muted\">none</span>".to_string()
                } else {
                    queued
                },
            ]
        })
        .collect();
    format!(
        "<h1>Devices</h1><p class=\"muted\">This replica: {} · Leases in namespace {}</p>{}",
        escape(&snapshot.identity),
        escape(&snapshot.namespace),
        table(
            "devices",
            &[
                "Device",
                "Lease",
                "Lease holder",
                "Lease state",
                "Held here",
                "Hand-overs",
                "Waiters by priority"
            ],
            &rows,
            "No device is locked or awaited by this replica.",
        )
    )
}
