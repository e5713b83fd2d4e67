//! The admin endpoint's HTML view: the JSON views rendered as plain, escaped HTML tables (an
//! array of objects becomes a table with one column per key, an object a two-column table,
//! nested values nested tables). No scripts, no styles beyond a border.

use serde_json::Value;

/// Escapes text for HTML element content and attribute values.
pub fn escape(text: &str) -> String {
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

/// Nesting beyond this depth is shown as compact JSON text.
const MAX_DEPTH: usize = 6;

/// A JSON value as HTML.
pub fn render_value(value: &Value) -> String {
    render(value, 0)
}

fn render(value: &Value, depth: usize) -> String {
    match value {
        Value::Null => String::new(),
        Value::String(s) => escape(s),
        Value::Bool(_) | Value::Number(_) => escape(&value.to_string()),
        _ if depth >= MAX_DEPTH => format!("<code>{}</code>", escape(&value.to_string())),
        Value::Array(items) if items.is_empty() => "<em>none</em>".to_string(),
        Value::Array(items) if items.iter().all(Value::is_object) => {
            let mut columns: Vec<&str> = Vec::new();
            for item in items {
                if let Value::Object(map) = item {
                    for key in map.keys() {
                        if !columns.contains(&key.as_str()) {
                            columns.push(key);
                        }
                    }
                }
            }
            let mut out = String::from("<table border=\"1\"><tr>");
            for c in &columns {
                out.push_str(&format!("<th>{}</th>", escape(c)));
            }
            out.push_str("</tr>");
            for item in items {
                out.push_str("<tr>");
                for c in &columns {
                    let cell = item
                        .get(*c)
                        .map(|v| render(v, depth + 1))
                        .unwrap_or_default();
                    out.push_str(&format!("<td>{cell}</td>"));
                }
                out.push_str("</tr>");
            }
            out.push_str("</table>");
            out
        }
        Value::Array(items) => {
            let mut out = String::from("<ul>");
            for item in items {
                out.push_str(&format!("<li>{}</li>", render(item, depth + 1)));
            }
            out.push_str("</ul>");
            out
        }
        Value::Object(map) => {
            let mut out = String::from("<table border=\"1\">");
            for (key, v) in map {
                out.push_str(&format!(
                    "<tr><th>{}</th><td>{}</td></tr>",
                    escape(key),
                    render(v, depth + 1)
                ));
            }
            out.push_str("</table>");
            out
        }
    }
}

/// The whole page: one section per `(title, JSON path, value)`.
pub fn page(sections: &[(&str, &str, &Value)]) -> String {
    let mut out = String::from(
        "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>cinder-operator admin</title></head><body>\n<h1>cinder-operator admin</h1>\n",
    );
    for (title, path, value) in sections {
        out.push_str(&format!(
            "<h2>{} <small>(<a href=\"{}\">{}</a>)</small></h2>\n{}\n",
            escape(title),
            escape(path),
            escape(path),
            render_value(value)
        ));
    }
    out.push_str("</body></html>\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn text_is_escaped() {
        let html = render_value(&json!([{"id": "<script>alert('x')</script>", "n": 1}]));
        assert!(!html.contains("<script>"), "{html}");
        assert!(
            html.contains("&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;"),
            "{html}"
        );
        assert!(
            html.contains("<th>id</th>") && html.contains("<td>1</td>"),
            "{html}"
        );
    }

    #[test]
    fn objects_and_nested_arrays_render_as_tables() {
        let html = render_value(
            &json!({"devices": [{"device": "d1", "waiters": {"high": []}}], "identity": "me&you"}),
        );
        assert!(html.contains("<th>devices</th>"), "{html}");
        assert!(html.contains("<td>d1</td>"), "{html}");
        assert!(html.contains("me&amp;you"), "{html}");
        assert!(html.contains("<em>none</em>"), "{html}");
    }

    #[test]
    fn deep_values_fall_back_to_escaped_json() {
        let mut v = json!("<leaf>");
        for _ in 0..10 {
            v = json!({ "k": v });
        }
        let html = render_value(&v);
        assert!(html.contains("<code>"), "{html}");
        assert!(!html.contains("<leaf>"), "{html}");
    }
}
