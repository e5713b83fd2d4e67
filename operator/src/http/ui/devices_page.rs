//! The devices page (`/ui/devices`): per device its Lease holder (this replica or which other),
//! the Lease's renewals and transitions, hand-overs, and the waiters by priority with their ages.

use super::html::{millis, table};
use cinder_lease::DevicesSnapshot;
use cinder_lease::inspection::{DeviceSnapshot, WaiterSnapshot};
use maud::{Markup, html};

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

fn waiters(label: &str, list: &[WaiterSnapshot]) -> Markup {
    let items: Vec<String> = list
        .iter()
        .map(|w| format!("txn {} ({})", w.txn, millis(w.waited_ms as f64)))
        .collect();
    html! {
        @if !list.is_empty() {
            div class="prio" { strong { (label) } ": " (items.join(", ")) }
        }
    }
}

fn row(snapshot: &DevicesSnapshot, d: &DeviceSnapshot) -> Vec<Markup> {
    let class = if d.lease_held_here { "ok" } else { "unknown" };
    let queued = !(d.waiters.high.is_empty()
        && d.waiters.default.is_empty()
        && d.waiters.baseline.is_empty());
    vec![
        html! { span class="device" { (d.device) } },
        html! { (d.lease_name) },
        html! { span class={ "badge " (class) } { (holder_text(snapshot, d)) } },
        html! {
            @match &d.lease {
                Some(l) => {
                    "renewed " (l.renew_time.as_deref().unwrap_or("never")) ", "
                    (l.lease_transitions.unwrap_or(0)) " transitions, "
                    (l.lease_duration_seconds.unwrap_or(0)) " s"
                }
                None => span class="muted" { "not seen yet" },
            }
        },
        html! {
            @match &d.holder {
                Some(h) => {
                    (format!("{:?}", h.priority).to_lowercase()) " for " (millis(h.held_ms as f64))
                    @if h.lost { " " span class="bad" { "Lease lost" } }
                }
                None => span class="muted" { "none" },
            }
        },
        html! { (d.handovers) },
        html! {
            @if queued {
                (waiters("high", &d.waiters.high))
                (waiters("default", &d.waiters.default))
                (waiters("baseline", &d.waiters.baseline))
            } @else {
                span class="muted" { "none" }
            }
        },
    ]
}

/// The `main` of the page.
pub(crate) fn render(snapshot: &DevicesSnapshot) -> Markup {
    let rows: Vec<Vec<Markup>> = snapshot.devices.iter().map(|d| row(snapshot, d)).collect();
    html! {
        h1 { "Devices" }
        p class="muted" {
            "This replica: " (snapshot.identity) " · Leases in namespace " (snapshot.namespace)
        }
        (table(
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
        ))
    }
}
