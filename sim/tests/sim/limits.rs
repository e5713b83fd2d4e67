//! Every limit and validation a real API server applies to any object, each refused with its
//! code, reason and field, and nothing stored: names (subdomain, label, DNS-1035, length),
//! generateName, label keys and values, annotation size, field manager names, the request body
//! limit (413), ConfigMap and Secret data (1 MiB), immutable ConfigMaps and Secrets, a Job's
//! restart policy.

use crate::common::{Raw, raw, server_only};
use cinder_sim::EmbeddedCluster;
use serde_json::{Value, json};

const JSON: (&str, &str) = ("Content-Type", "application/json");

async fn post(c: &EmbeddedCluster, path: &str, body: &Value) -> Raw {
    raw(&c.url(), "POST", path, &[JSON], body.to_string()).await
}

/// Asserts a 422 Invalid whose first cause names `field`, and that `name` was not stored.
fn assert_invalid(r: &Raw, field: &str, message_part: &str) {
    assert_eq!(r.code, 422, "{}", r.body);
    let s = r.json();
    assert_eq!(s["reason"], "Invalid", "{}", r.body);
    let causes = s["details"]["causes"].as_array().unwrap();
    assert!(
        causes
            .iter()
            .any(|c| c["field"] == field && c["message"].as_str().unwrap().contains(message_part)),
        "no cause on {field} containing {message_part:?}: {}",
        r.body
    );
}

const CMS: &str = "/api/v1/namespaces/default/configmaps";

#[tokio::test]
async fn names_labels_annotations_and_field_managers() {
    let c = server_only().await;
    let count = || c.store().list("", "configmaps", Some("default")).len();
    let before = count();

    let long_value = "v".repeat(100);
    let r = post(
        &c,
        CMS,
        &json!({"metadata": {"name": "a", "labels": {"k": long_value}}}),
    )
    .await;
    assert_invalid(&r, "metadata.labels", "must be no more than 63 characters");
    let r = post(
        &c,
        CMS,
        &json!({"metadata": {"name": "a", "labels": {"k": "-bad"}}}),
    )
    .await;
    assert_invalid(
        &r,
        "metadata.labels",
        "a valid label must be an empty string",
    );
    let r = post(
        &c,
        CMS,
        &json!({"metadata": {"name": "a", "labels": {"Bad_Prefix/k": "v"}}}),
    )
    .await;
    assert_invalid(&r, "metadata.labels", "prefix part");
    let r = post(
        &c,
        CMS,
        &json!({"metadata": {"name": "a", "annotations": {"big": "x".repeat(300 * 1024)}}}),
    )
    .await;
    assert_invalid(
        &r,
        "metadata.annotations",
        "Too long: must have at most 262144 bytes",
    );
    assert_eq!(
        r.json()["details"]["causes"][0]["reason"],
        "FieldValueTooLong"
    );

    let r = post(&c, CMS, &json!({"metadata": {"name": "n".repeat(254)}})).await;
    assert_invalid(&r, "metadata.name", "must be no more than 253 characters");
    let r = post(&c, CMS, &json!({"metadata": {"name": "Upper"}})).await;
    assert_invalid(&r, "metadata.name", "RFC 1123 subdomain");
    let r = post(&c, CMS, &json!({"metadata": {"generateName": "Bad_"}})).await;
    assert_invalid(&r, "metadata.generateName", "RFC 1123 subdomain");
    let r = post(
        &c,
        "/api/v1/namespaces",
        &json!({"metadata": {"name": "a.b"}}),
    )
    .await;
    assert_invalid(&r, "metadata.name", "RFC 1123 label");
    let r = post(
        &c,
        "/api/v1/namespaces/default/services",
        &json!({"metadata": {"name": "1svc"}, "spec": {"ports": [{"port": 80}]}}),
    )
    .await;
    assert_invalid(&r, "metadata.name", "DNS-1035 label");

    let manager = "m".repeat(129);
    let r = raw(
        &c.url(),
        "POST",
        &format!("{CMS}?fieldManager={manager}"),
        &[JSON],
        json!({"metadata": {"name": "fm"}}).to_string(),
    )
    .await;
    assert_invalid(&r, "fieldManager", "must be less than 128 characters");
    assert_eq!(count(), before, "nothing refused was stored");

    // generateName: a long base is cut so the name stays within 63 characters
    let r = post(
        &c,
        CMS,
        &json!({"metadata": {"generateName": format!("{}-", "g".repeat(70))}}),
    )
    .await;
    assert_eq!(r.code, 201, "{}", r.body);
    assert_eq!(r.json()["metadata"]["name"].as_str().unwrap().len(), 63);
}

#[tokio::test]
async fn body_and_data_limits() {
    let c = server_only().await;
    // over 3 MiB: 413 RequestEntityTooLarge
    let huge = json!({"metadata": {"name": "huge"}, "data": {"k": "x".repeat(4 * 1024 * 1024)}});
    let r = post(&c, CMS, &huge).await;
    assert_eq!(r.code, 413, "{}", &r.body[..r.body.len().min(300)]);
    assert_eq!(r.json()["reason"], "RequestEntityTooLarge");
    assert_eq!(
        r.json()["message"],
        "Request entity too large: limit is 3145728"
    );

    // under 3 MiB but data over 1 MiB: 422
    let big = json!({"metadata": {"name": "big"}, "data": {"k": "x".repeat(1024 * 1024 + 1)}});
    let r = post(&c, CMS, &big).await;
    assert_invalid(&r, "[]", "Too long: must have at most 1048576 bytes");
    let secret =
        json!({"metadata": {"name": "big"}, "stringData": {"k": "x".repeat(1024 * 1024 + 1)}});
    let r = post(&c, "/api/v1/namespaces/default/secrets", &secret).await;
    assert_invalid(&r, "data", "Too long: must have at most 1048576 bytes");
    let r = post(
        &c,
        CMS,
        &json!({"metadata": {"name": "keys"}, "data": {"a/b": "x"}}),
    )
    .await;
    assert_invalid(&r, "data[a/b]", "a valid config key");
    assert!(c.store().get("", "configmaps", "default", "huge").is_none());
    assert!(c.store().get("", "configmaps", "default", "big").is_none());
    assert!(c.store().get("", "secrets", "default", "big").is_none());
}

#[tokio::test]
async fn immutable_config_maps_and_secrets() {
    let c = server_only().await;
    let r = post(
        &c,
        CMS,
        &json!({"metadata": {"name": "frozen"}, "immutable": true, "data": {"a": "1"}}),
    )
    .await;
    assert_eq!(r.code, 201);
    let path = format!("{CMS}/frozen");
    let merge = ("Content-Type", "application/merge-patch+json");
    let r = raw(&c.url(), "PATCH", &path, &[merge], r#"{"data":{"a":"2"}}"#).await;
    assert_invalid(&r, "data", "field is immutable when `immutable` is set");
    assert_eq!(
        r.json()["details"]["causes"][0]["reason"],
        "FieldValueForbidden"
    );
    let r = raw(&c.url(), "PATCH", &path, &[merge], r#"{"immutable":false}"#).await;
    assert_invalid(&r, "immutable", "field is immutable");
    // metadata may still change
    let r = raw(
        &c.url(),
        "PATCH",
        &path,
        &[merge],
        r#"{"metadata":{"labels":{"x":"y"}}}"#,
    )
    .await;
    assert_eq!(r.code, 200, "{}", r.body);
    let stored = c
        .store()
        .get("", "configmaps", "default", "frozen")
        .unwrap();
    assert_eq!(stored["data"]["a"], "1");

    let secrets = "/api/v1/namespaces/default/secrets";
    let r = post(
        &c,
        secrets,
        &json!({"metadata": {"name": "s"}, "immutable": true, "stringData": {"a": "1"}}),
    )
    .await;
    assert_eq!(r.code, 201);
    let r = raw(
        &c.url(),
        "PATCH",
        &format!("{secrets}/s"),
        &[merge],
        r#"{"stringData":{"a":"2"}}"#,
    )
    .await;
    assert_invalid(&r, "data", "field is immutable");
}

#[tokio::test]
async fn job_templates_need_a_job_restart_policy() {
    let c = server_only().await;
    let job = json!({"metadata": {"name": "j"}, "spec": {"template": {"spec": {
        "containers": [{"name": "c", "image": "busybox"}]}}}});
    let r = post(&c, "/apis/batch/v1/namespaces/default/jobs", &job).await;
    assert_invalid(
        &r,
        "spec.template.spec.restartPolicy",
        "Unsupported value: \"Always\"",
    );
    assert!(c.store().get("batch", "jobs", "default", "j").is_none());
}
