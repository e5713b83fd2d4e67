//! The simulated scheduler's decision: which node a pod fits on. Filters as kube-scheduler
//! does for nodeSelector, required node affinity, taints with effect NoSchedule or NoExecute
//! (cordoned nodes carry `node.kubernetes.io/unschedulable`), NotReady nodes, and cpu, memory
//! and pod count requests against allocatable; among the nodes that fit, the one running the
//! fewest pods wins (spreading), by name on a tie. A pod that fits nowhere gets the
//! FailedScheduling message kube-scheduler writes (`0/3 nodes are available: ...`).

use std::collections::{BTreeMap, HashMap};

use serde_json::Value;

use super::quantity;

/// Taint cordoned nodes carry.
pub const UNSCHEDULABLE_TAINT: &str = "node.kubernetes.io/unschedulable";

fn str_at<'a>(v: &'a Value, pointer: &str) -> &'a str {
    v.pointer(pointer)
        .and_then(Value::as_str)
        .unwrap_or_default()
}

fn array_at<'a>(v: &'a Value, pointer: &str) -> &'a [Value] {
    v.pointer(pointer)
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default()
}

/// Whether a `nodeSelectorRequirement` holds for `labels`.
fn requirement_holds(requirement: &Value, labels: &Value) -> bool {
    let key = str_at(requirement, "/key");
    let value = labels.get(key).and_then(Value::as_str);
    let values: Vec<&str> = array_at(requirement, "/values")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    let number = |v: &str| v.parse::<i64>().ok();
    match str_at(requirement, "/operator") {
        "In" => value.is_some_and(|v| values.contains(&v)),
        "NotIn" => value.is_none_or(|v| !values.contains(&v)),
        "Exists" => value.is_some(),
        "DoesNotExist" => value.is_none(),
        "Gt" => value
            .and_then(number)
            .zip(values.first().copied().and_then(number))
            .is_some_and(|(v, bound)| v > bound),
        "Lt" => value
            .and_then(number)
            .zip(values.first().copied().and_then(number))
            .is_some_and(|(v, bound)| v < bound),
        _ => false,
    }
}

/// Whether the pod's nodeSelector and required node affinity accept `node`.
pub fn selector_accepts(pod: &Value, node: &Value) -> bool {
    let labels = node.pointer("/metadata/labels").unwrap_or(&Value::Null);
    let by_selector = pod
        .pointer("/spec/nodeSelector")
        .and_then(Value::as_object)
        .is_none_or(|m| m.iter().all(|(k, v)| labels.get(k) == Some(v)));
    let terms = pod.pointer(
        "/spec/affinity/nodeAffinity/requiredDuringSchedulingIgnoredDuringExecution/nodeSelectorTerms",
    );
    // matchFields knows one field, the node's name.
    let fields = serde_json::json!({"metadata.name": str_at(node, "/metadata/name")});
    let by_affinity = terms.and_then(Value::as_array).is_none_or(|terms| {
        terms.iter().any(|term| {
            array_at(term, "/matchExpressions")
                .iter()
                .all(|r| requirement_holds(r, labels))
                && array_at(term, "/matchFields")
                    .iter()
                    .all(|r| requirement_holds(r, &fields))
        })
    });
    by_selector && by_affinity
}

/// Whether `toleration` tolerates `taint`.
fn tolerates(toleration: &Value, taint: &Value) -> bool {
    let effect = str_at(toleration, "/effect");
    if !effect.is_empty() && effect != str_at(taint, "/effect") {
        return false;
    }
    let key = str_at(toleration, "/key");
    let operator = toleration
        .get("operator")
        .and_then(Value::as_str)
        .unwrap_or("Equal");
    if key.is_empty() {
        return operator == "Exists";
    }
    key == str_at(taint, "/key")
        && (operator == "Exists" || str_at(toleration, "/value") == str_at(taint, "/value"))
}

/// The first taint of `node` with effect NoSchedule or NoExecute the pod does not tolerate.
pub fn untolerated_taint<'a>(pod: &Value, node: &'a Value) -> Option<&'a Value> {
    let tolerations = array_at(pod, "/spec/tolerations");
    array_at(node, "/spec/taints").iter().find(|taint| {
        matches!(str_at(taint, "/effect"), "NoSchedule" | "NoExecute")
            && !tolerations.iter().any(|t| tolerates(t, taint))
    })
}

fn node_ready(node: &Value) -> bool {
    array_at(node, "/status/conditions")
        .iter()
        .any(|c| c["type"] == "Ready" && c["status"] == "True")
}

/// The cpu (millicores) and memory (bytes) a pod requests: its containers' requests (limits
/// when only limits are given), init containers' maximum if larger.
pub fn requests(pod: &Value) -> (i64, f64) {
    let of = |container: &Value| {
        let get = |name: &str| {
            container
                .pointer(&format!("/resources/requests/{name}"))
                .or(container.pointer(&format!("/resources/limits/{name}")))
                .and_then(Value::as_str)
        };
        (
            get("cpu").and_then(quantity::millicores).unwrap_or(0),
            get("memory").and_then(quantity::parse).unwrap_or(0.0),
        )
    };
    let (mut cpu, mut memory) = array_at(pod, "/spec/containers")
        .iter()
        .map(of)
        .fold((0, 0.0), |(c, m), (c2, m2)| (c + c2, m + m2));
    for init in array_at(pod, "/spec/initContainers") {
        let (c, m) = of(init);
        cpu = cpu.max(c);
        memory = memory.max(m);
    }
    (cpu, memory)
}

/// What the pods bound to one node (and not finished) take of it.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Load {
    /// How many pods.
    pub pods: usize,
    /// Their cpu requests, millicores.
    pub cpu: i64,
    /// Their memory requests, bytes.
    pub memory: f64,
}

impl Load {
    /// Counts one more pod requesting `requests` (see [`requests`]).
    pub fn add(&mut self, (cpu, memory): (i64, f64)) {
        self.pods += 1;
        self.cpu += cpu;
        self.memory += memory;
    }
}

/// The load per node name of `pods` (those bound to a node and still occupying it).
pub fn loads<'a>(pods: impl IntoIterator<Item = &'a Value>) -> HashMap<String, Load> {
    let mut loads: HashMap<String, Load> = HashMap::new();
    for pod in pods {
        let node = str_at(pod, "/spec/nodeName");
        if !node.is_empty() && occupies(pod) {
            loads.entry(node.to_owned()).or_default().add(requests(pod));
        }
    }
    loads
}

/// Why `node` cannot take `pod`, given the load of the pods already bound to it; None when it
/// fits.
pub fn misfit(pod: &Value, node: &Value, load: &Load) -> Option<String> {
    if !node_ready(node) {
        return Some("node(s) were not ready".into());
    }
    if let Some(taint) = untolerated_taint(pod, node) {
        if str_at(taint, "/key") == UNSCHEDULABLE_TAINT {
            return Some("node(s) were unschedulable".into());
        }
        let value = str_at(taint, "/value");
        return Some(format!(
            "node(s) had untolerated taint {{{}: {value}}}",
            str_at(taint, "/key")
        ));
    }
    if node.pointer("/spec/unschedulable") == Some(&Value::Bool(true)) {
        return Some("node(s) were unschedulable".into());
    }
    if !selector_accepts(pod, node) {
        return Some("node(s) didn't match Pod's node affinity/selector".into());
    }
    let allocatable = |name: &str| node.pointer(&format!("/status/allocatable/{name}"));
    let pods_allowed = allocatable("pods")
        .and_then(Value::as_str)
        .and_then(quantity::parse)
        .unwrap_or(110.0);
    if load.pods as f64 + 1.0 > pods_allowed {
        return Some("Too many pods".into());
    }
    let (cpu, memory) = requests(pod);
    let (used_cpu, used_memory) = (load.cpu, load.memory);
    if let Some(total) = allocatable("cpu")
        .and_then(Value::as_str)
        .and_then(quantity::millicores)
        && cpu > 0
        && used_cpu + cpu > total
    {
        return Some("Insufficient cpu".into());
    }
    if let Some(total) = allocatable("memory")
        .and_then(Value::as_str)
        .and_then(quantity::parse)
        && memory > 0.0
        && used_memory + memory > total
    {
        return Some("Insufficient memory".into());
    }
    None
}

/// Whether a pod still holds its node's resources (bound and not finished).
pub fn occupies(pod: &Value) -> bool {
    !matches!(str_at(pod, "/status/phase"), "Succeeded" | "Failed")
}

/// The node `pod` goes to, or the FailedScheduling message. `loads` are what the pods bound
/// to each node take of it (see [`loads`]; a node without an entry is empty).
pub fn choose_node(
    pod: &Value,
    nodes: &[Value],
    loads: &HashMap<String, Load>,
) -> Result<String, String> {
    let mut reasons: BTreeMap<String, usize> = BTreeMap::new();
    let mut best: Option<(usize, &str)> = None;
    let empty = Load::default();
    for node in nodes {
        let name = str_at(node, "/metadata/name");
        let load = loads.get(name).unwrap_or(&empty);
        match misfit(pod, node, load) {
            Some(reason) => *reasons.entry(reason).or_default() += 1,
            None => {
                // Fewest pods, then the first name: the same choice whatever order the
                // nodes come in (a store's order is arbitrary).
                if best.is_none_or(|(count, chosen)| (load.pods, name) < (count, chosen)) {
                    best = Some((load.pods, name));
                }
            }
        }
    }
    if let Some((_, name)) = best {
        return Ok(name.to_owned());
    }
    let total = nodes.len();
    if total == 0 {
        return Err("no nodes available to schedule pods".into());
    }
    let listed: Vec<String> = reasons
        .iter()
        .map(|(reason, count)| format!("{count} {reason}"))
        .collect();
    Err(format!(
        "0/{total} nodes are available: {}. preemption: 0/{total} nodes are available: {total} Preemption is not helpful for scheduling.",
        listed.join(", ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn node(name: &str, zone: &str) -> Value {
        json!({
            "metadata": {"name": name, "labels": {"topology.kubernetes.io/zone": zone, "kubernetes.io/hostname": name}},
            "spec": {},
            "status": {"allocatable": {"cpu": "2", "memory": "4Gi", "pods": "3"},
                       "conditions": [{"type": "Ready", "status": "True"}]}
        })
    }

    fn pod(spec: Value) -> Value {
        json!({"metadata": {"name": "p"}, "spec": spec})
    }

    fn none() -> HashMap<String, Load> {
        HashMap::new()
    }

    fn bound(name: &str, node: &str, cpu: &str) -> Value {
        json!({"metadata": {"name": name}, "spec": {"nodeName": node, "containers": [{"resources": {"requests": {"cpu": cpu}}}]},
               "status": {"phase": "Running"}})
    }

    #[test]
    fn spreads_over_the_least_loaded_fitting_node() {
        let nodes = vec![node("a", "z1"), node("b", "z2")];
        let pods = loads(&[bound("x", "a", "100m")]);
        assert_eq!(choose_node(&pod(json!({})), &nodes, &pods), Ok("b".into()));
        let zoned = pod(json!({"nodeSelector": {"topology.kubernetes.io/zone": "z1"}}));
        assert_eq!(choose_node(&zoned, &nodes, &pods), Ok("a".into()));
    }

    #[test]
    fn a_tie_goes_to_the_first_name_whatever_the_order() {
        let loaded = loads(&[bound("x", "b", "100m")]);
        for nodes in [
            vec![node("a", "z1"), node("b", "z1"), node("c", "z1")],
            vec![node("c", "z1"), node("b", "z1"), node("a", "z1")],
        ] {
            assert_eq!(
                choose_node(&pod(json!({})), &nodes, &none()),
                Ok("a".into())
            );
            assert_eq!(
                choose_node(&pod(json!({})), &nodes, &loaded),
                Ok("a".into())
            );
        }
    }

    #[test]
    fn unsatisfiable_selector_names_every_node() {
        let nodes = vec![node("a", "z1"), node("b", "z2"), node("c", "z3")];
        let message = choose_node(
            &pod(json!({"nodeSelector": {"disk": "ssd"}})),
            &nodes,
            &none(),
        )
        .unwrap_err();
        assert!(
            message.starts_with(
                "0/3 nodes are available: 3 node(s) didn't match Pod's node affinity/selector."
            ),
            "{message}"
        );
    }

    #[test]
    fn taints_cordons_affinity_and_requests() {
        let mut tainted = node("a", "z1");
        tainted["spec"]["taints"] =
            json!([{"key": "dedicated", "value": "db", "effect": "NoSchedule"}]);
        let mut cordoned = node("b", "z2");
        cordoned["spec"] = json!({"unschedulable": true, "taints": [{"key": UNSCHEDULABLE_TAINT, "effect": "NoSchedule"}]});
        let nodes = vec![tainted.clone(), cordoned];
        let message = choose_node(&pod(json!({})), &nodes, &none()).unwrap_err();
        assert!(
            message.contains("1 node(s) had untolerated taint {dedicated: db}"),
            "{message}"
        );
        assert!(
            message.contains("1 node(s) were unschedulable"),
            "{message}"
        );
        let tolerant = pod(json!({"tolerations": [{"key": "dedicated", "operator": "Exists"}]}));
        assert_eq!(choose_node(&tolerant, &nodes, &none()), Ok("a".into()));

        let affinity = pod(
            json!({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [{"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["z2"]}]}]}}}}),
        );
        let open = vec![node("a", "z1"), node("b", "z2")];
        assert_eq!(choose_node(&affinity, &open, &none()), Ok("b".into()));

        let big = pod(json!({"containers": [{"resources": {"requests": {"cpu": "1500m"}}}]}));
        let busy = loads(&[bound("x", "a", "1"), bound("y", "b", "1")]);
        let message = choose_node(&big, &open, &busy).unwrap_err();
        assert!(message.contains("2 Insufficient cpu"), "{message}");
        let full = [
            bound("1", "a", "0"),
            bound("2", "a", "0"),
            bound("3", "a", "0"),
        ];
        assert!(
            misfit(&pod(json!({})), &open[0], &loads(&full)["a"])
                .is_some_and(|m| m == "Too many pods")
        );
    }
}
