//! The EndpointSlice controller (with the core/v1 Endpoints object a real endpoints controller
//! keeps beside it): for every Service with a selector, the pods it selects that have an IP and
//! have not finished become endpoints, as kube-controller-manager writes them.
//!
//! EndpointSlices (`discovery.k8s.io/v1`, address type IPv4) carry the labels
//! `kubernetes.io/service-name` and `endpointslice.kubernetes.io/managed-by:
//! endpointslice-controller.k8s.io` (plus the Service's own labels), a controller reference to
//! the Service, one endpoint per pod (its IPv4 addresses from `status.podIPs`, `conditions`
//! ready / serving / terminating from the pod's Ready condition and deletion, `nodeName`,
//! `zone` from the node's `topology.kubernetes.io/zone`, `hostname` when the pod's subdomain is
//! the Service, `targetRef` to the pod) and the Service's ports resolved against the pod
//! (`targetPort` by number, or by name through the containers' named ports; a pod lacking a
//! named port is left out of that port). Pods that resolve to the same ports share slices of at
//! most [`MAX_ENDPOINTS_PER_SLICE`]; a Service selecting nothing gets one slice without
//! endpoints. The Endpoints object (named as the Service) holds the same pods in subsets:
//! ready ones in `addresses`, the others in `notReadyAddresses`, Terminating ones left out.
//!
//! What to write is planned by the pure [`plan`]; the reconcile compares it with the stores and
//! writes only what differs. Slice names are `<service>-<hash of their ports and index>`, so a
//! reconcile that sees a stale store rewrites the same slice instead of adding one.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Endpoints, Node, Pod, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::{Api, DeleteParams, PostParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::watcher;
use kube::{Resource, ResourceExt};
use serde_json::{Value, json};

use super::pods::pod_status::is_ready;
use super::runtime::{ReconcileError, Shared, drain, retry};
use crate::store::selectors::map_selects;

/// The label naming a slice's Service.
pub const SERVICE_NAME_LABEL: &str = "kubernetes.io/service-name";
/// The label naming who manages a slice.
pub const MANAGED_BY_LABEL: &str = "endpointslice.kubernetes.io/managed-by";
/// The manager name of the real controller, which this one stands in for.
pub const MANAGED_BY: &str = "endpointslice-controller.k8s.io";
/// How many endpoints one slice holds at most (the real controller's default).
pub const MAX_ENDPOINTS_PER_SLICE: usize = 100;

/// The objects one Service should have.
#[derive(Debug, Clone, PartialEq)]
pub struct Planned {
    /// Its EndpointSlices, by name.
    pub slices: BTreeMap<String, Value>,
    /// Its Endpoints object.
    pub endpoints: Value,
}

/// One subset of an Endpoints object: its ready and not-ready addresses and their ports.
#[derive(Default)]
struct Subset {
    ready: Vec<Value>,
    not_ready: Vec<Value>,
    ports: Vec<Value>,
}

/// The zone of a node, by node name.
pub type Zones<'a> = dyn Fn(&str) -> Option<String> + 'a;

/// What the controller should write for `service` given every pod of its namespace (`pods`)
/// and the zone of each node (`zone_of`). None when the Service has no selector (its endpoints
/// are someone else's) or is being deleted.
pub fn plan(service: &Value, pods: &[&Value], zone_of: &Zones<'_>) -> Option<Planned> {
    let selector = service.pointer("/spec/selector")?;
    if selector.as_object().is_none_or(|s| s.is_empty())
        || service.pointer("/metadata/deletionTimestamp").is_some()
    {
        return None;
    }
    let namespace = service.pointer("/metadata/namespace")?.as_str()?;
    let name = service.pointer("/metadata/name")?.as_str()?;
    let uid = service.pointer("/metadata/uid")?.as_str()?;
    let publish_not_ready = service
        .pointer("/spec/publishNotReadyAddresses")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let headless = service.pointer("/spec/clusterIP").and_then(Value::as_str) == Some("None");
    let owner = json!([{
        "apiVersion": "v1", "kind": "Service", "name": name, "uid": uid,
        "controller": true, "blockOwnerDeletion": true,
    }]);
    let mut labels = service
        .pointer("/metadata/labels")
        .cloned()
        .filter(Value::is_object)
        .unwrap_or_else(|| json!({}));
    labels[SERVICE_NAME_LABEL] = json!(name);
    labels[MANAGED_BY_LABEL] = json!(MANAGED_BY);
    if headless {
        labels["service.kubernetes.io/headless"] = json!("");
    }
    let service_ports: Vec<&Value> = service
        .pointer("/spec/ports")
        .and_then(Value::as_array)
        .map(|ports| ports.iter().collect())
        .unwrap_or_default();

    // Pods grouped by the ports they resolve to (a key both slices and subsets use).
    let mut groups: BTreeMap<String, (Vec<Value>, Vec<Value>)> = BTreeMap::new();
    let mut subsets: BTreeMap<String, Subset> = BTreeMap::new();
    let mut selected: Vec<&&Value> = pods
        .iter()
        .filter(|pod| {
            pod.pointer("/metadata/namespace").and_then(Value::as_str) == Some(namespace)
                && map_selects(
                    selector,
                    pod.pointer("/metadata/labels").unwrap_or(&Value::Null),
                )
        })
        .collect();
    let pod_name = |pod: &Value| {
        pod.pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    selected.sort_by_key(|pod| pod_name(pod));
    for pod in selected {
        let phase = pod.pointer("/status/phase").and_then(Value::as_str);
        let addresses = pod_ipv4s(pod);
        if addresses.is_empty() || matches!(phase, Some("Succeeded" | "Failed")) {
            continue;
        }
        let terminating = pod.pointer("/metadata/deletionTimestamp").is_some();
        let pod_ready = is_ready(pod);
        let ready = (pod_ready && !terminating) || publish_not_ready;
        let serving = pod_ready || publish_not_ready;
        let ports: Vec<Value> = service_ports
            .iter()
            .filter_map(|port| {
                let number = resolve_target_port(port, pod)?;
                let mut out = json!({
                    "name": port.get("name").and_then(Value::as_str).unwrap_or(""),
                    "port": number,
                    "protocol": port.get("protocol").and_then(Value::as_str).unwrap_or("TCP"),
                });
                if let Some(app) = port.get("appProtocol") {
                    out["appProtocol"] = app.clone();
                }
                Some(out)
            })
            .collect();
        let key = serde_json::to_string(&ports).unwrap_or_default();
        let pod_name = pod
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let target = json!({
            "kind": "Pod", "namespace": namespace, "name": pod_name,
            "uid": pod.pointer("/metadata/uid").cloned().unwrap_or(Value::Null),
        });
        let node = pod.pointer("/spec/nodeName").and_then(Value::as_str);
        let hostname = pod
            .pointer("/spec/hostname")
            .and_then(Value::as_str)
            .filter(|_| pod.pointer("/spec/subdomain").and_then(Value::as_str) == Some(name));
        let mut endpoint = json!({
            "addresses": addresses,
            "conditions": {"ready": ready, "serving": serving, "terminating": terminating},
            "targetRef": target,
        });
        if let Some(node) = node {
            endpoint["nodeName"] = json!(node);
            if let Some(zone) = zone_of(node) {
                endpoint["zone"] = json!(zone);
            }
        }
        if let Some(hostname) = hostname {
            endpoint["hostname"] = json!(hostname);
        }
        let group = groups.entry(key.clone()).or_insert((ports.clone(), vec![]));
        group.1.push(endpoint);

        if terminating && !publish_not_ready {
            continue;
        }
        let subset = subsets.entry(key).or_insert_with(|| Subset {
            ports,
            ..Subset::default()
        });
        for ip in pod_ipv4s(pod) {
            let mut address = json!({"ip": ip, "targetRef": target});
            if let Some(node) = node {
                address["nodeName"] = json!(node);
            }
            if let Some(hostname) = hostname {
                address["hostname"] = json!(hostname);
            }
            if ready {
                subset.ready.push(address);
            } else {
                subset.not_ready.push(address);
            }
        }
    }

    let slice = |ports: Option<&Vec<Value>>, endpoints: &[Value], key: &str, index: usize| {
        let slice_name = slice_name(name, key, index);
        let mut slice = json!({
            "apiVersion": "discovery.k8s.io/v1",
            "kind": "EndpointSlice",
            "metadata": {
                "name": slice_name, "namespace": namespace,
                "labels": labels, "ownerReferences": owner,
            },
            "addressType": "IPv4",
            "endpoints": endpoints,
        });
        if let Some(ports) = ports {
            slice["ports"] = json!(ports);
        }
        (slice_name, slice)
    };
    let mut slices = BTreeMap::new();
    for (key, (ports, endpoints)) in &groups {
        for (index, chunk) in endpoints.chunks(MAX_ENDPOINTS_PER_SLICE).enumerate() {
            let (slice_name, slice) = slice(Some(ports), chunk, key, index);
            slices.insert(slice_name, slice);
        }
    }
    if slices.is_empty() {
        let (slice_name, slice) = slice(None, &[], "", 0);
        slices.insert(slice_name, slice);
    }

    let mut endpoint_labels = service
        .pointer("/metadata/labels")
        .cloned()
        .filter(Value::is_object)
        .unwrap_or_else(|| json!({}));
    if headless {
        endpoint_labels["service.kubernetes.io/headless"] = json!("");
    }
    let subsets: Vec<Value> = subsets
        .into_values()
        .filter(|subset| !subset.ready.is_empty() || !subset.not_ready.is_empty())
        .map(|subset| {
            let ports: Vec<Value> = subset
                .ports
                .into_iter()
                .map(|mut port| {
                    if port["name"] == ""
                        && let Some(m) = port.as_object_mut()
                    {
                        m.remove("name");
                    }
                    port
                })
                .collect();
            let mut out = json!({"ports": ports});
            if !subset.ready.is_empty() {
                out["addresses"] = json!(subset.ready);
            }
            if !subset.not_ready.is_empty() {
                out["notReadyAddresses"] = json!(subset.not_ready);
            }
            out
        })
        .collect();
    let mut endpoints = json!({
        "apiVersion": "v1",
        "kind": "Endpoints",
        "metadata": {
            "name": name, "namespace": namespace,
            "labels": endpoint_labels, "ownerReferences": owner,
        },
    });
    if !subsets.is_empty() {
        endpoints["subsets"] = json!(subsets);
    }
    Some(Planned { slices, endpoints })
}

/// The pod's IPv4 addresses (`status.podIPs`, else `status.podIP`).
fn pod_ipv4s(pod: &Value) -> Vec<String> {
    let listed: Vec<String> = pod
        .pointer("/status/podIPs")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|entry| entry.get("ip").and_then(Value::as_str))
        .filter(|ip| ip.parse::<std::net::Ipv4Addr>().is_ok())
        .map(str::to_string)
        .collect();
    if !listed.is_empty() {
        return listed;
    }
    pod.pointer("/status/podIP")
        .and_then(Value::as_str)
        .filter(|ip| ip.parse::<std::net::Ipv4Addr>().is_ok())
        .map(|ip| vec![ip.to_string()])
        .unwrap_or_default()
}

/// The pod port a Service port reaches: `targetPort` as a number, or the containers' port of
/// that name and protocol; `port` when targetPort is unset. None when the pod has no such port.
fn resolve_target_port(port: &Value, pod: &Value) -> Option<i64> {
    let protocol = port
        .get("protocol")
        .and_then(Value::as_str)
        .unwrap_or("TCP");
    match port.get("targetPort") {
        Some(Value::Number(n)) => n.as_i64(),
        Some(Value::String(text)) => match text.parse::<i64>() {
            Ok(number) => Some(number),
            Err(_) => pod
                .pointer("/spec/containers")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .flat_map(|c| {
                    c.get("ports")
                        .and_then(Value::as_array)
                        .into_iter()
                        .flatten()
                })
                .find(|p| {
                    p.get("name").and_then(Value::as_str) == Some(text.as_str())
                        && p.get("protocol").and_then(Value::as_str).unwrap_or("TCP") == protocol
                })
                .and_then(|p| p.get("containerPort"))
                .and_then(Value::as_i64),
        },
        _ => port.get("port").and_then(Value::as_i64),
    }
}

/// `<service>-<5 hex digits of a hash of the ports key and the index>`.
fn slice_name(service: &str, key: &str, index: usize) -> String {
    let hash = format!("{key}#{index}")
        .bytes()
        .fold(2_166_136_261_u32, |h, b| {
            (h ^ u32::from(b)).wrapping_mul(16_777_619)
        });
    let base: String = service.chars().take(57).collect();
    format!("{base}-{:05x}", hash & 0xfffff)
}

struct Context {
    shared: Arc<Shared>,
}

/// Runs the controller until the task is aborted.
pub async fn run(shared: Arc<Shared>) {
    let api: Api<Service> = Api::all(shared.client.clone());
    let controller = Controller::new(api, watcher::Config::default());
    let services = controller.store();
    let slices = shared.informers.endpoint_slices.store();
    let pods = shared.informers.pods.subscribe();
    let context = Arc::new(Context {
        shared: Arc::clone(&shared),
    });
    let stream = controller
        .watches_shared_stream(pods, move |pod: Arc<Pod>| {
            services_of_pod(&services, &slices, &pod)
        })
        .owns_shared_stream(shared.informers.endpoint_slices.subscribe())
        .reconcile_all_on(shared.triggers())
        .run(reconcile, retry, context);
    drain(&shared, "endpointslice-controller", stream).await;
}

/// The Services a pod change may concern: those of its namespace that select it, and those
/// whose slices list it (it may have stopped matching).
fn services_of_pod(
    services: &Store<Service>,
    slices: &Store<EndpointSlice>,
    pod: &Pod,
) -> Vec<ObjectRef<Service>> {
    let namespace = pod.namespace().unwrap_or_default();
    let name = pod.name_any();
    let labels = serde_json::to_value(pod.labels()).unwrap_or(Value::Null);
    let mut refs: Vec<ObjectRef<Service>> = services
        .state()
        .iter()
        .filter(|s| s.namespace().as_deref() == Some(namespace.as_str()))
        .filter(|s| {
            let selector = s
                .spec
                .as_ref()
                .and_then(|spec| spec.selector.as_ref())
                .and_then(|sel| serde_json::to_value(sel).ok())
                .unwrap_or(Value::Null);
            map_selects(&selector, &labels)
        })
        .map(|s| ObjectRef::from_obj(s.as_ref()))
        .collect();
    for slice in slices.state() {
        if slice.namespace().as_deref() != Some(namespace.as_str()) {
            continue;
        }
        let lists_pod = slice.endpoints.iter().flatten().any(|e| {
            e.target_ref
                .as_ref()
                .is_some_and(|t| t.name.as_deref() == Some(name.as_str()))
        });
        if let (true, Some(service)) = (lists_pod, slice.labels().get(SERVICE_NAME_LABEL)) {
            refs.push(ObjectRef::new(service).within(&namespace));
        }
    }
    refs
}

async fn reconcile(service: Arc<Service>, ctx: Arc<Context>) -> Result<Action, ReconcileError> {
    let shared = &ctx.shared;
    if !shared.read(|c| c.endpoints.enabled) {
        return Ok(Action::await_change());
    }
    let namespace = service
        .namespace()
        .ok_or(ReconcileError::Missing("namespace"))?;
    let name = service.name_any();
    let uid = service.uid().ok_or(ReconcileError::Missing("uid"))?;
    let service_value = serde_json::to_value(service.as_ref())?;
    let pods = shared.informers.pods.ready().await;
    let pods: Vec<Value> = pods
        .state()
        .iter()
        .filter(|p| p.namespace().as_deref() == Some(namespace.as_str()))
        .map(|p| serde_json::to_value(p.as_ref()))
        .collect::<Result<_, _>>()?;
    let pod_refs: Vec<&Value> = pods.iter().collect();
    let nodes = shared.informers.nodes.ready().await;
    let zone_of = |node: &str| -> Option<String> {
        nodes
            .get(&ObjectRef::<Node>::new(node))
            .and_then(|n| n.labels().get("topology.kubernetes.io/zone").cloned())
    };
    let planned = plan(&service_value, &pod_refs, &zone_of);

    let slices_store = shared.informers.endpoint_slices.ready().await;
    let existing: Vec<Arc<EndpointSlice>> = slices_store
        .state()
        .into_iter()
        .filter(|s| {
            s.namespace().as_deref() == Some(namespace.as_str())
                && s.labels().get(SERVICE_NAME_LABEL) == Some(&name)
                && s.labels().get(MANAGED_BY_LABEL).map(String::as_str) == Some(MANAGED_BY)
        })
        .collect();
    let slices_api: Api<EndpointSlice> = Api::namespaced(shared.client.clone(), &namespace);
    let endpoints_api: Api<Endpoints> = Api::namespaced(shared.client.clone(), &namespace);
    let wanted = planned
        .as_ref()
        .map(|p| p.slices.clone())
        .unwrap_or_default();
    for (slice_name, desired) in &wanted {
        let desired: EndpointSlice = serde_json::from_value(desired.clone())?;
        match existing.iter().find(|s| &s.name_any() == slice_name) {
            Some(current) if same_slice(current, &desired) => {}
            Some(current) => {
                let mut replacement = desired;
                replacement.metadata.resource_version = current.resource_version();
                slices_api
                    .replace(slice_name, &PostParams::default(), &replacement)
                    .await?;
            }
            None => create_or_replace(&slices_api, slice_name, desired).await?,
        }
    }
    for stale in existing
        .iter()
        .filter(|s| !wanted.contains_key(&s.name_any()))
    {
        delete_if_present(&slices_api, &stale.name_any()).await?;
    }

    let endpoints_store = shared.informers.endpoints.ready().await;
    let current = endpoints_store.get(&ObjectRef::new(&name).within(&namespace));
    match planned {
        Some(planned) => {
            let desired: Endpoints = serde_json::from_value(planned.endpoints)?;
            match current {
                Some(current)
                    if current.subsets == desired.subsets
                        && current.metadata.labels == desired.metadata.labels
                        && current.metadata.owner_references
                            == desired.metadata.owner_references => {}
                Some(current) => {
                    let mut replacement = desired;
                    replacement.metadata.resource_version = current.resource_version();
                    endpoints_api
                        .replace(&name, &PostParams::default(), &replacement)
                        .await?;
                }
                None => create_or_replace(&endpoints_api, &name, desired).await?,
            }
        }
        // Endpoints of a Service without a selector are its owner's, unless this controller
        // wrote them (it owns them then).
        None => {
            if current.is_some_and(|c| {
                c.owner_references()
                    .iter()
                    .any(|o| o.uid == uid && o.controller == Some(true))
            }) {
                delete_if_present(&endpoints_api, &name).await?;
            }
        }
    }
    Ok(Action::await_change())
}

/// Whether a stored slice already says what `desired` says.
fn same_slice(current: &EndpointSlice, desired: &EndpointSlice) -> bool {
    current.address_type == desired.address_type
        && current.endpoints == desired.endpoints
        && current.ports.as_deref().unwrap_or_default()
            == desired.ports.as_deref().unwrap_or_default()
        && current.metadata.labels == desired.metadata.labels
        && current.metadata.owner_references == desired.metadata.owner_references
}

/// Creates `object`; when the store had not shown one that exists, replaces it instead.
async fn create_or_replace<K>(api: &Api<K>, name: &str, object: K) -> Result<(), ReconcileError>
where
    K: Resource + Clone + serde::Serialize + serde::de::DeserializeOwned + std::fmt::Debug,
{
    match api.create(&PostParams::default(), &object).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if status.code == 409 => {
            let current = api.get(name).await?;
            let mut replacement = object;
            replacement.meta_mut().resource_version = current.meta().resource_version.clone();
            api.replace(name, &PostParams::default(), &replacement)
                .await?;
            Ok(())
        }
        Err(error) => Err(error.into()),
    }
}

async fn delete_if_present<K>(api: &Api<K>, name: &str) -> Result<(), ReconcileError>
where
    K: Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    match api.delete(name, &DeleteParams::default()).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(()),
        Err(error) => Err(error.into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn service(ports: Value) -> Value {
        json!({
            "metadata": {"namespace": "ns", "name": "api", "uid": "svc-uid", "labels": {"app": "api"}},
            "spec": {"selector": {"app": "api"}, "clusterIP": "10.96.0.9", "ports": ports},
        })
    }

    fn pod(name: &str, ip: &str, ready: bool) -> Value {
        json!({
            "metadata": {"namespace": "ns", "name": name, "uid": format!("{name}-uid"), "labels": {"app": "api"}},
            "spec": {"nodeName": "n1", "containers": [{"name": "c", "ports": [{"name": "http", "containerPort": 8776}]}]},
            "status": {"phase": "Running", "podIP": ip, "podIPs": [{"ip": ip}],
                       "conditions": [{"type": "Ready", "status": if ready {"True"} else {"False"}}]},
        })
    }

    fn no_zone(_: &str) -> Option<String> {
        None
    }

    #[test]
    fn named_target_ports_resolve_through_container_ports() {
        let svc =
            service(json!([{"name": "api", "port": 80, "targetPort": "http", "protocol": "TCP"}]));
        let pods = [pod("a", "10.0.0.2", true), pod("b", "10.0.0.3", false)];
        let refs: Vec<&Value> = pods.iter().collect();
        let planned = plan(&svc, &refs, &|n| Some(format!("zone-of-{n}"))).unwrap();
        assert_eq!(planned.slices.len(), 1);
        let slice = planned.slices.values().next().unwrap();
        assert_eq!(slice["metadata"]["labels"][SERVICE_NAME_LABEL], "api");
        assert_eq!(slice["metadata"]["labels"][MANAGED_BY_LABEL], MANAGED_BY);
        assert_eq!(slice["metadata"]["labels"]["app"], "api");
        assert_eq!(slice["metadata"]["ownerReferences"][0]["uid"], "svc-uid");
        assert_eq!(slice["addressType"], "IPv4");
        assert_eq!(
            slice["ports"],
            json!([{"name": "api", "port": 8776, "protocol": "TCP"}])
        );
        let endpoints = slice["endpoints"].as_array().unwrap();
        assert_eq!(endpoints.len(), 2);
        assert_eq!(endpoints[0]["addresses"], json!(["10.0.0.2"]));
        assert_eq!(
            endpoints[0]["conditions"],
            json!({"ready": true, "serving": true, "terminating": false})
        );
        assert_eq!(endpoints[0]["nodeName"], "n1");
        assert_eq!(endpoints[0]["zone"], "zone-of-n1");
        assert_eq!(endpoints[0]["targetRef"]["name"], "a");
        assert_eq!(endpoints[1]["conditions"]["ready"], false);
        let subsets = &planned.endpoints["subsets"];
        assert_eq!(subsets[0]["addresses"][0]["ip"], "10.0.0.2");
        assert_eq!(subsets[0]["notReadyAddresses"][0]["ip"], "10.0.0.3");
        assert_eq!(
            subsets[0]["ports"],
            json!([{"name": "api", "port": 8776, "protocol": "TCP"}])
        );
    }

    #[test]
    fn a_pod_without_the_named_port_gets_a_slice_without_it() {
        let svc = service(json!([{"name": "api", "port": 80, "targetPort": "http"},
                                  {"name": "raw", "port": 81, "targetPort": 9000}]));
        let mut other = pod("z", "10.0.0.9", true);
        other["spec"]["containers"][0]["ports"] = json!([]);
        let pods = [pod("a", "10.0.0.2", true), other];
        let refs: Vec<&Value> = pods.iter().collect();
        let planned = plan(&svc, &refs, &no_zone).unwrap();
        assert_eq!(planned.slices.len(), 2, "{:#?}", planned.slices);
        let by_pod = |pod: &str| {
            planned
                .slices
                .values()
                .find(|s| s["endpoints"][0]["targetRef"]["name"] == pod)
                .unwrap()["ports"]
                .clone()
        };
        assert_eq!(by_pod("a").as_array().unwrap().len(), 2);
        assert_eq!(
            by_pod("z"),
            json!([{"name": "raw", "port": 9000, "protocol": "TCP"}])
        );
    }

    #[test]
    fn terminating_finished_and_unaddressed_pods() {
        let svc = service(json!([{"port": 80, "targetPort": 8080}]));
        let mut leaving = pod("leaving", "10.0.0.4", true);
        leaving["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
        let mut done = pod("done", "10.0.0.5", false);
        done["status"]["phase"] = json!("Succeeded");
        let mut pending = pod("pending", "", false);
        pending["status"] = json!({"phase": "Pending"});
        let mut stranger = pod("stranger", "10.0.0.6", true);
        stranger["metadata"]["labels"] = json!({"app": "other"});
        let pods = [leaving, done, pending, stranger];
        let refs: Vec<&Value> = pods.iter().collect();
        let planned = plan(&svc, &refs, &no_zone).unwrap();
        let slice = planned.slices.values().next().unwrap();
        let endpoints = slice["endpoints"].as_array().unwrap();
        assert_eq!(endpoints.len(), 1);
        assert_eq!(
            endpoints[0]["conditions"],
            json!({"ready": false, "serving": true, "terminating": true})
        );
        assert_eq!(
            slice["ports"],
            json!([{"name": "", "port": 8080, "protocol": "TCP"}])
        );
        // Terminating pods are left out of Endpoints; an unnamed port has no name there.
        assert!(
            planned.endpoints.get("subsets").is_none(),
            "{}",
            planned.endpoints
        );
    }

    #[test]
    fn nothing_selected_gives_one_empty_slice_and_no_selector_gives_nothing() {
        let svc = service(json!([{"port": 80}]));
        let planned = plan(&svc, &[], &no_zone).unwrap();
        assert_eq!(planned.slices.len(), 1);
        let slice = planned.slices.values().next().unwrap();
        assert_eq!(slice["endpoints"], json!([]));
        assert!(slice.get("ports").is_none());
        let mut manual = svc.clone();
        manual["spec"].as_object_mut().unwrap().remove("selector");
        assert!(plan(&manual, &[], &no_zone).is_none());
    }

    #[test]
    fn slices_hold_at_most_a_hundred_endpoints_and_names_are_stable() {
        let svc = service(json!([{"port": 80, "targetPort": 8080}]));
        let pods: Vec<Value> = (0..250)
            .map(|i| {
                pod(
                    &format!("p{i:03}"),
                    &format!("10.0.{}.{}", i / 200, i % 200 + 1),
                    true,
                )
            })
            .collect();
        let refs: Vec<&Value> = pods.iter().collect();
        let first = plan(&svc, &refs, &no_zone).unwrap();
        let sizes: Vec<usize> = first
            .slices
            .values()
            .map(|s| s["endpoints"].as_array().unwrap().len())
            .collect();
        assert_eq!(sizes.iter().sum::<usize>(), 250);
        assert!(
            sizes.iter().all(|n| *n <= MAX_ENDPOINTS_PER_SLICE),
            "{sizes:?}"
        );
        assert_eq!(first.slices.len(), 3);
        assert!(first.slices.keys().all(|n| n.starts_with("api-")));
        assert_eq!(plan(&svc, &refs, &no_zone).unwrap(), first);
    }
}
