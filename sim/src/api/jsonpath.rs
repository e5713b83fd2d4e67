//! A small JSONPath evaluator for printer columns: `.a.b`, `.a[0]`, `.a[*]`, `.a[-1]` and
//! filters `.conditions[?(@.type=="Ready")].status` (== and != on strings, numbers, booleans).

use serde_json::Value;

#[derive(Debug, PartialEq)]
enum Step {
    Field(String),
    Index(i64),
    All,
    Filter {
        key: Vec<String>,
        eq: bool,
        value: String,
    },
}

fn parse(path: &str) -> Option<Vec<Step>> {
    let path = path
        .trim()
        .trim_start_matches('{')
        .trim_end_matches('}')
        .trim();
    let path = path.strip_prefix('$').unwrap_or(path);
    let chars: Vec<char> = path.chars().collect();
    let mut steps = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        match chars[i] {
            '.' => {
                i += 1;
                let start = i;
                while i < chars.len() && chars[i] != '.' && chars[i] != '[' {
                    i += 1;
                }
                let name: String = chars[start..i].iter().collect();
                if !name.is_empty() {
                    steps.push(Step::Field(name));
                }
            }
            '[' => {
                let start = i + 1;
                let mut depth = 0;
                while i < chars.len() {
                    match chars[i] {
                        '[' => depth += 1,
                        ']' => {
                            depth -= 1;
                            if depth == 0 {
                                break;
                            }
                        }
                        _ => {}
                    }
                    i += 1;
                }
                let inner: String = chars[start..i.min(chars.len())].iter().collect();
                i += 1;
                let inner = inner.trim();
                if inner == "*" {
                    steps.push(Step::All);
                } else if let Some(f) = inner.strip_prefix("?(").and_then(|f| f.strip_suffix(')')) {
                    let (lhs, eq, rhs) = if let Some((l, r)) = f.split_once("!=") {
                        (l, false, r)
                    } else {
                        let (l, r) = f.split_once("==")?;
                        (l, true, r)
                    };
                    let key = lhs
                        .trim()
                        .strip_prefix("@.")?
                        .split('.')
                        .map(str::to_string)
                        .collect();
                    let value = rhs.trim().trim_matches('"').trim_matches('\'').to_string();
                    steps.push(Step::Filter { key, eq, value });
                } else if let Some(key) =
                    inner.strip_prefix('\'').and_then(|k| k.strip_suffix('\''))
                {
                    steps.push(Step::Field(key.to_string()));
                } else {
                    steps.push(Step::Index(inner.parse().ok()?));
                }
            }
            _ => {
                let start = i;
                while i < chars.len() && chars[i] != '.' && chars[i] != '[' {
                    i += 1;
                }
                steps.push(Step::Field(chars[start..i].iter().collect()));
            }
        }
    }
    Some(steps)
}

fn scalar(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// Every value `path` selects in `obj` (empty when the path is invalid or selects nothing).
pub fn eval<'a>(obj: &'a Value, path: &str) -> Vec<&'a Value> {
    let Some(steps) = parse(path) else {
        return Vec::new();
    };
    let mut cur = vec![obj];
    for step in &steps {
        let mut next = Vec::new();
        for v in cur {
            match step {
                Step::Field(f) => next.extend(v.get(f)),
                Step::Index(i) => {
                    if let Some(a) = v.as_array() {
                        let idx = if *i < 0 { a.len() as i64 + i } else { *i };
                        if idx >= 0 {
                            next.extend(a.get(idx as usize));
                        }
                    }
                }
                Step::All => match v {
                    Value::Array(a) => next.extend(a.iter()),
                    Value::Object(m) => next.extend(m.values()),
                    _ => {}
                },
                Step::Filter { key, eq, value } => {
                    if let Some(a) = v.as_array() {
                        for item in a {
                            let mut field = Some(item);
                            for k in key {
                                field = field.and_then(|f| f.get(k));
                            }
                            if field.is_some_and(|f| (scalar(f) == *value) == *eq) {
                                next.push(item);
                            }
                        }
                    }
                }
            }
        }
        cur = next;
    }
    cur
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn paths_and_filters() {
        let o = json!({"spec": {"r": 3, "l": [1, 2]}, "status": {"conditions": [{"type": "A", "status": "False"}, {"type": "Ready", "status": "True"}]}});
        assert_eq!(eval(&o, ".spec.r"), vec![&json!(3)]);
        assert_eq!(eval(&o, ".spec.l[1]"), vec![&json!(2)]);
        assert_eq!(eval(&o, ".spec.l[-1]"), vec![&json!(2)]);
        assert_eq!(
            eval(&o, ".status.conditions[?(@.type==\"Ready\")].status"),
            vec![&json!("True")]
        );
        assert_eq!(eval(&o, "{.spec.l[*]}").len(), 2);
        assert!(eval(&o, ".nothing.here").is_empty());
    }
}
