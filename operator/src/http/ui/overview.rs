//! The overview page (`/`): one row per Cinder with Ready, the step it is on or waits in, the
//! last pass's outcome and duration, its requeue, and a link to its detail page.

use super::html::{escape, millis, path_segment, seconds, status_class, table};
use super::model::CinderView;

/// The `main` of the overview.
pub(crate) fn render(cinders: &[CinderView], error: Option<&str>) -> String {
    let mut out = String::from("<h1>Cinders</h1>");
    if let Some(e) = error {
        out.push_str(&format!(
            "<p class=\"warning\">Cannot list the Cinders: {}</p>",
            escape(e)
        ));
    }
    let rows: Vec<Vec<String>> = cinders.iter().map(row).collect();
    out.push_str(&table(
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
    ));
    out
}

fn row(c: &CinderView) -> Vec<String> {
    let (status, reason, message) = c.ready();
    let link = format!(
        "<a class=\"cinder\" href=\"/ui/cinders/{}/{}\">{}/{}</a>",
        path_segment(&c.namespace),
        path_segment(&c.name),
        escape(&c.namespace),
        escape(&c.name)
    );
    let ready = format!(
        "<span class=\"badge {}\" title=\"{}\">{} <small>{}</small></span>",
        status_class(&status),
        escape(&message),
        escape(&status),
        escape(&reason)
    );
    let step = match c.focus() {
        Some((what, reason)) if reason.is_empty() => {
            format!("<span class=\"step running\">{}</span>", escape(&what))
        }
        Some((what, reason)) => format!(
            "<span class=\"step\">{}</span> <small>{}</small>",
            escape(&what),
            escape(&reason)
        ),
        None => "<span class=\"muted\">all steps True</span>".to_string(),
    };
    let p = &c.pipeline;
    vec![
        link,
        ready,
        step,
        escape(p.last_outcome.as_deref().unwrap_or("no pass yet")),
        p.last_pass_duration_ms
            .map_or_else(|| "–".to_string(), |ms| millis(ms as f64)),
        escape(&seconds(p.last_requeue_seconds)),
        p.passes.to_string(),
        escape(p.last_pass_at.as_deref().unwrap_or("–")),
    ]
}
