//! The protobuf form of `/openapi/v2` (gnostic's `openapi.v2.Document`, media type
//! `application/com.github.proto-openapi.spec.v2.v1.0+protobuf`), which client-go and so
//! kubectl ask for and read only in that form. Encoded with the gnostic message descriptors
//! (`sim/proto/openapiv2.fds`): the document's swagger version, info, paths (each operation's
//! id and vendor extensions such as x-kubernetes-group-version-kind) and every definition
//! (ref, type, format, description, bounds, required, enum, default, items, properties,
//! additionalProperties, allOf, readOnly, vendor extensions); values of `default`, `enum` and
//! vendor extensions are YAML text, as gnostic keeps them.

use crate::error::ApiError;
use prost::Message;
use prost_reflect::{DescriptorPool, DynamicMessage, Value as PValue};
use serde_json::Value;
use std::sync::LazyLock;

/// The media type (and its older spelling) clients ask for.
pub const MEDIA_TYPE: &str = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf";
const OLD_MEDIA_TYPE: &str = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf";

static POOL: LazyLock<Result<DescriptorPool, String>> = LazyLock::new(|| {
    DescriptorPool::decode(include_bytes!("../../proto/openapiv2.fds").as_slice())
        .map_err(|e| e.to_string())
});

/// Whether the first media range of the Accept header asks for the protobuf form.
pub fn wanted(accept: &str) -> bool {
    accept.split(',').next().is_some_and(|first| {
        let media = first.split(';').next().unwrap_or_default().trim();
        media == MEDIA_TYPE || media == OLD_MEDIA_TYPE
    })
}

struct Encoder<'a> {
    pool: &'a DescriptorPool,
}

impl Encoder<'_> {
    fn new_message(&self, name: &str) -> Result<DynamicMessage, ApiError> {
        self.pool
            .get_message_by_name(&format!("openapi.v2.{name}"))
            .map(DynamicMessage::new)
            .ok_or_else(|| {
                ApiError::internal(format!("openapi.v2.{name} is not in the descriptors"))
            })
    }

    fn any(&self, v: &Value) -> Result<PValue, ApiError> {
        let mut any = self.new_message("Any")?;
        let yaml = serde_norway::to_string(v).unwrap_or_default();
        any.set_field_by_name("yaml", PValue::String(yaml));
        Ok(PValue::Message(any))
    }

    fn named(&self, kind: &str, name: &str, value: PValue) -> Result<PValue, ApiError> {
        let mut m = self.new_message(kind)?;
        m.set_field_by_name("name", PValue::String(name.to_string()));
        m.set_field_by_name("value", value);
        Ok(PValue::Message(m))
    }

    fn extensions(&self, obj: &serde_json::Map<String, Value>) -> Result<Vec<PValue>, ApiError> {
        obj.iter()
            .filter(|(k, _)| k.starts_with("x-"))
            .map(|(k, v)| {
                let any = self.any(v)?;
                self.named("NamedAny", k, any)
            })
            .collect()
    }

    fn named_schemas(&self, map: &serde_json::Map<String, Value>) -> Result<Vec<PValue>, ApiError> {
        map.iter()
            .map(|(k, v)| {
                let s = self.schema(v)?;
                self.named("NamedSchema", k, PValue::Message(s))
            })
            .collect()
    }

    fn schema(&self, v: &Value) -> Result<DynamicMessage, ApiError> {
        let mut s = self.new_message("Schema")?;
        let Some(obj) = v.as_object() else {
            return Ok(s);
        };
        for (key, value) in obj {
            match (key.as_str(), value) {
                ("$ref", Value::String(r)) => {
                    s.set_field_by_name("_ref", PValue::String(r.clone()))
                }
                (
                    "format" | "title" | "description" | "pattern" | "discriminator",
                    Value::String(x),
                ) => s.set_field_by_name(key, PValue::String(x.clone())),
                ("default" | "example", x) => s.set_field_by_name(key, self.any(x)?),
                ("multipleOf" | "maximum" | "minimum", Value::Number(n)) => {
                    s.set_field_by_name(&snake(key), PValue::F64(n.as_f64().unwrap_or_default()))
                }
                (
                    "exclusiveMaximum" | "exclusiveMinimum" | "uniqueItems" | "readOnly",
                    Value::Bool(b),
                ) => s.set_field_by_name(&snake(key), PValue::Bool(*b)),
                (
                    "maxLength" | "minLength" | "maxItems" | "minItems" | "maxProperties"
                    | "minProperties",
                    Value::Number(n),
                ) => s.set_field_by_name(&snake(key), PValue::I64(n.as_i64().unwrap_or_default())),
                ("required", Value::Array(list)) => s.set_field_by_name(
                    "required",
                    PValue::List(
                        list.iter()
                            .filter_map(Value::as_str)
                            .map(|x| PValue::String(x.to_string()))
                            .collect(),
                    ),
                ),
                ("enum", Value::Array(list)) => s.set_field_by_name(
                    "enum",
                    PValue::List(list.iter().map(|x| self.any(x)).collect::<Result<_, _>>()?),
                ),
                ("type", t) => {
                    let mut item = self.new_message("TypeItem")?;
                    let types: Vec<PValue> = match t {
                        Value::String(x) => vec![PValue::String(x.clone())],
                        Value::Array(a) => a
                            .iter()
                            .filter_map(Value::as_str)
                            .map(|x| PValue::String(x.to_string()))
                            .collect(),
                        _ => Vec::new(),
                    };
                    item.set_field_by_name("value", PValue::List(types));
                    s.set_field_by_name("type", PValue::Message(item));
                }
                ("items", items) => {
                    let list: Vec<PValue> = match items {
                        Value::Array(a) => a
                            .iter()
                            .map(|x| self.schema(x).map(PValue::Message))
                            .collect::<Result<_, _>>()?,
                        other => vec![PValue::Message(self.schema(other)?)],
                    };
                    let mut item = self.new_message("ItemsItem")?;
                    item.set_field_by_name("schema", PValue::List(list));
                    s.set_field_by_name("items", PValue::Message(item));
                }
                ("allOf", Value::Array(a)) => s.set_field_by_name(
                    "all_of",
                    PValue::List(
                        a.iter()
                            .map(|x| self.schema(x).map(PValue::Message))
                            .collect::<Result<_, _>>()?,
                    ),
                ),
                ("properties", Value::Object(props)) => {
                    let mut p = self.new_message("Properties")?;
                    p.set_field_by_name(
                        "additional_properties",
                        PValue::List(self.named_schemas(props)?),
                    );
                    s.set_field_by_name("properties", PValue::Message(p));
                }
                ("additionalProperties", extra) => {
                    let mut item = self.new_message("AdditionalPropertiesItem")?;
                    match extra {
                        Value::Bool(b) => item.set_field_by_name("boolean", PValue::Bool(*b)),
                        other => {
                            item.set_field_by_name("schema", PValue::Message(self.schema(other)?))
                        }
                    }
                    s.set_field_by_name("additional_properties", PValue::Message(item));
                }
                _ => {}
            }
        }
        s.set_field_by_name("vendor_extension", PValue::List(self.extensions(obj)?));
        Ok(s)
    }

    fn operation(&self, op: &Value) -> Result<DynamicMessage, ApiError> {
        let mut o = self.new_message("Operation")?;
        if let Some(id) = op.get("operationId").and_then(Value::as_str) {
            o.set_field_by_name("operation_id", PValue::String(id.to_string()));
        }
        if let Some(obj) = op.as_object() {
            o.set_field_by_name("vendor_extension", PValue::List(self.extensions(obj)?));
        }
        Ok(o)
    }

    fn document(&self, doc: &Value) -> Result<DynamicMessage, ApiError> {
        let mut d = self.new_message("Document")?;
        let text = |v: &Value, k: &str| {
            v.get(k)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string()
        };
        d.set_field_by_name("swagger", PValue::String(text(doc, "swagger")));
        let mut info = self.new_message("Info")?;
        let doc_info = doc.get("info").cloned().unwrap_or_default();
        info.set_field_by_name("title", PValue::String(text(&doc_info, "title")));
        info.set_field_by_name("version", PValue::String(text(&doc_info, "version")));
        d.set_field_by_name("info", PValue::Message(info));
        let mut paths = self.new_message("Paths")?;
        let mut items = Vec::new();
        for (path, item) in doc
            .get("paths")
            .and_then(Value::as_object)
            .into_iter()
            .flatten()
        {
            let mut p = self.new_message("PathItem")?;
            for verb in ["get", "put", "post", "delete", "patch"] {
                if let Some(op) = item.get(verb) {
                    p.set_field_by_name(verb, PValue::Message(self.operation(op)?));
                }
            }
            items.push(self.named("NamedPathItem", path, PValue::Message(p))?);
        }
        paths.set_field_by_name("path", PValue::List(items));
        d.set_field_by_name("paths", PValue::Message(paths));
        let mut defs = self.new_message("Definitions")?;
        if let Some(map) = doc.get("definitions").and_then(Value::as_object) {
            defs.set_field_by_name(
                "additional_properties",
                PValue::List(self.named_schemas(map)?),
            );
        }
        d.set_field_by_name("definitions", PValue::Message(defs));
        Ok(d)
    }
}

fn snake(camel: &str) -> String {
    let mut out = String::new();
    for c in camel.chars() {
        if c.is_ascii_uppercase() {
            out.push('_');
            out.push(c.to_ascii_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

/// The protobuf form of an OpenAPI v2 document (as `openapi::v2` builds it).
pub fn encode(doc: &Value) -> Result<Vec<u8>, ApiError> {
    let pool = POOL
        .as_ref()
        .map_err(|e| ApiError::internal(format!("the OpenAPI v2 descriptors do not load: {e}")))?;
    Ok(Encoder { pool }.document(doc)?.encode_to_vec())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn encodes_and_decodes_back() {
        let doc = json!({
            "swagger": "2.0", "info": {"title": "t", "version": "v"},
            "paths": {"/apis/apps/v1/namespaces/{namespace}/deployments/{name}": {"patch": {
                "operationId": "patchDeployment",
                "x-kubernetes-group-version-kind": {"group": "apps", "version": "v1", "kind": "Deployment"}}}},
            "definitions": {"io.k8s.api.apps.v1.Deployment": {
                "type": "object", "required": ["spec"], "description": "d",
                "properties": {"spec": {"$ref": "#/definitions/x"}, "n": {"type": "integer", "minimum": 0, "format": "int32"},
                               "m": {"type": "object", "additionalProperties": {"type": "string"}},
                               "l": {"type": "array", "items": {"type": "string"}, "enum": [["a"]]}},
                "x-kubernetes-group-version-kind": [{"group": "apps", "version": "v1", "kind": "Deployment"}]}}
        });
        let bytes = encode(&doc).unwrap();
        let pool = POOL.as_ref().unwrap();
        let desc = pool.get_message_by_name("openapi.v2.Document").unwrap();
        let back = DynamicMessage::decode(desc, bytes.as_slice()).unwrap();
        assert_eq!(
            back.get_field_by_name("swagger").as_deref(),
            Some(&PValue::String("2.0".into()))
        );
        let contains = |part: &str| bytes.windows(part.len()).any(|w| w == part.as_bytes());
        for part in [
            "patchDeployment",
            "io.k8s.api.apps.v1.Deployment",
            "#/definitions/x",
            "int32",
            "x-kubernetes-group-version-kind",
            "kind: Deployment",
        ] {
            assert!(contains(part), "{part}");
        }
        let full = encode(&crate::api::openapi::v2(
            &crate::registry::Registry::with_builtins(),
        ))
        .unwrap();
        assert!(full.len() > 100_000);
        assert!(wanted(MEDIA_TYPE));
        assert!(wanted(
            "application/com.github.proto-openapi.spec.v2@v1.0+protobuf"
        ));
        assert!(!wanted("application/json"));
    }
}
