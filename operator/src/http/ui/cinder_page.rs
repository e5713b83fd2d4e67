//! A Cinder's detail page (`/ui/cinders/{namespace}/{name}`): its labels, the lane and the group
//! as a row of steps coloured by condition status (reason and message under each), its
//! conditions, the pass history (the last passes with each step's duration), and its devices and
//! locks.

use super::html::{escape, millis, seconds, status_class, table};
use super::model::{CinderView, StepState};
use cinder_actors::CoordinatorSnapshot;
use cinder_lease::DevicesSnapshot;
use std::fmt::Write as _;

/// The `main` of the page.
pub(crate) fn render(
    c: &CinderView,
    coordinator: Option<&CoordinatorSnapshot>,
    devices: &DevicesSnapshot,
) -> String {
    let (status, reason, message) = c.ready();
    let mut out = format!(
        "<h1>Cinder {}/{} <span class=\"badge {}\">Ready {} <small>{}</small></span></h1><p class=\"muted\">{}</p>",
        escape(&c.namespace),
        escape(&c.name),
        status_class(&status),
        escape(&status),
        escape(&reason),
        escape(&message)
    );
    let release = match (&c.upgrade_phase, &c.target_release) {
        (Some(phase), Some(target)) => format!(
            "upgrading {} → {}: phase <strong>{}</strong>",
            escape(c.installed_release.as_deref().unwrap_or("?")),
            escape(target),
            escape(phase)
        ),
        _ => format!(
            "installed release {}",
            escape(c.installed_release.as_deref().unwrap_or("none yet"))
        ),
    };
    let _ = write!(out, "<p class=\"release\">{release}</p>");
    out.push_str(&labels(c));
    out.push_str(&steps(&c.steps()));
    out.push_str(&conditions(c));
    out.push_str(&history(c));
    out.push_str(&devices_and_locks(c, coordinator, devices));
    out
}

/// The Cinder's labels as `key=value` chips (nothing when it has none).
fn labels(c: &CinderView) -> String {
    if c.labels.is_empty() {
        return String::new();
    }
    let mut out = String::from("<p class=\"labels\">");
    for (key, value) in &c.labels {
        let _ = write!(
            out,
            "<span class=\"chip\">{}={}</span>",
            escape(key),
            escape(value)
        );
    }
    out.push_str("</p>");
    out
}

fn step_box(s: &StepState) -> String {
    let running = if s.running { " running" } else { "" };
    let duration = s
        .duration_ms
        .map(|d| format!("<span class=\"duration\">{}</span>", millis(d)))
        .unwrap_or_default();
    format!(
        "<li class=\"stepbox {}{running}\" data-step=\"{step}\" title=\"{message}\"><strong>{step}</strong>\
<span class=\"cond\">{ctype}</span><span class=\"reason\">{reason}</span>{duration}<span class=\"message\">{message}</span></li>",
        status_class(&s.status),
        step = escape(s.step),
        ctype = escape(s.condition_type),
        reason = escape(&s.reason),
        message = escape(&s.message),
    )
}

fn steps(states: &[StepState]) -> String {
    let (group, lane): (Vec<&StepState>, Vec<&StepState>) = states.iter().partition(|s| s.in_group);
    let mut out = String::from(
        "<h2>Steps</h2><p class=\"muted\">The lane runs in order and stops at the first step that asks to wait; the group runs in parallel once the lane completes.</p><ol class=\"lane\">",
    );
    for s in lane {
        out.push_str(&step_box(s));
    }
    out.push_str("</ol><ul class=\"group\">");
    for s in group {
        out.push_str(&step_box(s));
    }
    out.push_str("</ul>");
    out
}

fn conditions(c: &CinderView) -> String {
    let rows: Vec<Vec<String>> = c
        .conditions
        .iter()
        .map(|k| {
            vec![
                escape(&k.type_),
                format!(
                    "<span class=\"badge {}\">{}</span>",
                    status_class(&k.status),
                    escape(&k.status)
                ),
                escape(&k.reason),
                escape(&k.message),
                escape(&k.last_transition_time.0.to_string()),
            ]
        })
        .collect();
    format!(
        "<h2>Conditions</h2>{}",
        table(
            "conditions",
            &["Type", "Status", "Reason", "Message", "Since"],
            &rows,
            "No status yet.",
        )
    )
}

fn history(c: &CinderView) -> String {
    let rows: Vec<Vec<String>> = c
        .pipeline
        .history
        .iter()
        .map(|p| {
            let mut chips = String::new();
            for s in &p.steps {
                let _ = write!(
                    chips,
                    "<span class=\"chip {}\" title=\"{} {}: {}\">{} {}</span>",
                    status_class(&s.status),
                    escape(&s.status),
                    escape(&s.reason),
                    escape(&s.message),
                    escape(&s.step),
                    millis(s.duration_ms as f64)
                );
            }
            vec![
                escape(&p.started_at),
                millis(p.duration_ms as f64),
                escape(&p.outcome),
                escape(&seconds(p.requeue_seconds)),
                chips,
            ]
        })
        .collect();
    format!(
        "<h2>Pass history</h2>{}",
        table(
            "history",
            &["Started", "Duration", "Outcome", "Requeue", "Steps"],
            &rows,
            "No finished pass recorded yet.",
        )
    )
}

fn devices_and_locks(
    c: &CinderView,
    coordinator: Option<&CoordinatorSnapshot>,
    devices: &DevicesSnapshot,
) -> String {
    let mine = |id: &str| {
        c.database_device.as_deref() == Some(id)
            || id.contains(&format!("{}/{}", c.namespace, c.name))
    };
    let device_rows: Vec<Vec<String>> = devices
        .devices
        .iter()
        .filter(|d| mine(&d.device))
        .map(|d| {
            vec![
                format!("<a href=\"/ui/devices\">{}</a>", escape(&d.device)),
                escape(&super::devices_page::holder_text(devices, d)),
                d.waiters.len().to_string(),
            ]
        })
        .collect();
    let lock_rows: Vec<Vec<String>> = coordinator
        .map(|s| {
            s.resources
                .iter()
                .filter(|r| {
                    (!r.holders.is_empty() || !r.waiters.is_empty())
                        && (mine(&r.id) || c.backends.iter().any(|b| r.id.ends_with(b.as_str())))
                })
                .map(|r| {
                    vec![
                        escape(&format!("{}/{}", r.kind, r.id)),
                        escape(&format!("{:?}", r.holders)),
                        r.waiters.len().to_string(),
                    ]
                })
                .collect()
        })
        .unwrap_or_default();
    format!(
        "<h2>Devices</h2>{}<h2>Locks</h2>{}",
        table(
            "devices",
            &["Device", "Lease holder", "Waiters"],
            &device_rows,
            "No device of this Cinder is locked or awaited.",
        ),
        table(
            "locks",
            &["Resource", "Held by transactions", "Waiters"],
            &lock_rows,
            "No lock of this Cinder is held or awaited.",
        )
    )
}
