//! CEL rules (`x-kubernetes-validations`) of a CRD: instances accepted and refused as the rules
//! say (a plain rule with fieldPath, a messageExpression, a reason, a transition rule on
//! update), and a CRD whose rule does not compile refused with 422.

use crate::common::{raw, server_only};
use serde_json::{Value, json};

fn crd(rule: &str) -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "ranges.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced",
                 "names": {"plural": "ranges", "singular": "range", "kind": "Range"},
                 "versions": [{"name": "v1", "served": true, "storage": true,
                   "schema": {"openAPIV3Schema": {"type": "object",
                     "x-kubernetes-validations": [
                       {"rule": "self.metadata.name.size() <= 8", "message": "name at most 8 characters"}],
                     "properties": {"spec": {"type": "object",
                       "x-kubernetes-validations": [
                         {"rule": rule, "message": "min must not exceed max", "fieldPath": ".min"},
                         {"rule": "self.label.startsWith('r-')", "reason": "FieldValueForbidden",
                          "messageExpression": "'label ' + self.label + ' must start with r-'"}],
                       "properties": {
                         "min": {"type": "integer"}, "max": {"type": "integer"},
                         "label": {"type": "string", "default": "r-default"},
                         "mode": {"type": "string", "x-kubernetes-validations": [
                           {"rule": "self == oldSelf", "message": "mode is immutable"}]}}}}}}}]}
    })
}

const CRDS: &str = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
const RANGES: &str = "/apis/example.com/v1/namespaces/default/ranges";
const JSON: (&str, &str) = ("Content-Type", "application/json");

fn range(name: &str, spec: Value) -> String {
    json!({"apiVersion": "example.com/v1", "kind": "Range", "metadata": {"name": name}, "spec": spec})
        .to_string()
}

#[tokio::test]
async fn rules_accept_refuse_and_guard_transitions() {
    let c = server_only().await;
    let url = c.url();
    let r = raw(
        &url,
        "POST",
        CRDS,
        &[JSON],
        crd("self.min <= self.max").to_string(),
    )
    .await;
    assert_eq!(r.code, 201, "{}", r.body);

    let ok = raw(
        &url,
        "POST",
        RANGES,
        &[JSON],
        range("r1", json!({"min": 1, "max": 2, "mode": "a"})),
    )
    .await;
    assert_eq!(ok.code, 201, "{}", ok.body);

    let r = raw(
        &url,
        "POST",
        RANGES,
        &[JSON],
        range("r2", json!({"min": 3, "max": 2})),
    )
    .await;
    assert_eq!(r.code, 422, "{}", r.body);
    let cause = &r.json()["details"]["causes"][0];
    assert_eq!(cause["field"], "spec.min");
    assert_eq!(cause["reason"], "FieldValueInvalid");
    assert_eq!(
        cause["message"],
        "Invalid value: \"object\": min must not exceed max"
    );
    assert!(
        r.json()["message"]
            .as_str()
            .unwrap()
            .starts_with("Range.example.com \"r2\" is invalid: spec.min")
    );

    let r = raw(
        &url,
        "POST",
        RANGES,
        &[JSON],
        range("r3", json!({"min": 1, "max": 2, "label": "x"})),
    )
    .await;
    assert_eq!(r.code, 422);
    let cause = &r.json()["details"]["causes"][0];
    assert_eq!(cause["reason"], "FieldValueForbidden");
    assert_eq!(cause["message"], "Forbidden: label x must start with r-");

    let r = raw(
        &url,
        "POST",
        RANGES,
        &[JSON],
        range("much-too-long", json!({"min": 1, "max": 2})),
    )
    .await;
    assert_eq!(r.code, 422);
    assert!(r.body.contains("name at most 8 characters"), "{}", r.body);

    // transition rule: mode may not change, other fields may
    let merge = ("Content-Type", "application/merge-patch+json");
    let r = raw(
        &url,
        "PATCH",
        &format!("{RANGES}/r1"),
        &[merge],
        r#"{"spec":{"mode":"b"}}"#,
    )
    .await;
    assert_eq!(r.code, 422, "{}", r.body);
    assert_eq!(r.json()["details"]["causes"][0]["field"], "spec.mode");
    assert!(r.body.contains("mode is immutable"));
    let r = raw(
        &url,
        "PATCH",
        &format!("{RANGES}/r1"),
        &[merge],
        r#"{"spec":{"max":5}}"#,
    )
    .await;
    assert_eq!(r.code, 200, "{}", r.body);

    let stored: Vec<String> = c
        .store()
        .list("example.com", "ranges", None)
        .iter()
        .map(|o| {
            o["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_string()
        })
        .collect();
    assert_eq!(stored, vec!["r1".to_string()]);
    assert_eq!(
        c.store()
            .get("example.com", "ranges", "default", "r1")
            .unwrap()["spec"]["mode"],
        "a"
    );
}

#[tokio::test]
async fn a_crd_whose_rule_does_not_compile_is_refused() {
    let c = server_only().await;
    let r = raw(
        &c.url(),
        "POST",
        CRDS,
        &[JSON],
        crd("self.min <=").to_string(),
    )
    .await;
    assert_eq!(r.code, 422, "{}", r.body);
    let cause = &r.json()["details"]["causes"][0];
    assert_eq!(
        cause["field"],
        "spec.versions[0].schema.openAPIV3Schema.properties[spec].x-kubernetes-validations[0].rule"
    );
    assert!(
        cause["message"]
            .as_str()
            .unwrap()
            .contains("compilation failed")
    );
    assert!(
        c.store()
            .get(
                "apiextensions.k8s.io",
                "customresourcedefinitions",
                "",
                "ranges.example.com"
            )
            .is_none()
    );
    assert!(!c.store().serves("example.com", "ranges"));
}
