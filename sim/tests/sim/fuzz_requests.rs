//! Fuzzing of the API server's input: arbitrary query parameters of a list (labelSelector,
//! fieldSelector, resourceVersion, continue, limit), arbitrary create bodies and arbitrary
//! patch documents of every patch content type. Every answer is a success or a 4xx `Status`,
//! never a 5xx or a dropped connection, and a refusal stores nothing (the store's
//! resourceVersion is unchanged). `PROPTEST_CASES` sets the number of cases per property (256 by
//! default; the longer run is `PROPTEST_CASES=5000 cargo test -p cinder-sim --test sim fuzz_requests`).

use crate::common::{raw, server_only};
use cinder_sim::EmbeddedCluster;
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use serde_json::{Value, json};

const CMS: &str = "/api/v1/namespaces/default/configmaps";

/// Percent-encodes a query parameter value.
fn encode(value: &str) -> String {
    value
        .bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// Text that looks like selectors, versions and tokens, and text that does not.
fn selectorish() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-z0-9=!,.()/ _-]{0,24}",
        "[a-z]{1,6}(=|==|!=| in | notin )[a-z(), ]{0,12}",
        "metadata\\.(name|namespace)(=|==|!=)[a-z0-9-]{0,8}",
        "[0-9]{0,22}",
        "[A-Za-z0-9+/=]{0,32}",
        "\\PC{0,16}",
    ]
}

fn any_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        "\\PC{0,12}".prop_map(Value::String),
        prop::sample::select(vec!["ConfigMap", "v1", "keep", "add", "remove", "/data/a"])
            .prop_map(|s| Value::String(s.to_string())),
    ];
    leaf.prop_recursive(4, 40, 5, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
            prop::collection::vec(
                (
                    prop::sample::select(vec![
                        "apiVersion",
                        "kind",
                        "metadata",
                        "name",
                        "data",
                        "op",
                        "path",
                        "value",
                        "from",
                        "labels",
                        "immutable",
                        "binaryData",
                        "$patch",
                        "x"
                    ]),
                    inner
                ),
                0..5
            )
            .prop_map(|kv| Value::Object(
                kv.into_iter().map(|(k, v)| (k.to_string(), v)).collect()
            )),
        ]
    })
}

/// A body: arbitrary JSON, a ConfigMap with one part replaced, or bytes that are not JSON.
fn body() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        any_json().prop_map(|v| v.to_string().into_bytes()),
        (any_json(), prop::sample::select(vec!["metadata", "data", "kind", "apiVersion"])).prop_map(
            |(v, part)| {
                let mut cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "fuzzed"}, "data": {"a": "1"}});
                cm[part] = v;
                cm.to_string().into_bytes()
            }
        ),
        prop::collection::vec(any::<u8>(), 0..64),
    ]
}

fn runner() -> TestRunner {
    TestRunner::new(Config::default())
}

/// The cluster with one ConfigMap `keep` to patch.
fn start(rt: &tokio::runtime::Runtime) -> EmbeddedCluster {
    rt.block_on(async {
        let c = server_only().await;
        let body = json!({"metadata": {"name": "keep"}, "data": {"a": "1"}}).to_string();
        let r = raw(
            &c.url(),
            "POST",
            CMS,
            &[("Content-Type", "application/json")],
            body,
        )
        .await;
        assert_eq!(r.code, 201, "{}", r.body);
        c
    })
}

/// A success, or a 4xx whose body is a Status with that code and which changed nothing.
fn check(
    code: u16,
    body: &str,
    rv_before: u64,
    rv_after: u64,
    what: &str,
) -> Result<(), TestCaseError> {
    prop_assert!(code != 0, "{what}: no answer (connection dropped)");
    prop_assert!(code < 500, "{what}: {code} {body}");
    if code >= 400 {
        let status: Value = serde_json::from_str(body).unwrap_or(Value::Null);
        prop_assert_eq!(&status["kind"], "Status", "{}: {} {}", what, code, body);
        prop_assert_eq!(status["code"].as_u64(), Some(u64::from(code)), "{}", what);
        prop_assert_eq!(rv_before, rv_after, "{}: a refusal changed the store", what);
    }
    Ok(())
}

#[test]
fn list_query_parameters_never_fail_the_server() {
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let cluster = start(&rt);
    let strategy = (
        selectorish(),
        selectorish(),
        selectorish(),
        selectorish(),
        selectorish(),
        any::<bool>(),
    );
    runner()
        .run(
            &strategy,
            |(labels, fields, rv, cont, limit, all_namespaces)| {
                let path = format!(
                    "{}?labelSelector={}&fieldSelector={}&resourceVersion={}&continue={}&limit={}",
                    if all_namespaces {
                        "/api/v1/configmaps"
                    } else {
                        CMS
                    },
                    encode(&labels),
                    encode(&fields),
                    encode(&rv),
                    encode(&cont),
                    encode(&limit)
                );
                let before = cluster.store().resource_version();
                let r = rt.block_on(raw(&cluster.url(), "GET", &path, &[], ""));
                check(
                    r.code,
                    &r.body,
                    before,
                    cluster.store().resource_version(),
                    &path,
                )
            },
        )
        .unwrap_or_else(|e| panic!("{e}"));
    rt.block_on(cluster.shutdown());
}

#[test]
fn create_bodies_never_fail_the_server() {
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let cluster = start(&rt);
    runner()
        .run(&body(), |body| {
            let before = cluster.store().resource_version();
            let r = rt.block_on(raw(
                &cluster.url(),
                "POST",
                CMS,
                &[("Content-Type", "application/json")],
                &body,
            ));
            let what = format!("POST {}", String::from_utf8_lossy(&body));
            check(
                r.code,
                &r.body,
                before,
                cluster.store().resource_version(),
                &what,
            )?;
            if r.code < 300 {
                // Accepted: remove it again so the next case starts from the same store.
                let name = r.json()["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string();
                rt.block_on(raw(
                    &cluster.url(),
                    "DELETE",
                    &format!("{CMS}/{name}"),
                    &[],
                    "",
                ));
            }
            Ok(())
        })
        .unwrap_or_else(|e| panic!("{e}"));
    rt.block_on(cluster.shutdown());
}

#[test]
fn patch_documents_never_fail_the_server() {
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let cluster = start(&rt);
    let content_types = prop::sample::select(vec![
        "application/merge-patch+json",
        "application/json-patch+json",
        "application/strategic-merge-patch+json",
        "application/apply-patch+yaml",
        "text/plain",
    ]);
    runner()
        .run(&(content_types, body()), |(content_type, body)| {
            let before = cluster.store().resource_version();
            let path = if content_type == "application/apply-patch+yaml" {
                format!("{CMS}/keep?fieldManager=fuzz")
            } else {
                format!("{CMS}/keep")
            };
            let r = rt.block_on(raw(
                &cluster.url(),
                "PATCH",
                &path,
                &[("Content-Type", content_type)],
                &body,
            ));
            let what = format!("PATCH {content_type} {}", String::from_utf8_lossy(&body));
            check(
                r.code,
                &r.body,
                before,
                cluster.store().resource_version(),
                &what,
            )?;
            if r.code < 300 {
                // Put `keep` back (it may have been changed in any way the patch allowed).
                let reset = json!({"metadata": {"name": "keep"}, "data": {"a": "1"}}).to_string();
                rt.block_on(raw(
                    &cluster.url(),
                    "DELETE",
                    &format!("{CMS}/keep"),
                    &[],
                    "",
                ));
                let again = rt.block_on(raw(
                    &cluster.url(),
                    "POST",
                    CMS,
                    &[("Content-Type", "application/json")],
                    reset,
                ));
                prop_assert_eq!(again.code, 201, "{}", again.body);
            }
            Ok(())
        })
        .unwrap_or_else(|e| panic!("{e}"));
    rt.block_on(cluster.shutdown());
}
