//! HTML building blocks of the admin UI: the page frame with its navigation, tables, and the few
//! formats the pages share (durations, ages, condition-status classes). Markup is written with
//! maud, which escapes every value spliced into it; path segments of links are percent-encoded.
//! No inline script or style: the Content-Security-Policy forbids them, the look comes from
//! `/ui/admin.css` and live refresh from `/ui/admin.js`.

use maud::{DOCTYPE, Markup, html};
use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};

/// The Content-Security-Policy of every admin page: only the operator's own script, stylesheet
/// and fetches; no frames, forms, plugins or inline code.
pub const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/// What a path segment keeps as it is (RFC 3986 unreserved); everything else is encoded (names
/// are DNS labels, but nothing is assumed).
const SEGMENT: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// The detail page of the Cinder `namespace/name`.
pub(crate) fn cinder_path(namespace: &str, name: &str) -> String {
    format!(
        "/ui/cinders/{}/{}",
        utf8_percent_encode(namespace, SEGMENT),
        utf8_percent_encode(name, SEGMENT)
    )
}

/// The pages of the navigation bar: (path, title).
pub(crate) const NAV: [(&str, &str); 3] = [
    ("/", "Cinders"),
    ("/ui/transactions", "Transactions"),
    ("/ui/devices", "Devices"),
];

/// A whole page: head (stylesheet, script), navigation with `active` marked, and `main` (the
/// part live refresh replaces, fetched from `refresh` with `?fragment=main`).
pub(crate) fn document(title: &str, active: &str, refresh: &str, main: Markup) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { (title) " · cinder-operator" }
                link rel="stylesheet" href="/ui/admin.css";
                script src="/ui/admin.js" defer {}
            }
            body {
                header {
                    span class="brand" { "cinder-operator" }
                    nav {
                        @for (path, name) in NAV {
                            a href=(path) class=[(path == active).then_some("active")] { (name) }
                        }
                    }
                    span id="refresh-status" class="muted" { "live" }
                }
                main id="main" data-refresh=(refresh) { (main) }
                footer class="muted" {
                    "JSON: "
                    a href="/pipelines" { "/pipelines" } " "
                    a href="/transactions" { "/transactions" } " "
                    a href="/devices" { "/devices" } " "
                    a href="/actors" { "/actors" }
                }
            }
        }
    }
}

/// The CSS class of a condition status (`True` / `False` / anything else).
pub(crate) fn status_class(status: &str) -> &'static str {
    match status {
        "True" => "ok",
        "False" => "bad",
        _ => "unknown",
    }
}

/// Milliseconds as `850 ms`, `12.3 s`, `4 min 05 s`, `2 h 10 min`.
pub(crate) fn millis(ms: f64) -> String {
    if !ms.is_finite() || ms < 0.0 {
        return "–".to_string();
    }
    if ms < 1000.0 {
        return format!("{ms:.0} ms");
    }
    let s = ms / 1000.0;
    if s < 60.0 {
        return format!("{s:.1} s");
    }
    // Whole seconds from here on (the value is finite, non-negative and at least 60).
    let total = s.round() as u64;
    if total < 3600 {
        return format!("{} min {:02} s", total / 60, total % 60);
    }
    format!("{} h {:02} min", total / 3600, (total % 3600) / 60)
}

/// Seconds (a requeue) as [`millis`] does, `none` for no value.
pub(crate) fn seconds(s: Option<f64>) -> String {
    s.map_or_else(|| "none".to_string(), |s| millis(s * 1000.0))
}

/// A table from a header row and rows of cells; `empty` when there are no rows.
pub(crate) fn table(class: &str, header: &[&str], rows: &[Vec<Markup>], empty: &str) -> Markup {
    html! {
        @if rows.is_empty() {
            p class="empty" { (empty) }
        } @else {
            table class=(class) {
                thead { tr { @for h in header { th { (h) } } } }
                tbody {
                    @for row in rows {
                        tr { @for cell in row { td { (cell) } } }
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_escaped_and_path_segments_encoded() {
        let hostile = "<script>alert('x')</script> & \"q\"";
        let rows = vec![vec![html! { (hostile) }]];
        let t = table("t", &[hostile], &rows, "").into_string();
        assert!(
            t.contains("<th>&lt;script&gt;alert('x')&lt;/script&gt; &amp; &quot;q&quot;</th>"),
            "{t}"
        );
        assert!(
            t.contains("<td>&lt;script&gt;alert('x')&lt;/script&gt; &amp; &quot;q&quot;</td>"),
            "{t}"
        );
        assert!(!t.contains("<script>"), "{t}");
        let empty = table("t", &[], &[], "none <yet>").into_string();
        assert_eq!(empty, "<p class=\"empty\">none &lt;yet&gt;</p>");
        assert_eq!(cinder_path("a b/c", "x~y"), "/ui/cinders/a%20b%2Fc/x~y");
    }

    #[test]
    fn durations_read_naturally() {
        assert_eq!(millis(850.0), "850 ms");
        assert_eq!(millis(12_345.0), "12.3 s");
        assert_eq!(millis(245_000.0), "4 min 05 s");
        assert_eq!(millis(7_800_000.0), "2 h 10 min");
        assert_eq!(millis(f64::NAN), "–");
        assert_eq!(seconds(None), "none");
        assert_eq!(seconds(Some(30.0)), "30.0 s");
    }

    #[test]
    fn the_document_has_no_inline_code() {
        let page = document("x<y", "/", "/\"a", html! { p { "body" } }).into_string();
        assert!(
            page.contains("<title>x&lt;y · cinder-operator</title>"),
            "{page}"
        );
        assert!(page.contains("data-refresh=\"/&quot;a\""), "{page}");
        assert!(!page.contains("<script>"), "{page}");
        assert!(!page.contains("style="), "{page}");
        assert!(
            page.contains("<a href=\"/\" class=\"active\">Cinders</a>"),
            "{page}"
        );
        assert!(
            page.contains("<a href=\"/ui/devices\">Devices</a>"),
            "{page}"
        );
        assert!(page.contains("<main id=\"main\" data-refresh=\"/&quot;a\"><p>body</p></main>"));
    }
}
