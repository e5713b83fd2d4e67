//! HTML building blocks of the admin UI: escaping (every value shown goes through [`escape`]),
//! the page frame with its navigation, and the few formats the pages share (durations, ages,
//! condition-status classes). No inline script or style: the Content-Security-Policy forbids
//! them, the look comes from `/ui/admin.css` and live refresh from `/ui/admin.js`.

use std::fmt::Write as _;

/// The Content-Security-Policy of every admin page: only the operator's own script, stylesheet
/// and fetches; no frames, forms, plugins or inline code.
pub const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/// Escapes text for HTML element content and attribute values.
pub(crate) fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            _ => out.push(c),
        }
    }
    out
}

/// Percent-encodes a path segment (names are DNS labels, but nothing is assumed).
pub(crate) fn path_segment(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(b));
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
    out
}

/// The pages of the navigation bar: (path, title).
pub(crate) const NAV: [(&str, &str); 3] = [
    ("/", "Cinders"),
    ("/ui/transactions", "Transactions"),
    ("/ui/devices", "Devices"),
];

/// A whole page: head (stylesheet, script), navigation with `active` marked, and `main` (the
/// part live refresh replaces, fetched from `refresh` with `?fragment=main`).
pub(crate) fn document(title: &str, active: &str, refresh: &str, main: &str) -> String {
    let mut nav = String::new();
    for (path, name) in NAV {
        let class = if path == active {
            " class=\"active\""
        } else {
            ""
        };
        let _ = write!(nav, "<a href=\"{path}\"{class}>{name}</a>");
    }
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
<title>{title} · cinder-operator</title>\
<link rel=\"stylesheet\" href=\"/ui/admin.css\"><script src=\"/ui/admin.js\" defer></script></head>\
<body><header><span class=\"brand\">cinder-operator</span><nav>{nav}</nav>\
<span id=\"refresh-status\" class=\"muted\">live</span></header>\
<main id=\"main\" data-refresh=\"{refresh}\">{main}</main>\
<footer class=\"muted\">JSON: <a href=\"/pipelines\">/pipelines</a> <a href=\"/transactions\">/transactions</a> \
<a href=\"/devices\">/devices</a> <a href=\"/actors\">/actors</a></footer></body></html>\n",
        title = escape(title),
        refresh = escape(refresh),
    )
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

/// A table from a header row and rows of already-escaped cells; `empty` when there are no rows.
pub(crate) fn table(class: &str, header: &[&str], rows: &[Vec<String>], empty: &str) -> String {
    if rows.is_empty() {
        return format!("<p class=\"empty\">{}</p>", escape(empty));
    }
    let mut out = format!("<table class=\"{class}\"><thead><tr>");
    for h in header {
        let _ = write!(out, "<th>{}</th>", escape(h));
    }
    out.push_str("</tr></thead><tbody>");
    for row in rows {
        out.push_str("<tr>");
        for cell in row {
            let _ = write!(out, "<td>{cell}</td>");
        }
        out.push_str("</tr>");
    }
    out.push_str("</tbody></table>");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_is_escaped() {
        assert_eq!(
            escape("<script>alert('x')</script> & \"q\""),
            "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; &amp; &quot;q&quot;"
        );
        assert_eq!(path_segment("a b/c"), "a%20b%2Fc");
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
        let page = document("x<y", "/", "/", "<p>body</p>");
        assert!(page.contains("x&lt;y"), "{page}");
        assert!(!page.contains("<script>"), "{page}");
        assert!(!page.contains("style="), "{page}");
        assert!(
            page.contains("<a href=\"/\" class=\"active\">Cinders</a>"),
            "{page}"
        );
    }
}
