//! Small readers of stored JSON objects that several parts of the simulator share.

use serde_json::Value;

/// The strings of a JSON array (`v` missing or not an array: none; non-strings are skipped).
pub fn strings(v: Option<&Value>) -> Vec<String> {
    v.and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}
