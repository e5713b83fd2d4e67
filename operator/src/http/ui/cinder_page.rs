//! A Cinder's detail page (`/ui/cinders/{namespace}/{name}`): its labels, the lane and the group
//! as a row of steps coloured by condition status (reason and message under each), its
//! conditions, the pass history (the last passes with each step's duration), and its devices and
//! locks.

use super::html::{millis, seconds, status_class, table};
use super::model::{CinderView, StepState};
use cinder_actors::CoordinatorSnapshot;
use cinder_lease::DevicesSnapshot;
use maud::{Markup, html};

/// The `main` of the page.
pub(crate) fn render(
    c: &CinderView,
    coordinator: Option<&CoordinatorSnapshot>,
    devices: &DevicesSnapshot,
) -> Markup {
    let (status, reason, message) = c.ready();
    html! {
        h1 {
            "Cinder " (c.namespace) "/" (c.name) " "
            span class={ "badge " (status_class(&status)) } {
                "Ready " (status) " " small { (reason) }
            }
        }
        p class="muted" { (message) }
        p class="release" {
            @match (&c.upgrade_phase, &c.target_release) {
                (Some(phase), Some(target)) => {
                    "upgrading " (c.installed_release.as_deref().unwrap_or("?")) " → " (target)
                    ": phase " strong { (phase) }
                }
                _ => {
                    "installed release " (c.installed_release.as_deref().unwrap_or("none yet"))
                }
            }
        }
        (labels(c))
        (steps(&c.steps()))
        (conditions(c))
        (history(c))
        (devices_and_locks(c, coordinator, devices))
    }
}

/// The Cinder's labels as `key=value` chips (nothing when it has none).
fn labels(c: &CinderView) -> Markup {
    html! {
        @if !c.labels.is_empty() {
            p class="labels" {
                @for (key, value) in &c.labels {
                    span class="chip" { (key) "=" (value) }
                }
            }
        }
    }
}

fn step_box(s: &StepState) -> Markup {
    html! {
        li class={ "stepbox " (status_class(&s.status)) @if s.running { " running" } }
            data-step=(s.step) title=(s.message) {
            strong { (s.step) }
            span class="cond" { (s.condition_type) }
            span class="reason" { (s.reason) }
            @if let Some(d) = s.duration_ms {
                span class="duration" { (millis(d)) }
            }
            span class="message" { (s.message) }
        }
    }
}

fn steps(states: &[StepState]) -> Markup {
    let (group, lane): (Vec<&StepState>, Vec<&StepState>) = states.iter().partition(|s| s.in_group);
    html! {
        h2 { "Steps" }
        p class="muted" {
            "The lane runs in order and stops at the first step that asks to wait; the group runs in parallel once the lane completes."
        }
        ol class="lane" { @for s in lane { (step_box(s)) } }
        ul class="group" { @for s in group { (step_box(s)) } }
    }
}

fn conditions(c: &CinderView) -> Markup {
    let rows: Vec<Vec<Markup>> = c
        .conditions
        .iter()
        .map(|k| {
            vec![
                html! { (k.type_) },
                html! { span class={ "badge " (status_class(&k.status)) } { (k.status) } },
                html! { (k.reason) },
                html! { (k.message) },
                html! { (k.last_transition_time.0.to_string()) },
            ]
        })
        .collect();
    html! {
        h2 { "Conditions" }
        (table(
            "conditions",
            &["Type", "Status", "Reason", "Message", "Since"],
            &rows,
            "No status yet.",
        ))
    }
}

fn history(c: &CinderView) -> Markup {
    let rows: Vec<Vec<Markup>> = c
        .pipeline
        .history
        .iter()
        .map(|p| {
            vec![
                html! { (p.started_at) },
                html! { (millis(p.duration_ms as f64)) },
                html! { (p.outcome) },
                html! { (seconds(p.requeue_seconds)) },
                html! {
                    @for s in &p.steps {
                        span class={ "chip " (status_class(&s.status)) }
                            title={ (s.status) " " (s.reason) ": " (s.message) } {
                            (s.step) " " (millis(s.duration_ms as f64))
                        }
                    }
                },
            ]
        })
        .collect();
    html! {
        h2 { "Pass history" }
        (table(
            "history",
            &["Started", "Duration", "Outcome", "Requeue", "Steps"],
            &rows,
            "No finished pass recorded yet.",
        ))
    }
}

fn devices_and_locks(
    c: &CinderView,
    coordinator: Option<&CoordinatorSnapshot>,
    devices: &DevicesSnapshot,
) -> Markup {
    let mine = |id: &str| {
        c.database_device.as_deref() == Some(id)
            || id.contains(&format!("{}/{}", c.namespace, c.name))
    };
    let device_rows: Vec<Vec<Markup>> = devices
        .devices
        .iter()
        .filter(|d| mine(&d.device))
        .map(|d| {
            vec![
                html! { a href="/ui/devices" { (d.device) } },
                html! { (super::devices_page::holder_text(devices, d)) },
                html! { (d.waiters.len()) },
            ]
        })
        .collect();
    let lock_rows: Vec<Vec<Markup>> = coordinator
        .map(|s| {
            s.resources
                .iter()
                .filter(|r| {
                    (!r.holders.is_empty() || !r.waiters.is_empty())
                        && (mine(&r.id) || c.backends.iter().any(|b| r.id.ends_with(b.as_str())))
                })
                .map(|r| {
                    vec![
                        html! { (r.kind) "/" (r.id) },
                        html! { (format!("{:?}", r.holders)) },
                        html! { (r.waiters.len()) },
                    ]
                })
                .collect()
        })
        .unwrap_or_default();
    html! {
        h2 { "Devices" }
        (table(
            "devices",
            &["Device", "Lease holder", "Waiters"],
            &device_rows,
            "No device of this Cinder is locked or awaited.",
        ))
        h2 { "Locks" }
        (table(
            "locks",
            &["Resource", "Held by transactions", "Waiters"],
            &lock_rows,
            "No lock of this Cinder is held or awaited.",
        ))
    }
}
