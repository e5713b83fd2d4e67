//! Per-kind rules applied on every write: CRD instances are defaulted, pruned and validated
//! against their structural schema and its CEL rules; CRDs' CEL rules must compile, CRDs get
//! their status and (after the write) their resource registered; Namespaces get a phase;
//! Secrets fold stringData into data; Services get a clusterIP from the cluster's range; Pods and
//! PersistentVolumeClaims start Pending; built-ins get their defaults (`defaults`) and
//! validation (`builtin_rules`). CRD deletion removes the resource and its instances.

use super::service_ips::{self, ServiceCidr};
use super::target::Target;
use super::{api_services, builtin_rules, defaults, event_views, meta};
use crate::error::ApiError;
use crate::registry::crd_status;
use crate::registry::{Registry, ResourceInfo};
use crate::schema;
use crate::store::{ObjKey, Txn};
use base64::Engine as _;
use serde_json::{Value, json};

const CRD_GROUP: &str = "apiextensions.k8s.io";

/// Adjusts and validates an object about to be written (`old` is None on create). Runs inside
/// the store transaction `txn` (read only here: it must not touch the engine's store); a new
/// Service's ClusterIP comes from `cidr`.
/// `strict` (fieldValidation=Strict) refuses unknown fields of custom resources instead of
/// pruning them silently.
pub fn on_write(
    registry: &Registry,
    t: &Target,
    old: Option<&Value>,
    obj: &mut Value,
    txn: &Txn<'_>,
    cidr: &ServiceCidr,
    strict: bool,
) -> Result<(), ApiError> {
    let info = &t.info;
    if let Some(crd) = &info.crd {
        if let Some(s) = crd.schemas.get(&t.version) {
            let pruned = schema::default_and_prune(obj, s);
            if strict && !pruned.is_empty() {
                let fields: Vec<String> = pruned
                    .iter()
                    .map(|p| format!("unknown field \"{p}\""))
                    .collect();
                return Err(ApiError::bad_request(format!(
                    "strict decoding error: {}",
                    fields.join(", ")
                )));
            }
            let mut causes = schema::validate_object(obj, s);
            if causes.is_empty() {
                causes = schema::cel::validate_object(obj, old, s);
            }
            if !causes.is_empty() {
                let name = meta::meta_str(obj, "name").unwrap_or_default().to_string();
                return Err(ApiError::invalid(&info.group, &info.kind, &name, causes));
            }
        }
        return Ok(());
    }
    match (info.group.as_str(), info.resource.as_str()) {
        (CRD_GROUP, "customresourcedefinitions") => {
            // validates names and versions; registration happens after the write
            crate::registry::resource_from_crd(obj)?;
            let causes = crd_rule_errors(obj);
            if !causes.is_empty() {
                return Err(ApiError::invalid(
                    CRD_GROUP,
                    "CustomResourceDefinition",
                    meta::meta_str(obj, "name").unwrap_or_default(),
                    causes,
                ));
            }
            if let Some(existing) = registry.find_resource(
                obj.pointer("/spec/group")
                    .and_then(Value::as_str)
                    .unwrap_or_default(),
                obj.pointer("/spec/names/plural")
                    .and_then(Value::as_str)
                    .unwrap_or_default(),
            ) && existing.crd.is_none()
            {
                return Err(ApiError::invalid(
                    CRD_GROUP,
                    "CustomResourceDefinition",
                    meta::meta_str(obj, "name").unwrap_or_default(),
                    vec![crate::error::Cause::new(
                        "FieldValueInvalid",
                        "spec.names.plural",
                        "conflicts with a built-in resource",
                    )],
                ));
            }
            let since = old
                .and_then(|o| o.pointer("/status/conditions/0/lastTransitionTime"))
                .and_then(Value::as_str)
                .map(str::to_string)
                .unwrap_or_else(meta::now);
            obj["status"] = crd_status(obj, &since);
        }
        ("", "namespaces")
            if old.is_none_or(|o| o.pointer("/metadata/deletionTimestamp").is_none()) =>
        {
            obj["status"] = json!({"phase": "Active"});
        }
        ("", "services") => {
            if obj.get("spec").is_none_or(|s| !s.is_object()) {
                obj["spec"] = json!({});
            }
            if obj.pointer("/spec/type").is_none() {
                obj["spec"]["type"] = json!("ClusterIP");
            }
            match old.and_then(|o| o.pointer("/spec/clusterIP")).cloned() {
                Some(ip) => {
                    obj["spec"]["clusterIP"] = ip;
                    if let Some(ips) = old.and_then(|o| o.pointer("/spec/clusterIPs")).cloned() {
                        obj["spec"]["clusterIPs"] = ips;
                    }
                }
                None => {
                    let namespace = meta::meta_str(obj, "namespace").unwrap_or_default();
                    let name = meta::meta_str(obj, "name").unwrap_or_default();
                    let used = service_ips::used_ips(
                        txn.list("", "services", None).map(|(_, s)| s),
                        (namespace, name),
                    );
                    let requested = obj
                        .pointer("/spec/clusterIP")
                        .and_then(Value::as_str)
                        .filter(|ip| !ip.is_empty())
                        .map(str::to_string);
                    let ip = match requested {
                        Some(ip) => {
                            if let Some(cause) = cidr.check_requested(&ip, &used) {
                                return Err(ApiError::invalid("", "Service", name, vec![cause]));
                            }
                            ip
                        }
                        None => cidr.allocate(txn.rv(), &used)?.to_string(),
                    };
                    obj["spec"]["clusterIP"] = json!(ip);
                    obj["spec"]["clusterIPs"] = json!([ip]);
                }
            }
            if obj.pointer("/spec/type").and_then(Value::as_str) != Some("ExternalName") {
                // allocated with the cluster IP: a single-stack IPv4 cluster, as the embedded
                // cluster's service CIDR is
                for (field, value) in [
                    ("ipFamilies", json!(["IPv4"])),
                    ("ipFamilyPolicy", json!("SingleStack")),
                ] {
                    if obj["spec"].get(field).is_none_or(Value::is_null) {
                        obj["spec"][field] = value;
                    }
                }
            }
            if old.is_none() && is_empty_status(obj) {
                obj["status"] = json!({"loadBalancer": {}});
            }
        }
        ("events.k8s.io", "events") => {
            // fields of the typed Event without `omitempty` (a null time, an empty struct):
            // encoded, not written by anyone
            if let Some(root) = obj.as_object_mut() {
                for (key, value) in [
                    ("deprecatedFirstTimestamp", Value::Null),
                    ("deprecatedLastTimestamp", Value::Null),
                    ("deprecatedSource", json!({})),
                ] {
                    root.entry(key).or_insert(value);
                }
            }
        }
        ("", "pods") if old.is_none() && is_empty_status(obj) => {
            obj["status"] = json!({"phase": "Pending"});
        }
        ("", "persistentvolumeclaims") if old.is_none() && is_empty_status(obj) => {
            obj["status"] = json!({"phase": "Pending"});
        }
        _ => {}
    }
    if old.is_none() {
        defaults::on_create(&info.group, &info.resource, obj);
    }
    defaulted(info, old, obj)?;
    if old.is_none() && (info.group.as_str(), info.resource.as_str()) == ("", "pods") {
        super::pod_admission::admit(obj, txn);
    }
    let causes = builtin_rules::causes(&info.group, &info.resource, old, obj);
    if !causes.is_empty() {
        let name = meta::meta_str(obj, "name").unwrap_or_default().to_string();
        return Err(ApiError::invalid(&info.group, &info.kind, &name, causes));
    }
    Ok(())
}

/// What decoding and defaulting make of a write of a built-in kind before the server's
/// strategy runs: the part of the stored object its writer is credited with in managedFields
/// (a Secret's stringData folded into data and its type, a Namespace's name label, a
/// DaemonSet's template generation, the defaults of [`defaults::apply`]).
pub fn defaulted(
    info: &ResourceInfo,
    old: Option<&Value>,
    obj: &mut Value,
) -> Result<(), ApiError> {
    match (info.group.as_str(), info.resource.as_str()) {
        ("", "secrets") => {
            if let Some(string_data) = obj.get("stringData").cloned() {
                let map = string_data
                    .as_object()
                    .ok_or_else(|| ApiError::bad_request("stringData must be a map of strings"))?
                    .clone();
                if obj.get("data").is_none_or(Value::is_null) {
                    obj["data"] = json!({});
                }
                for (k, v) in map {
                    let s = v.as_str().ok_or_else(|| {
                        ApiError::bad_request(format!("stringData.{k} must be a string"))
                    })?;
                    obj["data"][k] =
                        json!(base64::engine::general_purpose::STANDARD.encode(s.as_bytes()));
                }
                if let Some(m) = obj.as_object_mut() {
                    m.remove("stringData");
                }
            }
            if obj.get("type").is_none() {
                obj["type"] = json!("Opaque");
            }
        }
        ("", "namespaces") => {
            let name = meta::meta_str(obj, "name").unwrap_or_default().to_string();
            obj["metadata"]["labels"]["kubernetes.io/metadata.name"] = json!(name);
        }
        _ => {}
    }
    defaults::template_generation(&info.group, &info.resource, old, obj);
    defaults::apply(&info.group, &info.resource, obj);
    Ok(())
}

/// The CEL rules of a CRD's schemas that do not compile.
fn crd_rule_errors(crd: &Value) -> Vec<crate::error::Cause> {
    let versions = crd
        .pointer("/spec/versions")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    versions
        .iter()
        .enumerate()
        .filter_map(|(i, v)| {
            v.pointer("/schema/openAPIV3Schema").map(|s| {
                schema::cel::compile_errors(
                    s,
                    &format!("spec.versions[{i}].schema.openAPIV3Schema"),
                )
            })
        })
        .flatten()
        .collect()
}

fn is_empty_status(obj: &Value) -> bool {
    obj.get("status")
        .is_none_or(|s| s.is_null() || s.as_object().is_some_and(|m| m.is_empty()))
}

/// Follow-ups of a stored write (CRD registration).
pub fn after_write(
    registry: &Registry,
    txn: &mut Txn<'_>,
    t: &Target,
    stored: &Value,
) -> Result<(), ApiError> {
    if t.info.is(CRD_GROUP, "customresourcedefinitions")
        && stored.pointer("/metadata/deletionTimestamp").is_none()
    {
        let info = registry.register_crd(stored)?;
        api_services::put_custom(txn, &info.group, &info.versions);
    }
    if event_views::is_event(&t.info.group, &t.info.resource) {
        event_views::mirror(txn, &t.info.group, stored);
    }
    Ok(())
}

/// Follow-ups of a removal: a CRD takes its resource and every instance with it.
pub fn after_delete(registry: &Registry, txn: &mut Txn<'_>, t: &Target, gone: &Value) {
    if event_views::is_event(&t.info.group, &t.info.resource) {
        event_views::forget(txn, &t.info.group, gone);
    }
    if t.info.is(CRD_GROUP, "customresourcedefinitions") {
        let group = gone
            .pointer("/spec/group")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        let plural = gone
            .pointer("/spec/names/plural")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        registry.unregister_crd(&group, &plural);
        let versions: Vec<String> = gone
            .pointer("/spec/versions")
            .and_then(Value::as_array)
            .map(|vs| {
                vs.iter()
                    .filter_map(|v| v.get("name").and_then(Value::as_str))
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default();
        api_services::remove_unserved(txn, registry, &group, &versions);
        let keys: Vec<ObjKey> = txn
            .list(&group, &plural, None)
            .map(|(key, _)| key.clone())
            .collect();
        for key in keys {
            txn.remove(&key);
        }
    }
}
