//! The overview page (`/`): one row per Cinder with Ready, the step it is on or waits in, the
//! last pass's outcome and duration, its requeue, and a link to its detail page.

use super::html::{cinder_path, millis, seconds, status_class, table};
use super::model::CinderView;
use maud::{Markup, html};

/// The `main` of the overview.
pub(crate) fn render(cinders: &[CinderView], error: Option<&str>) -> Markup {
    let rows: Vec<Vec<Markup>> = cinders.iter().map(row).collect();
    html! {
        h1 { "Cinders" }
        @if let Some(e) = error {
            p class="warning" { "Cannot list the Cinders: " (e) }
        }
        (table(
            "overview",
            &[
                "Cinder",
                "Ready",
                "Step",
                "Last pass",
                "Duration",
                "Requeue",
                "Passes",
                "Ended at",
            ],
            &rows,
            "No Cinder yet.",
        ))
    }
}

fn row(c: &CinderView) -> Vec<Markup> {
    let (status, reason, message) = c.ready();
    let p = &c.pipeline;
    vec![
        html! {
            a class="cinder" href=(cinder_path(&c.namespace, &c.name)) {
                (c.namespace) "/" (c.name)
            }
        },
        html! {
            span class={ "badge " (status_class(&status)) } title=(message) {
                (status) " " small { (reason) }
            }
        },
        match c.focus() {
            Some((what, reason)) if reason.is_empty() => {
                html! { span class="step running" { (what) } }
            }
            Some((what, reason)) => html! { span class="step" { (what) } " " small { (reason) } },
            None => html! { span class="muted" { "all steps True" } },
        },
        html! { (p.last_outcome.as_deref().unwrap_or("no pass yet")) },
        html! { (p.last_pass_duration_ms.map_or_else(|| "–".to_string(), |ms| millis(ms as f64))) },
        html! { (seconds(p.last_requeue_seconds)) },
        html! { (p.passes) },
        html! { (p.last_pass_at.as_deref().unwrap_or("–")) },
    ]
}
