//! What a real API server refuses in any object's metadata, with its messages: names (DNS-1123
//! subdomain, DNS-1123 label, DNS-1035 label or path segment, per kind), `generateName`, label
//! keys and values, annotation keys and their total size (256 KiB), finalizers; and the request
//! options every write shares (field manager names).

use crate::error::{ApiError, Cause};
use serde_json::Value;

/// Longest DNS-1123 subdomain (and label key prefix).
pub const SUBDOMAIN_MAX: usize = 253;
/// Longest DNS label, label value and label key name part.
pub const LABEL_MAX: usize = 63;
/// Largest total size of an object's annotations (keys plus values), in bytes.
pub const ANNOTATIONS_MAX_BYTES: usize = 256 * 1024;
/// Longest field manager name.
pub const FIELD_MANAGER_MAX: usize = 128;
/// Characters a generated name's base keeps (a 5-character random suffix follows).
const GENERATE_NAME_BASE_MAX: usize = 58;

const SUBDOMAIN_MSG: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
const LABEL_1123_MSG: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";
const LABEL_1035_MSG: &str = "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')";
const LABEL_VALUE_MSG: &str = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')";
const QUALIFIED_NAME_MSG: &str = "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";

/// Which rule a kind's object names follow.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NameRule {
    /// DNS-1123 subdomain (most kinds).
    Subdomain,
    /// DNS-1123 label (Namespaces).
    Label1123,
    /// DNS-1035 label (Services).
    Label1035,
    /// Any path segment: not "." or "..", no '/' or '%' (RBAC kinds).
    PathSegment,
}

impl NameRule {
    /// The rule for a resource of a group.
    pub fn of(group: &str, resource: &str) -> NameRule {
        match (group, resource) {
            ("", "namespaces") => NameRule::Label1123,
            ("", "services") => NameRule::Label1035,
            ("rbac.authorization.k8s.io", _) => NameRule::PathSegment,
            _ => NameRule::Subdomain,
        }
    }

    /// Why `name` breaks the rule (empty when it is valid). `prefix`: a generateName, which may
    /// end in '-'.
    pub fn problems(self, name: &str, prefix: bool) -> Vec<String> {
        let checked = if prefix && self != NameRule::PathSegment {
            name.strip_suffix('-').unwrap_or(name)
        } else {
            name
        };
        match self {
            NameRule::Subdomain => subdomain_problems(checked),
            NameRule::Label1123 => label_problems(checked, false),
            NameRule::Label1035 => label_problems(checked, true),
            NameRule::PathSegment => path_segment_problems(name, prefix),
        }
    }
}

fn is_label_char(c: char) -> bool {
    c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-'
}

fn is_1123_label(s: &str) -> bool {
    !s.is_empty() && s.chars().all(is_label_char) && !s.starts_with('-') && !s.ends_with('-')
}

/// Why `s` is not a DNS-1123 subdomain.
pub fn subdomain_problems(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    if s.len() > SUBDOMAIN_MAX {
        out.push(format!("must be no more than {SUBDOMAIN_MAX} characters"));
    }
    if !s.split('.').all(is_1123_label) {
        out.push(SUBDOMAIN_MSG.to_string());
    }
    out
}

fn label_problems(s: &str, dns1035: bool) -> Vec<String> {
    let mut out = Vec::new();
    if s.len() > LABEL_MAX {
        out.push(format!("must be no more than {LABEL_MAX} characters"));
    }
    let starts_alpha = s.chars().next().is_some_and(|c| c.is_ascii_lowercase());
    if dns1035 && !(is_1123_label(s) && starts_alpha) {
        out.push(LABEL_1035_MSG.to_string());
    } else if !dns1035 && !is_1123_label(s) {
        out.push(LABEL_1123_MSG.to_string());
    }
    out
}

fn path_segment_problems(s: &str, prefix: bool) -> Vec<String> {
    let mut out = Vec::new();
    if !prefix && (s == "." || s == "..") {
        out.push(format!("may not be '{s}'"));
    }
    for bad in ["/", "%"] {
        if s.contains(bad) {
            out.push(format!("may not contain '{bad}'"));
        }
    }
    out
}

/// Whether `s` is a DNS-1123 subdomain.
pub fn is_dns_subdomain(s: &str) -> bool {
    subdomain_problems(s).is_empty()
}

/// Whether `s` is a DNS-1123 label.
pub fn is_dns_label(s: &str) -> bool {
    label_problems(s, false).is_empty()
}

fn is_name_part(s: &str) -> bool {
    let alnum = |c: char| c.is_ascii_alphanumeric();
    !s.is_empty()
        && s.chars()
            .all(|c| alnum(c) || c == '-' || c == '_' || c == '.')
        && s.starts_with(alnum)
        && s.ends_with(alnum)
}

/// Why `key` is not a qualified name (`[prefix/]name`, as label and annotation keys are).
pub fn qualified_name_problems(key: &str) -> Vec<String> {
    let mut out = Vec::new();
    let (prefix, name) = match key.split_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, key),
    };
    if name.contains('/') {
        out.push("a qualified name must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')".to_string());
        return out;
    }
    if let Some(p) = prefix {
        if p.is_empty() {
            out.push("prefix part must be non-empty".to_string());
        } else {
            out.extend(
                subdomain_problems(p)
                    .into_iter()
                    .map(|m| format!("prefix part {m}")),
            );
        }
    }
    if name.is_empty() {
        out.push("name part must be non-empty".to_string());
    } else {
        if name.len() > LABEL_MAX {
            out.push(format!(
                "name part must be no more than {LABEL_MAX} characters"
            ));
        }
        if !is_name_part(name) {
            out.push(QUALIFIED_NAME_MSG.to_string());
        }
    }
    out
}

/// Why `value` is not a valid label value.
pub fn label_value_problems(value: &str) -> Vec<String> {
    let mut out = Vec::new();
    if value.len() > LABEL_MAX {
        out.push(format!("must be no more than {LABEL_MAX} characters"));
    }
    if !value.is_empty() && !is_name_part(value) {
        out.push(LABEL_VALUE_MSG.to_string());
    }
    out
}

/// An "Invalid value" cause, quoting the value as the real server does.
pub fn invalid_value(field: impl Into<String>, value: &str, why: &str) -> Cause {
    Cause::new(
        "FieldValueInvalid",
        field,
        format!("Invalid value: {value:?}: {why}"),
    )
}

/// A "Too long" cause for a size limit in bytes.
pub fn too_long(field: impl Into<String>, limit: usize) -> Cause {
    Cause::new(
        "FieldValueTooLong",
        field,
        format!("Too long: must have at most {limit} bytes"),
    )
}

/// The generated name for `generateName`: the base cut to 58 characters, then 5 random ones.
pub fn generated_name(base: &str, suffix: &str) -> String {
    let cut: String = base.chars().take(GENERATE_NAME_BASE_MAX).collect();
    format!("{cut}{suffix}")
}

fn string_map_causes(obj: &Value, key: &str, causes: &mut Vec<Cause>) {
    let Some(m) = obj.pointer(&format!("/metadata/{key}")) else {
        return;
    };
    let Some(map) = m.as_object() else {
        if !m.is_null() {
            causes.push(Cause::new(
                "FieldValueInvalid",
                format!("metadata.{key}"),
                "must be a map of strings",
            ));
        }
        return;
    };
    let mut total = 0;
    for (k, v) in map {
        for why in qualified_name_problems(k) {
            causes.push(invalid_value(format!("metadata.{key}"), k, &why));
        }
        let Some(s) = v.as_str() else {
            causes.push(Cause::new(
                "FieldValueInvalid",
                format!("metadata.{key}.{k}"),
                "must be a string",
            ));
            continue;
        };
        total += k.len() + s.len();
        if key == "labels" {
            for why in label_value_problems(s) {
                causes.push(invalid_value(format!("metadata.{key}"), s, &why));
            }
        }
    }
    if key == "annotations" && total > ANNOTATIONS_MAX_BYTES {
        causes.push(too_long("metadata.annotations", ANNOTATIONS_MAX_BYTES));
    }
}

/// The metadata checks every kind gets: the name by `rule`, generateName, labels, annotations,
/// finalizers.
pub fn metadata_causes(obj: &Value, rule: NameRule) -> Vec<Cause> {
    let mut causes = Vec::new();
    let name = super::meta::meta_str(obj, "name").unwrap_or_default();
    for why in rule.problems(name, false) {
        causes.push(invalid_value("metadata.name", name, &why));
    }
    if let Some(generate) = super::meta::meta_str(obj, "generateName").filter(|g| !g.is_empty()) {
        for why in rule.problems(generate, true) {
            causes.push(invalid_value("metadata.generateName", generate, &why));
        }
    }
    string_map_causes(obj, "labels", &mut causes);
    string_map_causes(obj, "annotations", &mut causes);
    match obj.pointer("/metadata/finalizers") {
        None | Some(Value::Null) => {}
        Some(Value::Array(list)) => {
            for (i, f) in list.iter().enumerate() {
                match f.as_str() {
                    Some(s) => {
                        for why in qualified_name_problems(s) {
                            causes.push(invalid_value(
                                format!("metadata.finalizers[{i}]"),
                                s,
                                &why,
                            ));
                        }
                    }
                    None => causes.push(Cause::new(
                        "FieldValueInvalid",
                        "metadata.finalizers",
                        "must be a list of strings",
                    )),
                }
            }
        }
        Some(_) => causes.push(Cause::new(
            "FieldValueInvalid",
            "metadata.finalizers",
            "must be a list of strings",
        )),
    }
    causes
}

/// The `fieldManager` option of a write: at most 128 printable characters (422 Invalid, as the
/// real server answers for its CreateOptions / UpdateOptions / PatchOptions).
pub fn check_field_manager(manager: Option<&str>, options_kind: &str) -> Result<(), ApiError> {
    let Some(m) = manager else { return Ok(()) };
    let mut causes = Vec::new();
    if m.chars().count() > FIELD_MANAGER_MAX {
        causes.push(invalid_value(
            "fieldManager",
            m,
            &format!("must be less than {FIELD_MANAGER_MAX} characters"),
        ));
    }
    if m.chars().any(|c| c.is_control()) {
        causes.push(invalid_value(
            "fieldManager",
            m,
            "may only contain printable characters",
        ));
    }
    if causes.is_empty() {
        Ok(())
    } else {
        Err(ApiError::invalid("meta.k8s.io", options_kind, "", causes))
    }
}

/// The metadata checks every kind gets ([`metadata_causes`]), as a 422 Invalid.
pub fn validate_meta(obj: &Value, kind: &str, group: &str, rule: NameRule) -> Result<(), ApiError> {
    let causes = metadata_causes(obj, rule);
    if causes.is_empty() {
        Ok(())
    } else {
        let name = super::meta::meta_str(obj, "name").unwrap_or_default();
        Err(ApiError::invalid(group, kind, name, causes))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn names_by_rule() {
        assert!(is_dns_subdomain("cinder-api.v1"));
        assert!(!is_dns_subdomain("Cinder"));
        assert!(!is_dns_subdomain("-a"));
        assert!(!is_dns_subdomain(""));
        assert!(!is_dns_subdomain(&"a".repeat(254)));
        assert!(is_dns_label("kube-system"));
        assert!(!is_dns_label("a.b"));
        assert!(!is_dns_label(&"a".repeat(64)));
        assert!(NameRule::Label1035.problems("1abc", false).len() == 1);
        assert!(NameRule::Label1123.problems("1abc", false).is_empty());
        assert!(NameRule::Subdomain.problems("web-", true).is_empty());
        assert!(!NameRule::Subdomain.problems("web-", false).is_empty());
        assert!(
            NameRule::PathSegment
                .problems("system:admin", false)
                .is_empty()
        );
        assert!(!NameRule::PathSegment.problems("a/b", false).is_empty());
    }

    #[test]
    fn label_keys_and_values() {
        assert!(qualified_name_problems("app.kubernetes.io/name").is_empty());
        assert!(!qualified_name_problems("Bad_Prefix/x").is_empty());
        assert!(!qualified_name_problems(&"k".repeat(64)).is_empty());
        assert!(!qualified_name_problems("a/b/c").is_empty());
        assert!(label_value_problems("").is_empty());
        assert!(label_value_problems("My_value.1").is_empty());
        assert_eq!(
            label_value_problems(&"v".repeat(64)),
            vec!["must be no more than 63 characters".to_string()]
        );
        assert!(!label_value_problems("-x").is_empty());
    }

    #[test]
    fn annotations_total_size() {
        let big = "x".repeat(ANNOTATIONS_MAX_BYTES);
        let obj = json!({"metadata": {"name": "a", "annotations": {"k": big}}});
        let causes = metadata_causes(&obj, NameRule::Subdomain);
        assert_eq!(causes.len(), 1);
        assert_eq!(causes[0].reason, "FieldValueTooLong");
        assert_eq!(causes[0].field, "metadata.annotations");
        let ok = json!({"metadata": {"name": "a", "annotations": {"k": "x".repeat(1000)}}});
        assert!(metadata_causes(&ok, NameRule::Subdomain).is_empty());
    }

    #[test]
    fn generate_name_is_cut() {
        let long = "a".repeat(80);
        assert_eq!(generated_name(&long, "bcdfg").len(), 63);
        assert_eq!(generated_name("web-", "bcdfg"), "web-bcdfg");
    }

    #[test]
    fn field_manager_names() {
        assert!(check_field_manager(Some("kubectl-client-side-apply"), "CreateOptions").is_ok());
        let e = check_field_manager(Some(&"m".repeat(129)), "PatchOptions").unwrap_err();
        assert_eq!((e.code, e.reason), (422, "Invalid"));
        assert_eq!(e.causes()[0].field, "fieldManager");
    }
}
