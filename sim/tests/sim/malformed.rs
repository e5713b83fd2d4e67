//! Malformed requests get a 4xx Status object and leave the store unchanged: bodies that are not
//! JSON, the wrong kind, bad patches, unknown patch content types, bad selectors and versions.

use crate::common::server_only;
use serde_json::{Value, json};

/// One request with a content type; the status code and the JSON body.
async fn raw(base: &str, method: &str, path: &str, content_type: &str, body: &str) -> (u16, Value) {
    let r = crate::common::raw(base, method, path, &[("Content-Type", content_type)], body).await;
    (r.code, r.json())
}

#[tokio::test]
async fn malformed_requests_get_4xx_status_and_change_nothing() {
    let c = server_only().await;
    let url = c.url();
    let cms = "/api/v1/namespaces/default/configmaps";
    let (code, _) = raw(
        &url,
        "POST",
        cms,
        "application/json",
        r#"{"metadata":{"name":"keep"},"data":{"a":"1"}}"#,
    )
    .await;
    assert_eq!(code, 201);
    let rv = c.store().resource_version();
    let before = c.store().list("", "configmaps", None);

    let cases: Vec<(&str, String, &str, &str, u16, &str)> = vec![
        (
            "POST",
            cms.to_string(),
            "application/json",
            "this is not json",
            400,
            "BadRequest",
        ),
        (
            "POST",
            cms.to_string(),
            "application/json",
            "[1, 2]",
            400,
            "BadRequest",
        ),
        (
            "POST",
            cms.to_string(),
            "application/json",
            r#"{"kind":"Secret","apiVersion":"v1","metadata":{"name":"s"}}"#,
            400,
            "BadRequest",
        ),
        (
            "POST",
            cms.to_string(),
            "application/json",
            r#"{"apiVersion":"apps/v1","metadata":{"name":"s"}}"#,
            400,
            "BadRequest",
        ),
        (
            "POST",
            cms.to_string(),
            "application/json",
            r#"{"metadata":{"name":"Not_Valid"}}"#,
            422,
            "Invalid",
        ),
        (
            "POST",
            cms.to_string(),
            "application/json",
            r#"{"metadata":{"name":"l","labels":{"a":1}}}"#,
            422,
            "Invalid",
        ),
        (
            "POST",
            cms.to_string(),
            "application/json",
            r#"{"metadata":{}}"#,
            422,
            "Invalid",
        ),
        (
            "POST",
            cms.to_string(),
            "text/plain",
            "hello",
            415,
            "UnsupportedMediaType",
        ),
        (
            "POST",
            format!("{cms}/keep"),
            "application/json",
            "{}",
            405,
            "MethodNotAllowed",
        ),
        (
            "PUT",
            format!("{cms}/keep"),
            "application/json",
            r#"{"metadata":{"name":"other"}}"#,
            400,
            "BadRequest",
        ),
        (
            "PUT",
            format!("{cms}/keep"),
            "application/json",
            r#"{"metadata":{"name":"keep","resourceVersion":"1"}}"#,
            409,
            "Conflict",
        ),
        (
            "PUT",
            format!("{cms}/keep"),
            "application/json",
            "{",
            400,
            "BadRequest",
        ),
        (
            "PATCH",
            format!("{cms}/keep"),
            "application/merge-patch+json",
            "{{{",
            400,
            "BadRequest",
        ),
        (
            "PATCH",
            format!("{cms}/keep"),
            "application/merge-patch+json",
            "[]",
            400,
            "BadRequest",
        ),
        (
            "PATCH",
            format!("{cms}/keep"),
            "application/json-patch+json",
            r#"[{"op":"nope"}]"#,
            400,
            "BadRequest",
        ),
        (
            "PATCH",
            format!("{cms}/keep"),
            "application/json-patch+json",
            r#"[{"op":"test","path":"/data/a","value":"2"}]"#,
            422,
            "Invalid",
        ),
        (
            "PATCH",
            format!("{cms}/keep"),
            "application/json-patch+json",
            r#"[{"op":"remove","path":"/data/zzz"}]"#,
            422,
            "Invalid",
        ),
        (
            "PATCH",
            format!("{cms}/keep"),
            "application/strategic-merge-patch+json",
            "nope",
            400,
            "BadRequest",
        ),
        (
            "PATCH",
            format!("{cms}/keep"),
            "application/apply-patch+yaml",
            "apiVersion: v1\nkind: ConfigMap\n",
            400,
            "BadRequest",
        ),
        (
            "PATCH",
            format!("{cms}/keep?fieldManager=x"),
            "application/apply-patch+yaml",
            ": : :\n- [",
            400,
            "BadRequest",
        ),
        (
            "PATCH",
            format!("{cms}/keep"),
            "application/xml",
            "<a/>",
            415,
            "UnsupportedMediaType",
        ),
        (
            "PATCH",
            format!("{cms}/keep"),
            "application/merge-patch+json",
            r#"{"metadata":{"labels":{"a":{"b":1}}}}"#,
            422,
            "Invalid",
        ),
        (
            "DELETE",
            format!("{cms}/keep?propagationPolicy=Sideways"),
            "application/json",
            "",
            400,
            "BadRequest",
        ),
        (
            "DELETE",
            format!("{cms}/keep"),
            "application/json",
            "{not json",
            400,
            "BadRequest",
        ),
        (
            "GET",
            format!("{cms}?labelSelector=a%20in%20b"),
            "application/json",
            "",
            400,
            "BadRequest",
        ),
        (
            "GET",
            format!("{cms}?fieldSelector=garbage"),
            "application/json",
            "",
            400,
            "BadRequest",
        ),
        (
            "GET",
            format!("{cms}?watch=1&resourceVersion=abc"),
            "application/json",
            "",
            400,
            "BadRequest",
        ),
        (
            "GET",
            format!("{cms}?limit=1&continue=zzz"),
            "application/json",
            "",
            400,
            "BadRequest",
        ),
        (
            "GET",
            "/api/v1/namespaces/default/frobs".to_string(),
            "application/json",
            "",
            404,
            "NotFound",
        ),
        (
            "GET",
            format!("{cms}/keep/status"),
            "application/json",
            "",
            404,
            "NotFound",
        ),
    ];
    for (method, path, ct, body, want, reason) in cases {
        let (code, status) = raw(&url, method, &path, ct, body).await;
        assert_eq!(code, want, "{method} {path} {body}: {status}");
        assert_eq!(status["kind"], "Status", "{method} {path}: {status}");
        assert_eq!(status["code"], json!(want), "{method} {path}");
        assert_eq!(status["reason"], reason, "{method} {path}: {status}");
    }
    // a group nobody serves: the plain-text answer of a real server's not-found handler
    let unserved = crate::common::raw(
        &url,
        "POST",
        "/apis/nope.example/v1/namespaces/default/things",
        &[("Content-Type", "application/json")],
        "{}",
    )
    .await;
    assert_eq!(unserved.code, 404);
    assert_eq!(unserved.body, "404 page not found\n");
    assert_eq!(c.store().resource_version(), rv, "no write happened");
    assert_eq!(c.store().list("", "configmaps", None), before);
    // the server still works
    let (code, obj) = raw(&url, "GET", &format!("{cms}/keep"), "application/json", "").await;
    assert_eq!((code, obj["data"]["a"].as_str()), (200, Some("1")));
    c.shutdown().await;
}
