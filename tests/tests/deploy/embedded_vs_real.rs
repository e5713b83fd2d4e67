//! The embedded cluster measured against the real control plane: one request corpus (namespaces
//! and ConfigMaps, error answers, server-side apply and its conflicts, built-in workloads and
//! their defaults, custom resources with defaults and validation rules, metadata-only and paged
//! lists, watches, kubectl's flows, APIService, events.k8s.io Events seen through core/v1,
//! ReplicationController and DaemonSet status) is sent to both, in order,
//! and each pair of answers is compared on status code, Status reason and causes, and the
//! answer's fields less uids, timestamps, resourceVersions and other per-server values. It
//! prints the share of identical answers per group and every difference, and fails when the
//! real server does not answer a request as the corpus expects (a corpus that drifted measures
//! nothing) or the embedded cluster's share falls below the floor measured when this was written.

use cinder_e2e::real_cluster::{RealControlPlane, binary_for_test};
use cinder_sim::{ClusterConfig, EmbeddedCluster};
use http::{Method, Request};
use kube::Client;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::time::Duration;

const TEST: &str = "the_embedded_cluster_answers_as_the_real_one";
const NS: &str = "differential";
/// The least shares of identical answers the embedded cluster keeps, with and without the
/// managedFields' field sets: one answer below the least measured (55 and 56 of 56: see
/// docs/embedded-cluster.md), as a read right after a write depends on when a controller
/// syncs. A simulator change that loses more agreement fails here.
const FLOOR: f64 = 54.0 / 56.0;
const FLOOR_WITHOUT_FIELD_SETS: f64 = 55.0 / 56.0;

/// One request of the corpus.
struct Case {
    group: &'static str,
    what: &'static str,
    method: Method,
    path: String,
    content_type: &'static str,
    accept: &'static str,
    body: Option<Value>,
    /// The status code the real API server gives (checked, so the corpus stays meaningful).
    expect: u16,
    /// Paths (`/a/b`, `*` for any list index or key) whose values are per-server and compared
    /// only for presence.
    volatile: &'static [&'static str],
    /// Waits this long before sending (for controllers' or CRD establishment's first pass).
    settle: Duration,
    /// The earlier case (by `what`) whose answer's `metadata.resourceVersion` replaces `{rv}`
    /// in the path: each server is asked from its own version.
    rv_from: Option<&'static str>,
}

impl Case {
    fn new(
        group: &'static str,
        what: &'static str,
        method: Method,
        path: &str,
        expect: u16,
    ) -> Self {
        Case {
            group,
            what,
            method,
            path: path.to_string(),
            content_type: "application/json",
            accept: "application/json",
            body: None,
            expect,
            volatile: &[],
            settle: Duration::ZERO,
            rv_from: None,
        }
    }
    fn body(mut self, body: Value) -> Self {
        self.body = Some(body);
        self
    }
    fn content_type(mut self, ct: &'static str) -> Self {
        self.content_type = ct;
        self
    }
    fn accept(mut self, accept: &'static str) -> Self {
        self.accept = accept;
        self
    }
    fn volatile(mut self, paths: &'static [&'static str]) -> Self {
        self.volatile = paths;
        self
    }
    fn settle(mut self, d: Duration) -> Self {
        self.settle = d;
        self
    }
    fn rv_from(mut self, what: &'static str) -> Self {
        self.rv_from = Some(what);
        self
    }
}

fn cm(name: &str, data: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": data})
}

fn pod_template(app: &str) -> Value {
    json!({
        "metadata": {"labels": {"app": app}},
        "spec": {"containers": [{"name": app, "image": "registry.invalid/app:1"}]}
    })
}

/// The corpus, in the order it is sent (later requests read what earlier ones wrote).
fn corpus() -> Vec<Case> {
    use Method as M;
    let ns = format!("/api/v1/namespaces/{NS}");
    let cms = format!("{ns}/configmaps");
    let apps = format!("/apis/apps/v1/namespaces/{NS}");
    let cinders = format!("/apis/cinder.openstack.c5c3.io/v1alpha1/namespaces/{NS}/cinders");
    let apply = "application/apply-patch+yaml";
    let merge = "application/merge-patch+json";
    let meta_list = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1";
    let meta_one = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1";
    let sample_cinder = cinder_sample();
    let mut invalid_cinder = sample_cinder.clone();
    invalid_cinder["metadata"]["name"] = json!("invalid");
    invalid_cinder["spec"]["api"] = json!({"replicas": -1});
    vec![
        // namespaces and ConfigMaps
        Case::new("crud", "create a namespace", M::POST, "/api/v1/namespaces", 201)
            .body(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})),
        Case::new("crud", "get the namespace", M::GET, &ns, 200),
        Case::new("crud", "create a ConfigMap", M::POST, &cms, 201).body(cm("a", json!({"k": "v"})))
            // after kube-controller-manager's first pass over the namespace (kube-root-ca.crt)
            .settle(Duration::from_secs(1)),
        Case::new("crud", "get the ConfigMap", M::GET, &format!("{cms}/a"), 200),
        Case::new("crud", "merge-patch the ConfigMap", M::PATCH, &format!("{cms}/a"), 200)
            .content_type(merge)
            .body(json!({"data": {"k2": "v2"}, "metadata": {"labels": {"l": "1"}}})),
        Case::new("crud", "JSON-patch the ConfigMap", M::PATCH, &format!("{cms}/a"), 200)
            .content_type("application/json-patch+json")
            .body(json!([{"op": "replace", "path": "/data/k", "value": "w"}])),
        Case::new("crud", "list ConfigMaps by label", M::GET, &format!("{cms}?labelSelector=l%3D1"), 200),
        Case::new("crud", "delete the ConfigMap", M::DELETE, &format!("{cms}/a"), 200),
        Case::new("crud", "get the deleted ConfigMap", M::GET, &format!("{cms}/a"), 404),
        // error answers
        Case::new("errors", "create a ConfigMap twice (1)", M::POST, &cms, 201).body(cm("dup", json!({}))),
        Case::new("errors", "create a ConfigMap twice (2)", M::POST, &cms, 409).body(cm("dup", json!({}))),
        Case::new("errors", "an invalid name", M::POST, &cms, 422).body(cm("Bad_Name", json!({}))),
        Case::new("errors", "update with a stale resourceVersion", M::PUT, &format!("{cms}/dup"), 409).body(
            json!({"apiVersion": "v1", "kind": "ConfigMap",
                   "metadata": {"name": "dup", "resourceVersion": "1"}, "data": {"x": "y"}}),
        ),
        Case::new("errors", "update with another name in the body", M::PUT, &format!("{cms}/dup"), 400)
            .body(cm("other", json!({}))),
        Case::new("errors", "a JSON patch whose test fails", M::PATCH, &format!("{cms}/dup"), 422)
            .content_type("application/json-patch+json")
            .body(json!([{"op": "test", "path": "/metadata/name", "value": "nope"}])),
        Case::new("errors", "an object in a missing namespace", M::POST, "/api/v1/namespaces/absent/configmaps", 404)
            .body(cm("x", json!({}))),
        Case::new("errors", "an unknown group", M::GET, "/apis/nope.example.com/v1/things", 404),
        Case::new("errors", "a patch with an unsupported content type", M::PATCH, &format!("{cms}/dup"), 415)
            .content_type("text/plain")
            .body(json!({})),
        // server-side apply
        Case::new("apply", "apply creates", M::PATCH, &format!("{cms}/s?fieldManager=m1"), 201)
            .content_type(apply)
            .body(cm("s", json!({"a": "1", "b": "1"}))),
        Case::new("apply", "the same apply again", M::PATCH, &format!("{cms}/s?fieldManager=m1"), 200)
            .content_type(apply)
            .body(cm("s", json!({"a": "1", "b": "1"}))),
        Case::new("apply", "another manager sets a field differently", M::PATCH, &format!("{cms}/s?fieldManager=m2"), 409)
            .content_type(apply)
            .body(cm("s", json!({"a": "2"}))),
        Case::new("apply", "it forces", M::PATCH, &format!("{cms}/s?fieldManager=m2&force=true"), 200)
            .content_type(apply)
            .body(cm("s", json!({"a": "2"}))),
        Case::new("apply", "the first manager drops a field", M::PATCH, &format!("{cms}/s?fieldManager=m1"), 200)
            .content_type(apply)
            .body(cm("s", json!({}))),
        Case::new("apply", "an update takes a field over", M::PATCH, &format!("{cms}/s?fieldManager=m3"), 200)
            .content_type(merge)
            .body(json!({"data": {"a": "3"}})),
        // built-in workloads and their defaults
        Case::new("workloads", "a Deployment", M::POST, &format!("{apps}/deployments"), 201).body(json!({
            "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
            "spec": {"selector": {"matchLabels": {"app": "web"}}, "template": pod_template("web")}
        })),
        Case::new("workloads", "a Deployment without containers", M::POST, &format!("{apps}/deployments"), 422).body(json!({
            "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "empty"},
            "spec": {"selector": {"matchLabels": {"app": "e"}},
                     "template": {"metadata": {"labels": {"app": "e"}}, "spec": {"containers": []}}}
        })),
        Case::new("workloads", "a Deployment whose selector does not match", M::POST, &format!("{apps}/deployments"), 422).body(json!({
            "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "mismatch"},
            "spec": {"selector": {"matchLabels": {"app": "other"}}, "template": pod_template("web")}
        })),
        Case::new("workloads", "a Job", M::POST, &format!("/apis/batch/v1/namespaces/{NS}/jobs"), 201)
            .body(json!({
                "apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "once"},
                "spec": {"template": {"spec": {"restartPolicy": "Never",
                    "containers": [{"name": "once", "image": "registry.invalid/app:1"}]}}}
            }))
            .volatile(&["/metadata/labels/*", "/spec/selector/matchLabels/*", "/spec/template/metadata/labels/*"]),
        Case::new("workloads", "a Service", M::POST, &format!("{ns}/services"), 201)
            .body(json!({
                "apiVersion": "v1", "kind": "Service", "metadata": {"name": "web"},
                "spec": {"selector": {"app": "web"}, "ports": [{"port": 80}]}
            }))
            .volatile(&["/spec/clusterIP", "/spec/clusterIPs/*"]),
        Case::new("workloads", "a ReplicationController", M::POST, &format!("{ns}/replicationcontrollers"), 201).body(json!({
            "apiVersion": "v1", "kind": "ReplicationController", "metadata": {"name": "rc"},
            "spec": {"replicas": 0, "selector": {"app": "rc"}, "template": pod_template("rc")}
        })),
        Case::new("workloads", "the ReplicationController's status", M::GET, &format!("{ns}/replicationcontrollers/rc"), 200)
            .settle(Duration::from_secs(3)),
        Case::new("workloads", "a DaemonSet", M::POST, &format!("{apps}/daemonsets"), 201).body(json!({
            "apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "ds"},
            "spec": {"selector": {"matchLabels": {"app": "ds"}}, "template": pod_template("ds")}
        })),
        Case::new("workloads", "the DaemonSet's status", M::GET, &format!("{apps}/daemonsets/ds"), 200)
            .settle(Duration::from_secs(3)),
        // events and aggregation
        Case::new("events", "an events.k8s.io Event", M::POST, &format!("/apis/events.k8s.io/v1/namespaces/{NS}/events"), 201)
            .body(json!({
                "apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": "e1"},
                "eventTime": "2026-01-01T00:00:00.000000Z", "reportingController": "cinder-e2e/differential",
                "reportingInstance": "cinder-e2e", "action": "Tested", "reason": "Differential",
                "type": "Normal", "note": "one event",
                "regarding": {"apiVersion": "v1", "kind": "ConfigMap", "namespace": NS, "name": "dup"}
            }))
            .volatile(&["/eventTime"]),
        Case::new("events", "the same Event through core/v1", M::GET, &format!("{ns}/events/e1"), 200)
            .volatile(&["/eventTime", "/firstTimestamp", "/lastTimestamp"]),
        Case::new("events", "APIServices", M::GET, "/apis/apiregistration.k8s.io/v1/apiservices/v1.apps", 200)
            .volatile(&["/status/conditions/*/lastTransitionTime"]),
        // custom resources: defaults and validation rules
        Case::new("custom", "a Cinder", M::POST, &cinders, 201).body(sample_cinder),
        Case::new("custom", "an invalid Cinder", M::POST, &cinders, 422).body(invalid_cinder),
        Case::new("custom", "a Cinder that is no object", M::POST, &cinders, 400)
            .body(json!("not an object")),
        Case::new("custom", "list Cinders", M::GET, &cinders, 200),
        // metadata-only and paged lists
        Case::new("lists", "ConfigMaps as metadata", M::GET, &cms, 200).accept(meta_list),
        Case::new("lists", "a ConfigMap as metadata", M::GET, &format!("{cms}/dup"), 200).accept(meta_one),
        Case::new("lists", "the first page of one ConfigMap", M::GET, &format!("{cms}?limit=1"), 200)
            .volatile(&["/metadata/continue", "/metadata/remainingItemCount"]),
        Case::new("lists", "a field selector", M::GET, &format!("{cms}?fieldSelector=metadata.name%3Ddup"), 200),
        Case::new("lists", "an unknown field selector", M::GET, &format!("{cms}?fieldSelector=data.x%3Dy"), 400),
        // watches: from a resourceVersion, and a streaming list ending in its bookmark
        Case::new("watch", "ConfigMaps from a resourceVersion", M::GET, &format!("{cms}?watch=true&resourceVersion={{rv}}&timeoutSeconds=1"), 200)
            .rv_from("create a ConfigMap twice (1)"),
        Case::new("watch", "a streaming list with its bookmark", M::GET,
            &format!("{cms}?watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&timeoutSeconds=1"), 200)
            .volatile(&["/*/object/data/ca.crt"]),
        Case::new("watch", "one ConfigMap by a field selector", M::GET,
            &format!("{cms}?watch=true&fieldSelector=metadata.name%3Ds&resourceVersion={{rv}}&timeoutSeconds=1"), 200)
            .rv_from("create a ConfigMap twice (1)"),
        // kubectl's flows: describe's Events, auth can-i, client-side apply, rollout restart,
        // drain's eviction
        Case::new("kubectl", "describe: the object's Events", M::GET,
            &format!("{ns}/events?fieldSelector=involvedObject.name%3Ddup%2CinvolvedObject.namespace%3D{NS}%2CinvolvedObject.kind%3DConfigMap"), 200)
            .volatile(&["/items/*/eventTime", "/items/*/firstTimestamp", "/items/*/lastTimestamp"]),
        Case::new("kubectl", "auth can-i", M::POST, "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", 201)
            .body(json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
                         "spec": {"resourceAttributes": {"namespace": NS, "verb": "delete", "resource": "configmaps"}}})),
        Case::new("kubectl", "client-side apply", M::PATCH, &format!("{cms}/dup?fieldManager=kubectl-client-side-apply"), 200)
            .content_type("application/strategic-merge-patch+json")
            .body(json!({"metadata": {"annotations": {"kubectl.kubernetes.io/last-applied-configuration":
                "{\"apiVersion\":\"v1\",\"data\":{\"x\":\"y\"},\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"dup\"}}\n"}},
                "data": {"x": "y"}})),
        Case::new("kubectl", "rollout restart", M::PATCH, &format!("{apps}/deployments/web?fieldManager=kubectl-rollout"), 200)
            .content_type("application/strategic-merge-patch+json")
            .body(json!({"spec": {"template": {"metadata": {"annotations": {"kubectl.kubernetes.io/restartedAt": "2026-01-01T00:00:00Z"}}}}}))
            .volatile(&["/status", "/metadata/managedFields/*/fieldsV1/f:status", "/metadata/annotations"]),
        Case::new("kubectl", "a LimitRange", M::POST, &format!("{ns}/limitranges"), 201).body(json!({
            "apiVersion": "v1", "kind": "LimitRange", "metadata": {"name": "defaults"},
            "spec": {"limits": [{"type": "Container", "default": {"memory": "64Mi"}, "defaultRequest": {"memory": "32Mi"}}]}
        })),
        Case::new("kubectl", "a Pod", M::POST, &format!("{ns}/pods"), 201)
            .body(json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
                         "spec": {"containers": [{"name": "c", "image": "registry.invalid/app:1"}]}}))
            .volatile(&["/spec/volumes/*/name", "/spec/containers/*/volumeMounts/*/name"])
            .settle(Duration::from_secs(1)),
        Case::new("kubectl", "drain: evict the Pod", M::POST, &format!("{ns}/pods/p/eviction"), 201)
            .body(json!({"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "p", "namespace": NS}})),
        Case::new("kubectl", "the evicted Pod", M::GET, &format!("{ns}/pods/p"), 404),
    ]
}

/// The sample Cinder of deploy/samples/, in the test's namespace.
fn cinder_sample() -> Value {
    let path = cinder_e2e::deploy_helpers::deploy_dir().join("samples/40-cinder.yaml");
    let text = std::fs::read_to_string(&path).expect("deploy/samples/40-cinder.yaml");
    let mut v: Value = serde_norway::from_str(&text).expect("the sample Cinder parses");
    v["metadata"]["namespace"] = json!(NS);
    v
}

/// One answer: status code and JSON body (`Null` when it is not JSON).
#[derive(Clone, Debug)]
struct Answer {
    code: u16,
    body: Value,
}

async fn send(client: &Client, case: &Case, path: &str) -> Answer {
    let mut req = Request::builder()
        .method(case.method.clone())
        .uri(path)
        .header("Accept", case.accept);
    let body = match &case.body {
        Some(b) => {
            req = req.header("Content-Type", case.content_type);
            serde_json::to_vec(b).expect("a JSON body")
        }
        None => Vec::new(),
    };
    let req = req.body(kube::client::Body::from(body)).expect("a request");
    match client.send(req).await {
        Ok(res) => {
            let code = res.status().as_u16();
            let bytes = res.into_body().collect_bytes().await.unwrap_or_default();
            // A watch answers a stream of JSON events, kept as an array.
            let body = serde_json::from_slice(&bytes).unwrap_or_else(|_| {
                serde_json::Deserializer::from_slice(&bytes)
                    .into_iter::<Value>()
                    .collect::<Result<Vec<Value>, _>>()
                    .map(Value::Array)
                    .unwrap_or(Value::Null)
            });
            Answer { code, body }
        }
        Err(e) => Answer {
            code: 0,
            body: json!({"transport error": e.to_string()}),
        },
    }
}

/// Whether a comparison includes the managedFields' field sets (`fieldsV1`).
#[derive(Clone, Copy, PartialEq)]
enum FieldSets {
    Compared,
    Ignored,
}

/// The comparable form of an answer: a Status keeps code, reason and details (kind, name,
/// group, causes' reason and field, sorted); an object drops its per-server values (and its
/// managedFields' field sets when `sets` says so).
fn normalize(answer: &Answer, volatile: &[&str], sets: FieldSets) -> Value {
    let body = &answer.body;
    if body["kind"] == "Status" {
        let mut causes: Vec<Value> = body["details"]["causes"]
            .as_array()
            .map(|cs| {
                cs.iter()
                    .map(|c| json!({"reason": c["reason"], "field": c["field"]}))
                    .collect()
            })
            .unwrap_or_default();
        causes.sort_by_key(|c| c.to_string());
        return json!({
            "code": answer.code,
            "status": body["status"],
            "reason": body["reason"],
            "details": {"kind": body["details"]["kind"], "name": body["details"]["name"],
                        "group": body["details"]["group"], "causes": causes},
        });
    }
    let mut v = body.clone();
    strip(&mut v, "", volatile, sets);
    json!({"code": answer.code, "body": v})
}

/// Removes the per-server fields below `at`: uid, resourceVersion, creationTimestamp,
/// managedFields' times and the order they give, any `*Time` / `*Timestamp` value, and the
/// `volatile` paths (kept as a marker of presence).
fn strip(v: &mut Value, at: &str, volatile: &[&str], sets: FieldSets) {
    match v {
        Value::Object(map) => {
            for key in ["uid", "resourceVersion", "creationTimestamp", "selfLink"] {
                map.remove(key);
            }
            if sets == FieldSets::Ignored {
                map.remove("fieldsV1");
            }
            // A server orders managedFields by operation, then by the second each entry was
            // written in, then by manager: with the times left out, so is that order.
            if let Some(Value::Array(entries)) = map.get_mut("managedFields") {
                entries.sort_by_key(|e| {
                    (
                        e["operation"].to_string(),
                        e["manager"].to_string(),
                        e["subresource"].to_string(),
                    )
                });
            }
            for (key, child) in map.iter_mut() {
                // a JSON pointer: a key's own `/` (as in a label's prefix) is escaped
                let path = format!("{at}/{}", key.replace('~', "~0").replace('/', "~1"));
                let timestamp =
                    key.ends_with("Time") || key.ends_with("Timestamp") || key == "time";
                if (timestamp && child.is_string()) || matches_any(&path, volatile) {
                    *child = json!("<present>");
                } else {
                    strip(child, &path, volatile, sets);
                }
            }
        }
        Value::Array(items) => {
            for (i, child) in items.iter_mut().enumerate() {
                let path = format!("{at}/{i}");
                if matches_any(&path, volatile) {
                    *child = json!("<present>");
                } else {
                    strip(child, &path, volatile, sets);
                }
            }
        }
        _ => {}
    }
}

fn matches_any(path: &str, patterns: &[&str]) -> bool {
    patterns.iter().any(|p| {
        let (ps, ks): (Vec<&str>, Vec<&str>) = (p.split('/').collect(), path.split('/').collect());
        ps.len() == ks.len() && ps.iter().zip(&ks).all(|(p, k)| *p == "*" || p == k)
    })
}

/// The differences between two comparable values: `path: embedded … real …`, one a line.
fn differences(embedded: &Value, real: &Value, at: &str, out: &mut Vec<String>) {
    match (embedded, real) {
        (Value::Object(a), Value::Object(b)) => {
            let keys: std::collections::BTreeSet<&String> = a.keys().chain(b.keys()).collect();
            for k in keys {
                let path = format!("{at}/{k}");
                match (a.get(k), b.get(k)) {
                    (Some(x), Some(y)) => differences(x, y, &path, out),
                    (Some(x), None) => {
                        out.push(format!("{path}: embedded {} real absent", short(x)))
                    }
                    (None, Some(y)) => {
                        out.push(format!("{path}: embedded absent real {}", short(y)))
                    }
                    (None, None) => {}
                }
            }
        }
        (Value::Array(a), Value::Array(b)) => {
            for (i, (x, y)) in a.iter().zip(b).enumerate() {
                differences(x, y, &format!("{at}/{i}"), out);
            }
            for (i, x) in a.iter().enumerate().skip(b.len()) {
                out.push(format!("{at}/{i}: embedded {} real absent", short(x)));
            }
            for (i, y) in b.iter().enumerate().skip(a.len()) {
                out.push(format!("{at}/{i}: embedded absent real {}", short(y)));
            }
        }
        (a, b) if a != b => out.push(format!("{at}: embedded {} real {}", short(a), short(b))),
        _ => {}
    }
}

/// A value as printed in a difference line: cut at 120 characters unless
/// `DIFFERENTIAL_FULL` is set in the environment.
fn short(v: &Value) -> String {
    let s = v.to_string();
    if s.chars().count() > 120 && std::env::var_os("DIFFERENTIAL_FULL").is_none() {
        format!("{}…", s.chars().take(120).collect::<String>())
    } else {
        s
    }
}

/// Sends the corpus to one cluster; the answers in corpus order.
async fn run_corpus(client: &Client, corpus: &[Case]) -> Vec<Answer> {
    let mut answers: Vec<Answer> = Vec::new();
    for case in corpus {
        if !case.settle.is_zero() {
            tokio::time::sleep(case.settle).await;
        }
        let mut path = case.path.clone();
        if let Some(what) = case.rv_from {
            let earlier = corpus.iter().position(|c| c.what == what);
            let rv = earlier
                .and_then(|i| answers[i].body["metadata"]["resourceVersion"].as_str())
                .unwrap_or_else(|| panic!("{}: no resourceVersion from {what:?}", case.what));
            path = path.replace("{rv}", rv);
        }
        answers.push(send(client, case, &path).await);
    }
    answers
}

/// Creates the project's CRDs and waits until Cinders are served, and until the controllers
/// run (kube-root-ca.crt is in `default`), so a namespace's own objects follow it at once.
async fn prepare(client: &Client) {
    cinder_e2e::install_crds(client).await.unwrap();
    let maps: kube::Api<k8s_openapi::api::core::v1::ConfigMap> =
        kube::Api::namespaced(client.clone(), "default");
    for _ in 0..600 {
        if maps
            .get_opt("kube-root-ca.crt")
            .await
            .ok()
            .flatten()
            .is_some()
        {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("kube-root-ca.crt did not appear in default within 60 s");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_embedded_cluster_answers_as_the_real_one() {
    let Some(bin) = binary_for_test(TEST).unwrap() else {
        return;
    };
    let corpus = corpus();
    let plane = RealControlPlane::start(&bin).await.unwrap();
    let real_client = plane.client().await.unwrap();
    prepare(&real_client).await;
    let real = run_corpus(&real_client, &corpus).await;
    drop(plane);

    // No nodes, as the real control plane has none registered (a DaemonSet counts nodes).
    let mut config = ClusterConfig::default();
    config.controllers.nodes.count = 0;
    let embedded_cluster = EmbeddedCluster::start(config).await.unwrap();
    let embedded_client = embedded_cluster.client().await;
    prepare(&embedded_client).await;
    let embedded = run_corpus(&embedded_client, &corpus).await;
    embedded_cluster.shutdown().await;

    if let Some(dir) = std::env::var_os("DIFFERENTIAL_DUMP") {
        let dump = |side: &str, answers: &[Answer]| {
            let all: Vec<Value> = corpus
                .iter()
                .zip(answers)
                .map(|(c, a)| json!({"what": c.what, "code": a.code, "body": a.body}))
                .collect();
            let path = std::path::Path::new(&dir).join(format!("{side}.json"));
            std::fs::write(
                &path,
                serde_json::to_string_pretty(&all).unwrap_or_default(),
            )
            .unwrap_or_else(|e| panic!("DIFFERENTIAL_DUMP {}: {e}", path.display()));
        };
        dump("embedded", &embedded);
        dump("real", &real);
    }
    let mut unexpected = Vec::new();
    let mut per_group: BTreeMap<&str, (usize, usize, usize)> = BTreeMap::new();
    let mut listed = Vec::new();
    for ((case, e), r) in corpus.iter().zip(&embedded).zip(&real) {
        if r.code != case.expect {
            unexpected.push(format!(
                "{} {}: the real server answered {} (expected {}): {}",
                case.group,
                case.what,
                r.code,
                case.expect,
                short(&r.body)
            ));
        }
        let (ne, nr) = (
            normalize(e, case.volatile, FieldSets::Compared),
            normalize(r, case.volatile, FieldSets::Compared),
        );
        let same_without_sets = normalize(e, case.volatile, FieldSets::Ignored)
            == normalize(r, case.volatile, FieldSets::Ignored);
        let entry = per_group.entry(case.group).or_default();
        entry.2 += 1;
        if same_without_sets {
            entry.1 += 1;
        }
        if ne == nr {
            entry.0 += 1;
        } else {
            let mut diffs = Vec::new();
            differences(&ne, &nr, "", &mut diffs);
            listed.push(format!(
                "[{}] {} ({} {}):\n    {}",
                case.group,
                case.what,
                case.method,
                case.path,
                diffs.join("\n    ")
            ));
        }
    }
    let (same, same_without_sets, total) = per_group
        .values()
        .fold((0, 0, 0), |(s, w, t), (a, b, c)| (s + a, w + b, t + c));
    println!(
        "{TEST}: identical answers per group, embedded vs real v1.37.2 (and without the managedFields' field sets):"
    );
    let pct = |n: usize, t: usize| 100.0 * n as f64 / t as f64;
    for (group, (s, w, t)) in &per_group {
        println!(
            "  {group:<10} {s:>3} / {t:<3} {:>5.1} %   ({w:>3} / {t:<3} {:>5.1} %)",
            pct(*s, *t),
            pct(*w, *t)
        );
    }
    println!(
        "  {:<10} {same:>3} / {total:<3} {:>5.1} %   ({same_without_sets:>3} / {total:<3} {:>5.1} %)",
        "all",
        pct(same, total),
        pct(same_without_sets, total)
    );
    println!("{TEST}: differences:");
    for d in &listed {
        println!("{d}");
    }
    assert!(
        unexpected.is_empty(),
        "the corpus drifted from the real server:\n{}",
        unexpected.join("\n")
    );
    let share = same as f64 / total as f64;
    assert!(
        share >= FLOOR,
        "{same} of {total} identical answers, below the floor {FLOOR}"
    );
    let share_without_sets = same_without_sets as f64 / total as f64;
    assert!(
        share_without_sets >= FLOOR_WITHOUT_FIELD_SETS,
        "{same_without_sets} of {total} identical answers without field sets, below the floor {FLOOR_WITHOUT_FIELD_SETS}"
    );
}

#[test]
fn the_comparison_sees_a_field_and_ignores_per_server_values() {
    let a = Answer {
        code: 201,
        body: json!({"metadata": {"name": "x", "uid": "1", "resourceVersion": "5",
                     "creationTimestamp": "2026-01-01T00:00:00Z",
                     "managedFields": [{"manager": "m", "time": "2026-01-01T00:00:00Z"}]},
                     "spec": {"clusterIP": "10.0.0.5", "a": 1}}),
    };
    let mut b = a.clone();
    b.body["metadata"]["uid"] = json!("2");
    b.body["metadata"]["resourceVersion"] = json!("9");
    b.body["metadata"]["managedFields"][0]["time"] = json!("2027-01-01T00:00:00Z");
    b.body["spec"]["clusterIP"] = json!("10.0.0.9");
    assert_eq!(
        normalize(&a, &["/spec/clusterIP"], FieldSets::Compared),
        normalize(&b, &["/spec/clusterIP"], FieldSets::Compared)
    );
    assert_ne!(
        normalize(&a, &[], FieldSets::Compared),
        normalize(&b, &[], FieldSets::Compared)
    );
    b.body["spec"]["a"] = json!(2);
    let mut diffs = Vec::new();
    differences(
        &normalize(&a, &["/spec/clusterIP"], FieldSets::Compared),
        &normalize(&b, &["/spec/clusterIP"], FieldSets::Compared),
        "",
        &mut diffs,
    );
    assert_eq!(diffs, ["/body/spec/a: embedded 1 real 2"]);

    let mut c = a.clone();
    c.body["metadata"]["managedFields"][0]["fieldsV1"] = json!({"f:spec": {"f:a": {}}});
    assert_ne!(
        normalize(&a, &[], FieldSets::Compared),
        normalize(&c, &[], FieldSets::Compared)
    );
    assert_eq!(
        normalize(&a, &[], FieldSets::Ignored),
        normalize(&c, &[], FieldSets::Ignored)
    );

    // entries ordered by the second they were written in compare equal once times are gone
    let two = |first: &str, second: &str| Answer {
        code: 200,
        body: json!({"metadata": {"managedFields": [
            {"manager": first, "operation": "Update", "time": "2026-01-01T00:00:00Z"},
            {"manager": second, "operation": "Update", "time": "2026-01-01T00:00:01Z"}]}}),
    };
    assert_eq!(
        normalize(&two("a", "b"), &[], FieldSets::Compared),
        normalize(&two("b", "a"), &[], FieldSets::Compared)
    );

    let status = |reason: &str| Answer {
        code: 409,
        body: json!({"kind": "Status", "status": "Failure", "reason": reason, "message": "any words"}),
    };
    assert_eq!(
        normalize(&status("Conflict"), &[], FieldSets::Compared),
        normalize(&status("Conflict"), &[], FieldSets::Compared)
    );
    assert_ne!(
        normalize(&status("Conflict"), &[], FieldSets::Compared),
        normalize(&status("AlreadyExists"), &[], FieldSets::Compared)
    );
}
