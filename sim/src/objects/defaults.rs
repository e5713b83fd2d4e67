//! Built-in defaulting, as a real API server applies it on every write of a built-in kind
//! (so a field the client left out reads back with the server's value, and a write that leaves
//! it out again changes nothing): Deployment (replicas, strategy, revisionHistoryLimit,
//! progressDeadlineSeconds), StatefulSet (replicas, podManagementPolicy, updateStrategy with
//! partition, revisionHistoryLimit, persistentVolumeClaimRetentionPolicy), Job (parallelism, completions, backoffLimit, completionMode,
//! suspend, manualSelector), CronJob (concurrencyPolicy, suspend, history limits), Service (sessionAffinity,
//! port protocol and targetPort), and the pod spec inside Pods and templates (restartPolicy,
//! dnsPolicy, schedulerName, terminationGracePeriodSeconds, securityContext, and per container
//! imagePullPolicy, terminationMessagePath / Policy, port protocol).

use serde_json::{Map, Value, json};

/// Sets `key` to `value` in `map` when it is absent or null.
fn default(map: &mut Map<String, Value>, key: &str, value: Value) {
    if map.get(key).is_none_or(Value::is_null) {
        map.insert(key.to_string(), value);
    }
}

/// The object at `key` in `map`, created as `{}` when absent or null; None when it is
/// something else (left for validation to refuse).
fn object_at<'a>(map: &'a mut Map<String, Value>, key: &str) -> Option<&'a mut Map<String, Value>> {
    default(map, key, json!({}));
    map.get_mut(key).and_then(Value::as_object_mut)
}

/// Applies the defaults of `group/resource` to `obj` (other kinds are left as they are).
pub fn apply(group: &str, resource: &str, obj: &mut Value) {
    let Some(root) = obj.as_object_mut() else {
        return;
    };
    match (group, resource) {
        ("apps", "deployments") => deployment(root),
        ("apps", "daemonsets") => daemon_set(root),
        ("apps", "statefulsets") => stateful_set(root),
        ("apps", "replicasets") | ("", "replicationcontrollers") => {
            if resource == "replicationcontrollers" {
                labels_from_template(root, true);
            }
            if let Some(spec) = object_at(root, "spec") {
                default(spec, "replicas", json!(1));
                template(spec, "Always");
            }
        }
        ("batch", "jobs") => {
            labels_from_template(root, false);
            if let Some(spec) = object_at(root, "spec") {
                job_spec(spec);
            }
        }
        ("", "configmaps") | ("", "secrets") => {
            // `omitempty` maps of the typed struct: an empty one is not encoded
            root.retain(|key, value| {
                !(matches!(key.as_str(), "data" | "binaryData")
                    && value.as_object().is_some_and(Map::is_empty))
            });
        }
        ("batch", "cronjobs") => cron_job(root),
        ("", "services") => service(root),
        ("", "pods") => {
            if let Some(spec) = object_at(root, "spec") {
                pod_spec(spec, "Always");
                // a Pod's own defaulting, not its templates'
                default(spec, "enableServiceLinks", json!(true));
            }
        }
        ("", "limitranges") => limit_range(root),
        _ => {}
    }
}

/// A LimitRange's Container items: a missing default limit is the max, a missing default
/// request the default limit, else the min.
fn limit_range(root: &mut Map<String, Value>) {
    let Some(items) = root
        .get_mut("spec")
        .and_then(|s| s.get_mut("limits"))
        .and_then(Value::as_array_mut)
    else {
        return;
    };
    for item in items.iter_mut().filter_map(Value::as_object_mut) {
        if item.get("type").and_then(Value::as_str) != Some("Container") {
            continue;
        }
        let values = |item: &Map<String, Value>, key: &str| {
            item.get(key)
                .and_then(Value::as_object)
                .cloned()
                .unwrap_or_default()
        };
        let mut limits = values(item, "default");
        for (k, v) in values(item, "max") {
            limits.entry(k).or_insert(v);
        }
        let mut requests = values(item, "defaultRequest");
        for (k, v) in limits.iter().chain(values(item, "min").iter()) {
            requests.entry(k.clone()).or_insert_with(|| v.clone());
        }
        for (key, map) in [("default", limits), ("defaultRequest", requests)] {
            if !map.is_empty() {
                item.insert(key.into(), Value::Object(map));
            }
        }
    }
}

/// What a real API server's strategies set on a new object of a built-in kind (once, at
/// creation, after its writer's managedFields are taken, so nobody owns these): a Namespace's
/// `kubernetes` finalizer, a Job's generated selector and its controller-uid and job-name
/// template labels, and the status counts the typed status structs always encode (zero until
/// a controller counts).
pub fn on_create(group: &str, resource: &str, obj: &mut Value) {
    let Some(root) = obj.as_object_mut() else {
        return;
    };
    match (group, resource) {
        ("", "namespaces") => {
            if let Some(spec) = object_at(root, "spec") {
                default(spec, "finalizers", json!(["kubernetes"]));
            }
        }
        ("batch", "jobs") => job_selector(root),
        ("apps", "daemonsets") => {
            zero_status(
                root,
                &[
                    "currentNumberScheduled",
                    "desiredNumberScheduled",
                    "numberMisscheduled",
                    "numberReady",
                ],
            );
        }
        ("apps", "replicasets") | ("", "replicationcontrollers") => {
            zero_status(root, &["replicas"])
        }
        ("apps", "statefulsets") => zero_status(root, &["replicas", "availableReplicas"]),
        _ => {}
    }
}

/// A DaemonSet's template generation, published in an annotation: 1 at creation, the next
/// one when an update changes the pod template (defaulting, so its writer owns it).
pub fn template_generation(group: &str, resource: &str, old: Option<&Value>, obj: &mut Value) {
    if (group, resource) != ("apps", "daemonsets") {
        return;
    }
    let next = match old {
        None => 1,
        Some(old) => {
            let previous = old
                .pointer("/metadata/annotations")
                .and_then(|a| a.get(TEMPLATE_GENERATION))
                .and_then(Value::as_str)
                .and_then(|g| g.parse::<u64>().ok())
                .unwrap_or(1);
            if old.pointer("/spec/template") == obj.pointer("/spec/template") {
                previous
            } else {
                previous + 1
            }
        }
    };
    if let Some(root) = obj.as_object_mut()
        && let Some(meta) = object_at(root, "metadata")
        && let Some(annotations) = object_at(meta, "annotations")
    {
        annotations.insert(TEMPLATE_GENERATION.into(), json!(next.to_string()));
    }
}

/// The annotation a DaemonSet's template generation is published in.
const TEMPLATE_GENERATION: &str = "deprecated.daemonset.template.generation";

/// Sets each of `fields` of an empty or absent status to 0.
fn zero_status(root: &mut Map<String, Value>, fields: &[&str]) {
    if let Some(status) = object_at(root, "status")
        && status.is_empty()
    {
        for field in fields {
            status.insert((*field).into(), json!(0));
        }
    }
}

/// A Job without `manualSelector: true` gets a selector on its own uid, and its template the
/// labels that selector and `kubectl logs job/NAME` use (a label the client set is kept).
fn job_selector(root: &mut Map<String, Value>) {
    let meta = |key: &str| {
        root.get("metadata")
            .and_then(|m| m.get(key))
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    let (name, uid) = (meta("name"), meta("uid"));
    let Some(spec) = object_at(root, "spec") else {
        return;
    };
    if spec.get("manualSelector").and_then(Value::as_bool) == Some(true) {
        return;
    }
    if let Some(template) = object_at(spec, "template")
        && let Some(meta) = object_at(template, "metadata")
        && let Some(labels) = object_at(meta, "labels")
    {
        for (label, value) in [
            (crate::controllers::jobs::LEGACY_JOB_NAME_LABEL, &name),
            (crate::controllers::jobs::JOB_NAME_LABEL, &name),
            (crate::controllers::jobs::LEGACY_CONTROLLER_UID_LABEL, &uid),
            (crate::controllers::jobs::CONTROLLER_UID_LABEL, &uid),
        ] {
            default(labels, label, json!(value));
        }
    }
    if let Some(selector) = object_at(spec, "selector")
        && let Some(match_labels) = object_at(selector, "matchLabels")
    {
        default(
            match_labels,
            crate::controllers::jobs::CONTROLLER_UID_LABEL,
            json!(uid),
        );
    }
}

/// An object without labels gets its pod template's (a Job's and a ReplicationController's
/// defaulting; a ReplicationController's empty selector is its template's labels too).
fn labels_from_template(root: &mut Map<String, Value>, selector_too: bool) {
    let Some(labels) = root
        .get("spec")
        .and_then(|s| s.pointer("/template/metadata/labels"))
        .filter(|l| l.as_object().is_some_and(|m| !m.is_empty()))
        .cloned()
    else {
        return;
    };
    if selector_too
        && let Some(spec) = object_at(root, "spec")
        && spec
            .get("selector")
            .is_none_or(|s| s.as_object().is_none_or(|m| m.is_empty()))
    {
        spec.insert("selector".into(), labels.clone());
    }
    if let Some(meta) = object_at(root, "metadata")
        && meta
            .get("labels")
            .is_none_or(|l| l.as_object().is_none_or(|m| m.is_empty()))
    {
        meta.insert("labels".into(), labels);
    }
}

fn deployment(root: &mut Map<String, Value>) {
    let Some(spec) = object_at(root, "spec") else {
        return;
    };
    default(spec, "replicas", json!(1));
    default(spec, "revisionHistoryLimit", json!(10));
    default(spec, "progressDeadlineSeconds", json!(600));
    if let Some(strategy) = object_at(spec, "strategy") {
        default(strategy, "type", json!("RollingUpdate"));
        if strategy.get("type").and_then(Value::as_str) == Some("RollingUpdate")
            && let Some(rolling) = object_at(strategy, "rollingUpdate")
        {
            default(rolling, "maxUnavailable", json!("25%"));
            default(rolling, "maxSurge", json!("25%"));
        }
    }
    template(spec, "Always");
}

fn daemon_set(root: &mut Map<String, Value>) {
    let Some(spec) = object_at(root, "spec") else {
        return;
    };
    default(spec, "revisionHistoryLimit", json!(10));
    if let Some(strategy) = object_at(spec, "updateStrategy") {
        default(strategy, "type", json!("RollingUpdate"));
        if strategy.get("type").and_then(Value::as_str) == Some("RollingUpdate")
            && let Some(rolling) = object_at(strategy, "rollingUpdate")
        {
            default(rolling, "maxUnavailable", json!(1));
            default(rolling, "maxSurge", json!(0));
        }
    }
    template(spec, "Always");
}

fn stateful_set(root: &mut Map<String, Value>) {
    let Some(spec) = object_at(root, "spec") else {
        return;
    };
    default(spec, "replicas", json!(1));
    default(spec, "revisionHistoryLimit", json!(10));
    default(spec, "podManagementPolicy", json!("OrderedReady"));
    if let Some(strategy) = object_at(spec, "updateStrategy") {
        default(strategy, "type", json!("RollingUpdate"));
        if strategy.get("type").and_then(Value::as_str) == Some("RollingUpdate")
            && let Some(rolling) = object_at(strategy, "rollingUpdate")
        {
            default(rolling, "partition", json!(0));
        }
    }
    if let Some(retention) = object_at(spec, "persistentVolumeClaimRetentionPolicy") {
        default(retention, "whenDeleted", json!("Retain"));
        default(retention, "whenScaled", json!("Retain"));
    }
    template(spec, "Always");
}

fn job_spec(spec: &mut Map<String, Value>) {
    // completions defaults to 1 only for a Job that sets neither (else it is a work queue)
    if spec.get("completions").is_none_or(Value::is_null)
        && spec.get("parallelism").is_none_or(Value::is_null)
    {
        default(spec, "completions", json!(1));
    }
    default(spec, "parallelism", json!(1));
    default(spec, "backoffLimit", json!(6));
    default(spec, "completionMode", json!("NonIndexed"));
    default(spec, "suspend", json!(false));
    // defaulted, so the writer owns it (kube-apiserver v1.37.2's managedFields say so)
    default(spec, "manualSelector", json!(false));
    default(spec, "podReplacementPolicy", json!("TerminatingOrFailed"));
    // "Always" like every pod template: Job validation then refuses it, as on a real server
    template(spec, "Always");
}

fn cron_job(root: &mut Map<String, Value>) {
    let Some(spec) = object_at(root, "spec") else {
        return;
    };
    default(spec, "concurrencyPolicy", json!("Allow"));
    default(spec, "suspend", json!(false));
    default(spec, "successfulJobsHistoryLimit", json!(3));
    default(spec, "failedJobsHistoryLimit", json!(1));
    if let Some(job_template) = object_at(spec, "jobTemplate")
        && let Some(job) = object_at(job_template, "spec")
    {
        job_spec(job);
    }
}

fn service(root: &mut Map<String, Value>) {
    let Some(spec) = object_at(root, "spec") else {
        return;
    };
    default(spec, "type", json!("ClusterIP"));
    default(spec, "sessionAffinity", json!("None"));
    if spec.get("type").and_then(Value::as_str) != Some("ExternalName") {
        default(spec, "internalTrafficPolicy", json!("Cluster"));
    }
    if let Some(ports) = spec.get_mut("ports").and_then(Value::as_array_mut) {
        for port in ports.iter_mut().filter_map(Value::as_object_mut) {
            default(port, "protocol", json!("TCP"));
            if let Some(p) = port.get("port").cloned() {
                default(port, "targetPort", p);
            }
        }
    }
}

fn template(spec: &mut Map<String, Value>, restart: &str) {
    if let Some(template) = spec.get_mut("template").and_then(Value::as_object_mut)
        && let Some(pod) = object_at(template, "spec")
    {
        pod_spec(pod, restart);
    }
}

fn pod_spec(spec: &mut Map<String, Value>, restart: &str) {
    default(spec, "restartPolicy", json!(restart));
    default(spec, "dnsPolicy", json!("ClusterFirst"));
    default(spec, "schedulerName", json!("default-scheduler"));
    default(spec, "terminationGracePeriodSeconds", json!(30));
    default(spec, "securityContext", json!({}));
    for key in ["containers", "initContainers"] {
        if let Some(list) = spec.get_mut(key).and_then(Value::as_array_mut) {
            for c in list.iter_mut().filter_map(Value::as_object_mut) {
                container(c);
            }
        }
    }
}

/// `Always` for an image without a tag or with `:latest`, else `IfNotPresent`.
fn pull_policy(image: &str) -> &'static str {
    let last = image.rsplit('/').next().unwrap_or(image);
    let tag = last.split('@').next().unwrap_or(last).split_once(':');
    match tag {
        _ if last.contains('@') => "IfNotPresent",
        None => "Always",
        Some((_, "latest")) => "Always",
        Some(_) => "IfNotPresent",
    }
}

fn container(c: &mut Map<String, Value>) {
    let image = c
        .get("image")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    default(c, "imagePullPolicy", json!(pull_policy(&image)));
    default(c, "terminationMessagePath", json!("/dev/termination-log"));
    default(c, "terminationMessagePolicy", json!("File"));
    default(c, "resources", json!({}));
    if let Some(ports) = c.get_mut("ports").and_then(Value::as_array_mut) {
        for port in ports.iter_mut().filter_map(Value::as_object_mut) {
            default(port, "protocol", json!("TCP"));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deployment_defaults() {
        let mut d = json!({"spec": {"replicas": 3, "template": {"spec": {"containers": [
            {"name": "web", "image": "nginx:1.27", "ports": [{"containerPort": 80}]}]}}}});
        apply("apps", "deployments", &mut d);
        assert_eq!(d["spec"]["replicas"], 3);
        assert_eq!(d["spec"]["revisionHistoryLimit"], 10);
        assert_eq!(d["spec"]["progressDeadlineSeconds"], 600);
        assert_eq!(d["spec"]["strategy"]["type"], "RollingUpdate");
        assert_eq!(d["spec"]["strategy"]["rollingUpdate"]["maxSurge"], "25%");
        let pod = &d["spec"]["template"]["spec"];
        assert_eq!(pod["restartPolicy"], "Always");
        assert_eq!(pod["containers"][0]["imagePullPolicy"], "IfNotPresent");
        assert_eq!(pod["containers"][0]["ports"][0]["protocol"], "TCP");
        let again = d.clone();
        apply("apps", "deployments", &mut d);
        assert_eq!(d, again, "defaulting is idempotent");
    }

    #[test]
    fn daemon_set_and_replica_set_defaults() {
        let mut ds = json!({"spec": {"template": {"spec": {"containers": [{"name": "c", "image": "i:1"}]}}}});
        apply("apps", "daemonsets", &mut ds);
        assert_eq!(ds["spec"]["updateStrategy"]["type"], "RollingUpdate");
        assert_eq!(
            ds["spec"]["updateStrategy"]["rollingUpdate"]["maxUnavailable"],
            1
        );
        assert_eq!(ds["spec"]["revisionHistoryLimit"], 10);
        assert_eq!(ds["spec"]["template"]["spec"]["restartPolicy"], "Always");
        let mut rc = json!({"spec": {"template": {"spec": {"containers": []}}}});
        apply("", "replicationcontrollers", &mut rc);
        assert_eq!(rc["spec"]["replicas"], 1);
    }

    #[test]
    fn recreate_strategy_gets_no_rolling_update() {
        let mut d = json!({"spec": {"strategy": {"type": "Recreate"}}});
        apply("apps", "deployments", &mut d);
        assert!(d["spec"]["strategy"].get("rollingUpdate").is_none());
    }

    #[test]
    fn image_pull_policies() {
        assert_eq!(pull_policy("nginx"), "Always");
        assert_eq!(pull_policy("nginx:latest"), "Always");
        assert_eq!(pull_policy("registry:5000/nginx"), "Always");
        assert_eq!(pull_policy("registry:5000/nginx:1.2"), "IfNotPresent");
        assert_eq!(pull_policy("nginx@sha256:abc"), "IfNotPresent");
    }

    #[test]
    fn job_cronjob_and_service_defaults() {
        let mut j = json!({"spec": {"template": {"spec": {"containers": []}}}});
        apply("batch", "jobs", &mut j);
        assert_eq!(j["spec"]["backoffLimit"], 6);
        assert_eq!(j["spec"]["template"]["spec"]["restartPolicy"], "Always");
        let mut c = json!({"spec": {"schedule": "* * * * *", "jobTemplate": {"spec": {}}}});
        apply("batch", "cronjobs", &mut c);
        assert_eq!(c["spec"]["concurrencyPolicy"], "Allow");
        assert_eq!(c["spec"]["jobTemplate"]["spec"]["completions"], 1);
        let mut s = json!({"spec": {"ports": [{"port": 8776}]}});
        apply("", "services", &mut s);
        assert_eq!(s["spec"]["ports"][0]["targetPort"], 8776);
        assert_eq!(s["spec"]["sessionAffinity"], "None");
    }
}
