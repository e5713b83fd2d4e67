//! Protobuf request bodies (`application/vnd.kubernetes.protobuf`), which kubectl's typed create
//! commands and client-go send for built-in kinds: the envelope (magic `k8s\0`, then a
//! `runtime.Unknown` with the type and the raw object) is decoded with the Kubernetes message
//! descriptors (`sim/proto/kubernetes.fds`, generated from the .proto files the kube-rs k8s-pb
//! project ships) into the object's JSON form, which the rest of the server handles as any JSON
//! body. The JSON form follows the Kubernetes conventions, not the generic protobuf mapping:
//! `Time` / `MicroTime` are RFC 3339 strings, `IntOrString` an integer or a string, `Quantity` a
//! string, `RawExtension` / `FieldsV1` embedded JSON, 64-bit integers numbers, bytes base64;
//! an empty string field or a zero time (which client-go sends for every unset plain field) is
//! left out, so the server's defaults apply to it.
//! Custom resources have no protobuf form (415, as on a real server).

use crate::error::ApiError;
use base64::Engine as _;
use prost_reflect::{
    DescriptorPool, DynamicMessage, MapKey, MessageDescriptor, ReflectMessage, Value as PValue,
};
use serde_json::{Map, Value, json};
use std::sync::LazyLock;

/// The media type of Kubernetes protobuf bodies.
pub const MEDIA_TYPE: &str = "application/vnd.kubernetes.protobuf";
/// The first bytes of every Kubernetes protobuf body.
pub const MAGIC: &[u8] = b"k8s\0";
const META: &str = "apimachinery.pkg.apis.meta.v1";

static POOL: LazyLock<Result<DescriptorPool, String>> = LazyLock::new(|| {
    DescriptorPool::decode(include_bytes!("../../proto/kubernetes.fds").as_slice())
        .map_err(|e| e.to_string())
});

/// The Kubernetes message descriptors (built-in kinds, `runtime.Unknown`).
pub fn pool() -> Result<&'static DescriptorPool, ApiError> {
    POOL.as_ref()
        .map_err(|e| ApiError::internal(format!("the protobuf descriptors do not load: {e}")))
}

fn bad(why: impl std::fmt::Display) -> ApiError {
    ApiError::bad_request(format!("the protobuf body cannot be decoded: {why}"))
}

/// The message descriptor of `kind` in `apiVersion` (e.g. `apps/v1`, `Deployment` →
/// `api.apps.v1.Deployment`).
fn descriptor(pool: &DescriptorPool, api_version: &str, kind: &str) -> Option<MessageDescriptor> {
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    let first = if group.is_empty() {
        "core"
    } else {
        group.split('.').next().unwrap_or(group)
    };
    pool.get_message_by_name(&format!("api.{first}.{version}.{kind}"))
}

/// Decodes a protobuf body into the object's JSON form (with apiVersion and kind).
pub fn decode(body: &[u8]) -> Result<Value, ApiError> {
    let pool = pool()?;
    let inner = body
        .strip_prefix(MAGIC)
        .ok_or_else(|| bad("it does not start with the Kubernetes protobuf prefix"))?;
    let unknown_desc = pool
        .get_message_by_name("apimachinery.pkg.runtime.Unknown")
        .ok_or_else(|| ApiError::internal("runtime.Unknown is missing from the descriptors"))?;
    let unknown = DynamicMessage::decode(unknown_desc, inner).map_err(bad)?;
    let type_meta = field_message(&unknown, "typeMeta");
    let api_version = type_meta
        .as_ref()
        .map(|t| field_str(t, "apiVersion"))
        .unwrap_or_default();
    let kind = type_meta
        .as_ref()
        .map(|t| field_str(t, "kind"))
        .unwrap_or_default();
    let encoding = field_str(&unknown, "contentEncoding");
    if !encoding.is_empty() {
        return Err(bad(format!(
            "content encoding {encoding:?} is not supported"
        )));
    }
    let desc = descriptor(pool, &api_version, &kind).ok_or_else(|| {
        ApiError::unsupported_media_type_for(
            MEDIA_TYPE,
            &format!("{kind} in {api_version} has no protobuf form on this server"),
        )
    })?;
    let raw = match unknown.get_field_by_name("raw").as_deref() {
        Some(PValue::Bytes(b)) => b.clone(),
        _ => Default::default(),
    };
    let message = DynamicMessage::decode(desc, raw).map_err(bad)?;
    let mut obj = message_json(&message)?;
    if let Some(m) = obj.as_object_mut() {
        m.insert("apiVersion".into(), json!(api_version));
        m.insert("kind".into(), json!(kind));
    }
    Ok(obj)
}

fn field_message(m: &DynamicMessage, name: &str) -> Option<DynamicMessage> {
    match m.get_field_by_name(name).as_deref() {
        Some(PValue::Message(inner)) => Some(inner.clone()),
        _ => None,
    }
}

fn field_str(m: &DynamicMessage, name: &str) -> String {
    match m.get_field_by_name(name).as_deref() {
        Some(PValue::String(s)) => s.clone(),
        _ => String::new(),
    }
}

fn field_i64(m: &DynamicMessage, name: &str) -> i64 {
    match m.get_field_by_name(name).as_deref() {
        Some(PValue::I64(n)) => *n,
        Some(PValue::I32(n)) => i64::from(*n),
        _ => 0,
    }
}

fn field_bytes(m: &DynamicMessage, name: &str) -> Vec<u8> {
    match m.get_field_by_name(name).as_deref() {
        Some(PValue::Bytes(b)) => b.to_vec(),
        _ => Vec::new(),
    }
}

fn timestamp(m: &DynamicMessage, micro: bool) -> Value {
    let secs = field_i64(m, "seconds");
    let nanos = u32::try_from(field_i64(m, "nanos")).unwrap_or(0);
    if secs == 0 && nanos == 0 {
        // Go's zero time, which client-go sends as an empty message: unset
        return Value::Null;
    }
    match chrono::DateTime::from_timestamp(secs, nanos) {
        Some(t) if micro => json!(t.format("%Y-%m-%dT%H:%M:%S%.6fZ").to_string()),
        Some(t) => json!(t.format("%Y-%m-%dT%H:%M:%SZ").to_string()),
        None => Value::Null,
    }
}

fn embedded_json(raw: &[u8]) -> Result<Value, ApiError> {
    if raw.is_empty() {
        return Ok(Value::Null);
    }
    serde_json::from_slice(raw).map_err(|e| bad(format!("embedded JSON: {e}")))
}

/// A message in its Kubernetes JSON form.
fn message_json(m: &DynamicMessage) -> Result<Value, ApiError> {
    let desc = m.descriptor();
    let full = desc.full_name();
    if let Some(short) = full.strip_prefix(&format!("{META}.")) {
        match short {
            "Time" => return Ok(timestamp(m, false)),
            "MicroTime" => return Ok(timestamp(m, true)),
            "Duration" => {
                let d = std::time::Duration::from_nanos(
                    u64::try_from(field_i64(m, "duration")).unwrap_or(0),
                );
                return Ok(json!(format!("{}s", d.as_secs_f64())));
            }
            "FieldsV1" => return embedded_json(&field_bytes(m, "Raw")),
            _ => {}
        }
    }
    match full {
        "apimachinery.pkg.util.intstr.IntOrString" => {
            return Ok(if field_i64(m, "type") == 1 {
                json!(field_str(m, "strVal"))
            } else {
                json!(field_i64(m, "intVal"))
            });
        }
        "apimachinery.pkg.api.resource.Quantity" => return Ok(json!(field_str(m, "string"))),
        "apimachinery.pkg.runtime.RawExtension" => return embedded_json(&field_bytes(m, "raw")),
        _ => {}
    }
    let mut out = Map::new();
    for (field, value) in m.fields() {
        // client-go writes every plain string field, set or not: an empty one is unset (so
        // server defaults apply, as on a real server), and so is a zero time
        let json = value_json(value)?;
        if json.is_null() || json.as_str() == Some("") {
            continue;
        }
        out.insert(field.name().to_string(), json);
    }
    Ok(Value::Object(out))
}

fn map_key(k: &MapKey) -> String {
    match k {
        MapKey::Bool(b) => b.to_string(),
        MapKey::I32(n) => n.to_string(),
        MapKey::I64(n) => n.to_string(),
        MapKey::U32(n) => n.to_string(),
        MapKey::U64(n) => n.to_string(),
        MapKey::String(s) => s.clone(),
    }
}

fn value_json(v: &PValue) -> Result<Value, ApiError> {
    Ok(match v {
        PValue::Bool(b) => json!(b),
        PValue::I32(n) => json!(n),
        PValue::I64(n) => json!(n),
        PValue::U32(n) => json!(n),
        PValue::U64(n) => json!(n),
        PValue::F32(n) => json!(n),
        PValue::F64(n) => json!(n),
        PValue::String(s) => json!(s),
        PValue::Bytes(b) => json!(base64::engine::general_purpose::STANDARD.encode(b)),
        PValue::EnumNumber(n) => json!(n),
        PValue::Message(m) => message_json(m)?,
        PValue::List(items) => {
            Value::Array(items.iter().map(value_json).collect::<Result<_, _>>()?)
        }
        PValue::Map(entries) => {
            let mut out = Map::new();
            for (k, v) in entries {
                out.insert(map_key(k), value_json(v)?);
            }
            Value::Object(out)
        }
    })
}

/// Whether a request's Accept header allows a JSON answer (the only kind this server writes):
/// no header, `*/*`, `application/*` or `application/json` (with any parameters) among its
/// media ranges.
pub fn accepts_json(accept: &str) -> bool {
    accept.trim().is_empty()
        || accept.split(',').any(|range| {
            let media = range
                .split(';')
                .next()
                .unwrap_or_default()
                .trim()
                .to_ascii_lowercase();
            matches!(
                media.as_str(),
                "*/*" | "application/*" | "application/json" | ""
            )
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use prost::Message;

    /// Encodes `obj` (a dynamic message built from JSON-like fields) in the envelope.
    fn envelope(api_version: &str, kind: &str, object: &DynamicMessage) -> Vec<u8> {
        let pool = pool().unwrap();
        let unknown = pool
            .get_message_by_name("apimachinery.pkg.runtime.Unknown")
            .unwrap();
        let type_meta = pool
            .get_message_by_name("apimachinery.pkg.runtime.TypeMeta")
            .unwrap();
        let mut tm = DynamicMessage::new(type_meta);
        tm.set_field_by_name("apiVersion", PValue::String(api_version.into()));
        tm.set_field_by_name("kind", PValue::String(kind.into()));
        let mut u = DynamicMessage::new(unknown);
        u.set_field_by_name("typeMeta", PValue::Message(tm));
        u.set_field_by_name("raw", PValue::Bytes(object.encode_to_vec().into()));
        let mut out = MAGIC.to_vec();
        out.extend(u.encode_to_vec());
        out
    }

    fn message(name: &str) -> DynamicMessage {
        DynamicMessage::new(pool().unwrap().get_message_by_name(name).unwrap())
    }

    #[test]
    fn decodes_a_config_map() {
        let mut meta = message("apimachinery.pkg.apis.meta.v1.ObjectMeta");
        meta.set_field_by_name("name", PValue::String("cm".into()));
        let mut time = message("apimachinery.pkg.apis.meta.v1.Time");
        time.set_field_by_name("seconds", PValue::I64(1_700_000_000));
        meta.set_field_by_name("creationTimestamp", PValue::Message(time));
        let mut cm = message("api.core.v1.ConfigMap");
        cm.set_field_by_name("metadata", PValue::Message(meta));
        let mut data = std::collections::HashMap::new();
        data.insert(MapKey::String("k".into()), PValue::String("v".into()));
        cm.set_field_by_name("data", PValue::Map(data));
        cm.set_field_by_name("immutable", PValue::Bool(false));
        let obj = decode(&envelope("v1", "ConfigMap", &cm)).unwrap();
        assert_eq!(
            obj,
            json!({"apiVersion": "v1", "kind": "ConfigMap", "immutable": false,
                   "metadata": {"name": "cm", "creationTimestamp": "2023-11-14T22:13:20Z"},
                   "data": {"k": "v"}})
        );
    }

    #[test]
    fn unset_plain_fields_are_left_out() {
        let mut meta = message("apimachinery.pkg.apis.meta.v1.ObjectMeta");
        meta.set_field_by_name("name", PValue::String("p".into()));
        meta.set_field_by_name("namespace", PValue::String(String::new()));
        meta.set_field_by_name(
            "creationTimestamp",
            PValue::Message(message("apimachinery.pkg.apis.meta.v1.Time")),
        );
        let mut spec = message("api.core.v1.PodSpec");
        spec.set_field_by_name("schedulerName", PValue::String(String::new()));
        spec.set_field_by_name("nodeName", PValue::String(String::new()));
        let mut pod = message("api.core.v1.Pod");
        pod.set_field_by_name("metadata", PValue::Message(meta));
        pod.set_field_by_name("spec", PValue::Message(spec));
        let obj = decode(&envelope("v1", "Pod", &pod)).unwrap();
        assert_eq!(obj["metadata"], json!({"name": "p"}));
        assert!(obj["spec"].get("schedulerName").is_none());
        assert!(obj["spec"].get("nodeName").is_none());
    }

    #[test]
    fn int_or_string_and_quantity() {
        let mut port = message("api.core.v1.ServicePort");
        port.set_field_by_name("port", PValue::I32(80));
        let mut target = message("apimachinery.pkg.util.intstr.IntOrString");
        target.set_field_by_name("type", PValue::I64(1));
        target.set_field_by_name("strVal", PValue::String("http".into()));
        port.set_field_by_name("targetPort", PValue::Message(target));
        assert_eq!(
            message_json(&port).unwrap(),
            json!({"port": 80, "targetPort": "http"})
        );
        let mut q = message("apimachinery.pkg.api.resource.Quantity");
        q.set_field_by_name("string", PValue::String("500m".into()));
        assert_eq!(message_json(&q).unwrap(), json!("500m"));
    }

    #[test]
    fn refuses_what_it_cannot_decode() {
        assert_eq!(decode(b"{}").unwrap_err().code, 400);
        let cm = message("api.core.v1.ConfigMap");
        let e = decode(&envelope("example.com/v1", "Widget", &cm)).unwrap_err();
        assert_eq!(e.code, 415);
        let mut truncated = envelope("v1", "ConfigMap", &cm);
        truncated.push(0xff);
        assert_eq!(decode(&truncated).unwrap_err().code, 400);
    }

    #[test]
    fn accept_headers() {
        assert!(accepts_json(""));
        assert!(accepts_json("application/vnd.kubernetes.protobuf, */*"));
        assert!(accepts_json(
            "application/vnd.kubernetes.protobuf,application/json"
        ));
        assert!(accepts_json("application/json;as=Table;v=v1;g=meta.k8s.io"));
        assert!(!accepts_json("application/vnd.kubernetes.protobuf"));
        assert!(!accepts_json("text/html"));
    }
}
