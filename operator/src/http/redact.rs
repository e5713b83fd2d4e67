//! Redaction of what the admin endpoint shows: values under keys named like secret material
//! (password, token, secret, key, …), the `data` of anything shaped like a Secret, and the
//! password of `scheme://user:password@host` URLs inside any string.

use serde_json::Value;

/// What a redacted value is replaced with.
pub(crate) const REDACTED: &str = "<redacted>";

/// Key suffixes (lowercase, `_`/`-` removed) whose values are secret material.
const SENSITIVE_SUFFIXES: [&str; 8] = [
    "password",
    "passwd",
    "token",
    "secret",
    "key",
    "credentials",
    "dsn",
    "transporturl",
];

/// Whether the value under `key` must not be shown. References to secrets (`secretRef`,
/// `keySecretRef`) end in `ref` and stay visible: they name an object, they hold no value.
pub(crate) fn is_sensitive_key(key: &str) -> bool {
    let normalized: String = key
        .chars()
        .filter(|c| *c != '_' && *c != '-')
        .flat_map(char::to_lowercase)
        .collect();
    SENSITIVE_SUFFIXES.iter().any(|s| normalized.ends_with(s))
}

/// Redacts `value` in place.
pub(crate) fn redact(value: &mut Value) {
    match value {
        Value::Object(map) => {
            let secret_shaped = map.get("kind").and_then(Value::as_str) == Some("Secret");
            for (key, inner) in map.iter_mut() {
                let secret_data = secret_shaped && (key == "data" || key == "stringData");
                if (is_sensitive_key(key) && !inner.is_null()) || secret_data {
                    *inner = Value::String(REDACTED.to_string());
                } else {
                    redact(inner);
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(redact),
        Value::String(s) => {
            if let Some(clean) = redact_url_passwords(s) {
                *s = clean;
            }
        }
        _ => {}
    }
}

/// A redacted copy of `value`.
pub(crate) fn redacted(mut value: Value) -> Value {
    redact(&mut value);
    value
}

/// `s` with the password of every `scheme://user:password@…` replaced; `None` when there is
/// none.
pub(crate) fn redact_url_passwords(s: &str) -> Option<String> {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    let mut changed = false;
    while let Some(pos) = rest.find("://") {
        let (head, tail) = rest.split_at(pos + 3);
        out.push_str(head);
        let authority_end = tail
            .find(|c: char| c == '/' || c == '?' || c == '#' || c.is_whitespace())
            .unwrap_or(tail.len());
        let authority = &tail[..authority_end];
        match authority.rfind('@') {
            Some(at) => {
                let userinfo = &authority[..at];
                // Several hosts (rabbit://u:p@h1,u:p@h2) are handled by the loop below on
                // each `user:password@` group.
                out.push_str(&redact_userinfo_groups(userinfo));
                out.push_str(&authority[at..]);
                changed = true;
            }
            None => out.push_str(authority),
        }
        rest = &tail[authority_end..];
    }
    out.push_str(rest);
    changed.then_some(out)
}

/// `user:password` → `user:<redacted>`; comma-separated groups (`u:p@h1,u:p`) each redacted.
fn redact_userinfo_groups(userinfo: &str) -> String {
    userinfo
        .split(',')
        .map(|group| match group.rfind('@') {
            // `u:p@h1` (a previous host followed by the next group's userinfo): keep the host.
            Some(at) => format!("{}{}", redact_one_userinfo(&group[..at]), &group[at..]),
            None => {
                if group.contains(':') || group.contains('@') {
                    redact_one_userinfo(group)
                } else {
                    group.to_string()
                }
            }
        })
        .collect::<Vec<_>>()
        .join(",")
}

fn redact_one_userinfo(userinfo: &str) -> String {
    match userinfo.split_once(':') {
        Some((user, _)) => format!("{user}:{REDACTED}"),
        None => userinfo.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn keys_named_like_secrets_are_redacted_and_references_kept() {
        let v = redacted(json!({
            "name": "ceph",
            "password": "hunter2",
            "db_password": "x",
            "apiToken": "t",
            "key": "AQB",
            "clientSecret": "s",
            "keySecretRef": {"name": "ceph-key", "key": "keyring"},
            "secretRef": {"name": "db"},
            "nested": [{"token": "t2", "ok": 1}],
            "missing": {"password": null}
        }));
        assert_eq!(v["name"], "ceph");
        assert_eq!(v["password"], REDACTED);
        assert_eq!(v["db_password"], REDACTED);
        assert_eq!(v["apiToken"], REDACTED);
        assert_eq!(v["key"], REDACTED);
        assert_eq!(v["clientSecret"], REDACTED);
        assert_eq!(v["keySecretRef"]["name"], "ceph-key");
        assert_eq!(v["keySecretRef"]["key"], REDACTED);
        assert_eq!(v["secretRef"]["name"], "db");
        assert_eq!(v["nested"][0]["token"], REDACTED);
        assert_eq!(v["nested"][0]["ok"], 1);
        assert!(v["missing"]["password"].is_null());
    }

    #[test]
    fn secret_shaped_objects_lose_their_data() {
        let v = redacted(json!({"kind": "Secret", "metadata": {"name": "db"},
            "data": {"username": "dXNlcg=="}, "stringData": {"user": "u"}}));
        assert_eq!(v["data"], REDACTED);
        assert_eq!(v["stringData"], REDACTED);
        assert_eq!(v["metadata"]["name"], "db");
    }

    #[test]
    fn url_passwords_are_redacted_in_strings() {
        let v = redacted(json!({
            "dsn_like": "mysql+pymysql://cinder:s3cr3t@mariadb.openstack.svc:3306/cinder",
            "rabbit": "rabbit://u1:p1@h1:5672,u2:p2@h2:5672/vhost",
            "plain": "http://example.org/path",
            "text": "see https://user@host/x"
        }));
        let text = v.to_string();
        assert!(!text.contains("s3cr3t"), "{text}");
        assert!(!text.contains("p1") && !text.contains("p2"), "{text}");
        assert_eq!(
            v["dsn_like"],
            format!("mysql+pymysql://cinder:{REDACTED}@mariadb.openstack.svc:3306/cinder")
        );
        assert_eq!(v["plain"], "http://example.org/path");
        assert_eq!(v["text"], "see https://user@host/x");
    }
}
