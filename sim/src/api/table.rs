//! Server-side printing: `meta.k8s.io/v1 Table` answers (Accept: application/json;as=Table) with
//! column definitions and rows — printer columns of CRDs evaluated by JSONPath, sensible columns
//! for built-ins — and includeObject=None/Metadata/Object.

use super::jsonpath;
use crate::registry::ResourceInfo;
use serde_json::{Value, json};

/// What each row carries of its object.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IncludeObject {
    None,
    Metadata,
    Object,
}

impl IncludeObject {
    pub fn parse(s: Option<&str>) -> IncludeObject {
        match s {
            Some("None") => IncludeObject::None,
            Some("Object") => IncludeObject::Object,
            _ => IncludeObject::Metadata,
        }
    }
}

/// Whether the Accept header asks for a Table.
pub fn wants_table(accept: &str) -> bool {
    accept
        .split(',')
        .next()
        .is_some_and(|first| first.contains("as=Table"))
}

enum Source {
    Name,
    Age,
    Path(String),
    Computed(fn(&Value) -> Value),
}

struct Column {
    name: String,
    type_: String,
    format: String,
    description: String,
    priority: i64,
    source: Source,
}

fn col(name: &str, type_: &str, source: Source) -> Column {
    Column {
        name: name.into(),
        type_: type_.into(),
        format: String::new(),
        description: String::new(),
        priority: 0,
        source,
    }
}

fn wide(name: &str, source: Source) -> Column {
    Column {
        priority: 1,
        ..col(name, "string", source)
    }
}

fn count_at(p: &'static str) -> Source {
    Source::Path(p.into())
}

fn node_status(o: &Value) -> Value {
    let ready = o
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .and_then(|cs| cs.iter().find(|c| c["type"] == "Ready"))
        .map(|c| c["status"] == "True");
    let mut status = match ready {
        Some(true) => "Ready".to_string(),
        Some(false) => "NotReady".to_string(),
        None => "Unknown".to_string(),
    };
    if o.pointer("/spec/unschedulable") == Some(&json!(true)) {
        status.push_str(",SchedulingDisabled");
    }
    json!(status)
}

fn node_roles(o: &Value) -> Value {
    let roles: Vec<&str> = o
        .pointer("/metadata/labels")
        .and_then(Value::as_object)
        .map(|labels| {
            labels
                .keys()
                .filter_map(|k| k.strip_prefix("node-role.kubernetes.io/"))
                .collect()
        })
        .unwrap_or_default();
    or_none(&roles.join(","))
}

fn node_address(o: &Value, kind: &str) -> Value {
    let address = o
        .pointer("/status/addresses")
        .and_then(Value::as_array)
        .and_then(|a| a.iter().find(|x| x["type"] == kind))
        .and_then(|x| x["address"].as_str())
        .unwrap_or_default();
    or_none(address)
}

fn node_internal_ip(o: &Value) -> Value {
    node_address(o, "InternalIP")
}

fn node_external_ip(o: &Value) -> Value {
    node_address(o, "ExternalIP")
}

fn pod_node(o: &Value) -> Value {
    or_none(s(o, "/spec/nodeName"))
}

fn pod_ip(o: &Value) -> Value {
    or_none(s(o, "/status/podIP"))
}

fn none_cell(_: &Value) -> Value {
    json!("<none>")
}

fn ds_node_selector(o: &Value) -> Value {
    let selector: Vec<String> = o
        .pointer("/spec/template/spec/nodeSelector")
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or_default()))
                .collect()
        })
        .unwrap_or_default();
    or_none(&selector.join(","))
}

fn num(v: &Value, p: &str) -> i64 {
    v.pointer(p).and_then(Value::as_i64).unwrap_or(0)
}

fn s<'a>(v: &'a Value, p: &str) -> &'a str {
    v.pointer(p).and_then(Value::as_str).unwrap_or("")
}

fn or_none(x: &str) -> Value {
    json!(if x.is_empty() { "<none>" } else { x })
}

fn pod_ready(o: &Value) -> Value {
    let total = o
        .pointer("/spec/containers")
        .and_then(Value::as_array)
        .map_or(0, Vec::len);
    let ready = o
        .pointer("/status/containerStatuses")
        .and_then(Value::as_array)
        .map_or(0, |a| {
            a.iter()
                .filter(|c| c.get("ready").and_then(Value::as_bool) == Some(true))
                .count()
        });
    json!(format!("{ready}/{total}"))
}

fn pod_status(o: &Value) -> Value {
    if o.pointer("/metadata/deletionTimestamp").is_some() {
        return json!("Terminating");
    }
    let waiting = o
        .pointer("/status/containerStatuses")
        .and_then(Value::as_array)
        .and_then(|a| {
            a.iter().find_map(|c| {
                c.pointer("/state/waiting/reason")
                    .or(c.pointer("/state/terminated/reason"))
                    .and_then(Value::as_str)
            })
        });
    match waiting {
        Some(r) => json!(r),
        None => or_none(s(o, "/status/phase")),
    }
}

fn pod_restarts(o: &Value) -> Value {
    json!(
        o.pointer("/status/containerStatuses")
            .and_then(Value::as_array)
            .map_or(0, |a| a
                .iter()
                .map(|c| num(c, "/restartCount"))
                .sum::<i64>())
    )
}

fn deploy_ready(o: &Value) -> Value {
    let want = o
        .pointer("/spec/replicas")
        .and_then(Value::as_i64)
        .unwrap_or(1);
    json!(format!("{}/{want}", num(o, "/status/readyReplicas")))
}

fn job_status(o: &Value) -> Value {
    let conds = o
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let has = |t: &str| {
        conds.iter().any(|c| {
            c.get("type").and_then(Value::as_str) == Some(t)
                && c.get("status").and_then(Value::as_str) == Some("True")
        })
    };
    json!(if has("Complete") {
        "Complete"
    } else if has("Failed") {
        "Failed"
    } else if o.pointer("/spec/suspend").and_then(Value::as_bool) == Some(true) {
        "Suspended"
    } else {
        "Running"
    })
}

fn job_completions(o: &Value) -> Value {
    let want = o
        .pointer("/spec/completions")
        .and_then(Value::as_i64)
        .unwrap_or(1);
    json!(format!("{}/{want}", num(o, "/status/succeeded")))
}

fn cron_active(o: &Value) -> Value {
    json!(
        o.pointer("/status/active")
            .and_then(Value::as_array)
            .map_or(0, Vec::len)
    )
}

fn svc_ports(o: &Value) -> Value {
    let ports: Vec<String> = o
        .pointer("/spec/ports")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .map(|p| {
                    format!(
                        "{}/{}",
                        num(p, "/port"),
                        p.get("protocol").and_then(Value::as_str).unwrap_or("TCP")
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    or_none(&ports.join(","))
}

/// A list of endpoints as kubectl prints it: the first three, then `+ N more...`.
fn first_three(items: Vec<String>) -> Value {
    match items.len() {
        0 => json!("<none>"),
        1..=3 => json!(items.join(",")),
        n => json!(format!("{} + {} more...", items[..3].join(","), n - 3)),
    }
}

/// Endpoints: `ip:port` of every ready address and port.
fn endpoints_list(o: &Value) -> Value {
    let mut items = Vec::new();
    for subset in o
        .get("subsets")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let ports: Vec<String> = subset
            .get("ports")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .map(|p| num(p, "/port").to_string())
            .collect();
        for address in subset
            .get("addresses")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let ip = address
                .get("ip")
                .and_then(Value::as_str)
                .unwrap_or_default();
            if ports.is_empty() {
                items.push(ip.to_string());
            }
            items.extend(ports.iter().map(|port| format!("{ip}:{port}")));
        }
    }
    first_three(items)
}

/// EndpointSlice ports: `8080,8443`, `<unset>` without any.
fn slice_ports(o: &Value) -> Value {
    let ports: Vec<String> = o
        .get("ports")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|p| num(p, "/port").to_string())
        .collect();
    if ports.is_empty() {
        json!("<unset>")
    } else {
        json!(ports.join(","))
    }
}

/// EndpointSlice endpoints: every address.
fn slice_endpoints(o: &Value) -> Value {
    let addresses: Vec<String> = o
        .get("endpoints")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .flat_map(|e| {
            e.get("addresses")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
        })
        .filter_map(Value::as_str)
        .map(str::to_string)
        .collect();
    first_three(addresses)
}

fn data_count(o: &Value) -> Value {
    let n = o
        .get("data")
        .and_then(Value::as_object)
        .map_or(0, |m| m.len())
        + o.get("binaryData")
            .and_then(Value::as_object)
            .map_or(0, |m| m.len());
    json!(n)
}

fn event_object(o: &Value) -> Value {
    let kind = s(o, "/involvedObject/kind").to_lowercase();
    let kind = if kind.is_empty() {
        s(o, "/regarding/kind").to_lowercase()
    } else {
        kind
    };
    let name = match s(o, "/involvedObject/name") {
        "" => s(o, "/regarding/name"),
        n => n,
    };
    json!(format!("{kind}/{name}"))
}

fn event_last_seen(o: &Value) -> Value {
    let ts = [
        "/lastTimestamp",
        "/eventTime",
        "/series/lastObservedTime",
        "/metadata/creationTimestamp",
    ]
    .iter()
    .find_map(|p| {
        o.pointer(p)
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
    })
    .unwrap_or_default();
    age_of(ts)
}

fn event_message(o: &Value) -> Value {
    match s(o, "/message") {
        "" => json!(s(o, "/note")),
        m => json!(m),
    }
}

fn columns(info: &ResourceInfo, version: &str) -> Vec<Column> {
    use Source::*;
    let mut cols = vec![col("Name", "string", Name)];
    cols[0].format = "name".into();
    cols[0].description = "Name must be unique within a namespace.".into();
    if let Some(crd) = &info.crd {
        for c in crd.columns.get(version).into_iter().flatten() {
            cols.push(Column {
                name: c.name.clone(),
                type_: c.type_.clone(),
                format: c.format.clone(),
                description: c.description.clone(),
                priority: c.priority,
                source: Path(c.json_path.clone()),
            });
        }
        if !cols.iter().any(|c| c.name == "Age") {
            cols.push(col("Age", "date", Age));
        }
        return cols;
    }
    if info.resource == "events" && (info.group.is_empty() || info.group == "events.k8s.io") {
        // like kubectl: Last Seen first, the name only in wide output
        let mut name = cols.remove(0);
        name.priority = 1;
        return vec![
            col("Last Seen", "string", Computed(event_last_seen)),
            col("Type", "string", Path(".type".into())),
            col("Reason", "string", Path(".reason".into())),
            col("Object", "string", Computed(event_object)),
            col("Message", "string", Computed(event_message)),
            name,
        ];
    }
    let more: Vec<Column> = match (info.group.as_str(), info.resource.as_str()) {
        ("", "pods") => vec![
            col("Ready", "string", Computed(pod_ready)),
            col("Status", "string", Computed(pod_status)),
            col("Restarts", "string", Computed(pod_restarts)),
            wide("IP", Computed(pod_ip)),
            wide("Node", Computed(pod_node)),
            wide("Nominated Node", Computed(none_cell)),
            wide("Readiness Gates", Computed(none_cell)),
        ],
        ("", "nodes") => vec![
            col("Status", "string", Computed(node_status)),
            col("Roles", "string", Computed(node_roles)),
            col("Age", "string", Age),
            col(
                "Version",
                "string",
                Path(".status.nodeInfo.kubeletVersion".into()),
            ),
            wide("Internal-IP", Computed(node_internal_ip)),
            wide("External-IP", Computed(node_external_ip)),
            wide("OS-Image", Path(".status.nodeInfo.osImage".into())),
            wide(
                "Kernel-Version",
                Path(".status.nodeInfo.kernelVersion".into()),
            ),
            wide(
                "Container-Runtime",
                Path(".status.nodeInfo.containerRuntimeVersion".into()),
            ),
        ],
        ("apps", "replicasets") | ("", "replicationcontrollers") => vec![
            col("Desired", "integer", count_at(".spec.replicas")),
            col("Current", "integer", count_at(".status.replicas")),
            col("Ready", "integer", count_at(".status.readyReplicas")),
        ],
        ("apps", "daemonsets") => vec![
            col(
                "Desired",
                "integer",
                count_at(".status.desiredNumberScheduled"),
            ),
            col(
                "Current",
                "integer",
                count_at(".status.currentNumberScheduled"),
            ),
            col("Ready", "integer", count_at(".status.numberReady")),
            col(
                "Up-to-date",
                "integer",
                count_at(".status.updatedNumberScheduled"),
            ),
            col("Available", "integer", count_at(".status.numberAvailable")),
            col("Node Selector", "string", Computed(ds_node_selector)),
        ],
        ("apps", "statefulsets") => vec![col("Ready", "string", Computed(deploy_ready))],
        ("apps", "deployments") => vec![
            col("Ready", "string", Computed(deploy_ready)),
            col(
                "Up-to-date",
                "string",
                Path(".status.updatedReplicas".into()),
            ),
            col(
                "Available",
                "string",
                Path(".status.availableReplicas".into()),
            ),
        ],
        ("batch", "jobs") => vec![
            col("Status", "string", Computed(job_status)),
            col("Completions", "string", Computed(job_completions)),
        ],
        ("batch", "cronjobs") => vec![
            col("Schedule", "string", Path(".spec.schedule".into())),
            col("Suspend", "boolean", Path(".spec.suspend".into())),
            col("Active", "integer", Computed(cron_active)),
            col(
                "Last Schedule",
                "string",
                Path(".status.lastScheduleTime".into()),
            ),
        ],
        ("", "services") => vec![
            col("Type", "string", Path(".spec.type".into())),
            col("Cluster-IP", "string", Path(".spec.clusterIP".into())),
            col("Port(s)", "string", Computed(svc_ports)),
        ],
        ("", "endpoints") => vec![col("Endpoints", "string", Computed(endpoints_list))],
        ("discovery.k8s.io", "endpointslices") => vec![
            col("AddressType", "string", Path(".addressType".into())),
            col("Ports", "string", Computed(slice_ports)),
            col("Endpoints", "string", Computed(slice_endpoints)),
        ],
        ("", "namespaces") => vec![col("Status", "string", Path(".status.phase".into()))],
        ("", "secrets") => vec![
            col("Type", "string", Path(".type".into())),
            col("Data", "string", Computed(data_count)),
        ],
        ("", "configmaps") => vec![col("Data", "string", Computed(data_count))],
        ("coordination.k8s.io", "leases") => {
            vec![col("Holder", "string", Path(".spec.holderIdentity".into()))]
        }
        ("apiextensions.k8s.io", "customresourcedefinitions") => vec![col(
            "Created At",
            "date",
            Path(".metadata.creationTimestamp".into()),
        )],
        _ => Vec::new(),
    };
    cols.extend(more);
    if !cols.iter().any(|c| c.name == "Age") {
        // Age closes the default columns; wide-only ones (priority 1) follow it.
        let at = cols
            .iter()
            .position(|c| c.priority > 0)
            .unwrap_or(cols.len());
        cols.insert(at, col("Age", "string", Age));
    }
    cols
}

/// A human duration like kubectl's ("45s", "3m12s", "2h", "5d").
pub fn human_duration(secs: i64) -> String {
    let secs = secs.max(0);
    let (m, h, d) = (secs / 60, secs / 3600, secs / 86_400);
    if secs < 120 {
        format!("{secs}s")
    } else if m < 10 {
        format!("{m}m{}s", secs % 60)
    } else if m < 180 {
        format!("{m}m")
    } else if h < 8 {
        format!("{h}h{}m", m % 60)
    } else if h < 48 {
        format!("{h}h")
    } else if h < 192 {
        format!("{d}d{}h", h % 24)
    } else if d < 730 {
        format!("{d}d")
    } else {
        format!("{}y{}d", d / 365, d % 365)
    }
}

fn age_of(ts: &str) -> Value {
    match chrono::DateTime::parse_from_rfc3339(ts) {
        Ok(t) => json!(human_duration(
            (chrono::Utc::now() - t.with_timezone(&chrono::Utc)).num_seconds()
        )),
        Err(_) => json!("<unknown>"),
    }
}

fn cell(c: &Column, o: &Value) -> Value {
    match &c.source {
        Source::Name => json!(s(o, "/metadata/name")),
        Source::Age => age_of(s(o, "/metadata/creationTimestamp")),
        Source::Computed(f) => f(o),
        Source::Path(p) => {
            let found = jsonpath::eval(o, p);
            match found.as_slice() {
                [] => Value::Null,
                [one] if c.type_ == "date" => one.as_str().map(age_of).unwrap_or(Value::Null),
                [one] => (*one).clone(),
                many => json!(
                    many.iter()
                        .map(|v| v
                            .as_str()
                            .map(str::to_string)
                            .unwrap_or_else(|| v.to_string()))
                        .collect::<Vec<_>>()
                        .join(",")
                ),
            }
        }
    }
}

fn row(cols: &[Column], o: &Value, include: IncludeObject) -> Value {
    let cells: Vec<Value> = cols.iter().map(|c| cell(c, o)).collect();
    let mut r = json!({"cells": cells});
    match include {
        IncludeObject::None => {}
        IncludeObject::Object => r["object"] = o.clone(),
        IncludeObject::Metadata => {
            r["object"] = json!({"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": o.get("metadata").cloned().unwrap_or(json!({}))})
        }
    }
    r
}

/// A Table of `objects` with list metadata `meta`.
pub fn table(
    info: &ResourceInfo,
    version: &str,
    objects: &[Value],
    include: IncludeObject,
    meta: Value,
) -> Value {
    let cols = columns(info, version);
    let defs: Vec<Value> = cols
        .iter()
        .map(|c| json!({"name": c.name, "type": c.type_, "format": c.format, "description": c.description, "priority": c.priority}))
        .collect();
    let rows: Vec<Value> = objects.iter().map(|o| row(&cols, o, include)).collect();
    json!({"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": meta, "columnDefinitions": defs, "rows": rows})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(human_duration(5), "5s");
        assert_eq!(human_duration(190), "3m10s");
        assert_eq!(human_duration(3600 * 3 + 60), "3h1m");
        assert_eq!(human_duration(86_400 * 3), "3d0h");
    }
}
