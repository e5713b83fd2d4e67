//! Metadata-only answers (`Accept: application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1`
//! for gets and watches, `as=PartialObjectMetadataList` for lists, as kube-rs's metadata API and
//! metadata watchers ask): each object is sent as a `meta.k8s.io/v1 PartialObjectMetadata` with
//! its metadata only.

use serde_json::{Value, json};

const API_VERSION: &str = "meta.k8s.io/v1";

/// Whether the first media range of the Accept header asks for metadata only (either the
/// object or the list form: a server answers a list with the list form, a get or a watch with
/// the object form).
pub fn wants_metadata(accept: &str) -> bool {
    accept.split(',').next().is_some_and(|first| {
        let params: Vec<String> = first.split(';').map(|p| p.trim().to_string()).collect();
        params.iter().any(|p| p == "g=meta.k8s.io")
            && params
                .iter()
                .any(|p| p == "as=PartialObjectMetadata" || p == "as=PartialObjectMetadataList")
    })
}

/// The content type of a metadata-only answer.
pub fn content_type(list: bool) -> &'static str {
    if list {
        "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"
    } else {
        "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"
    }
}

/// The PartialObjectMetadata of an object.
pub fn object(obj: &Value) -> Value {
    json!({
        "kind": "PartialObjectMetadata",
        "apiVersion": API_VERSION,
        "metadata": obj.get("metadata").cloned().unwrap_or(json!({})),
    })
}

/// The PartialObjectMetadataList of objects, with the list's metadata.
pub fn list(items: &[Value], metadata: Value) -> Value {
    json!({
        "kind": "PartialObjectMetadataList",
        "apiVersion": API_VERSION,
        "metadata": metadata,
        "items": items.iter().map(object).collect::<Vec<_>>(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accept_and_shapes() {
        assert!(wants_metadata(
            "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"
        ));
        assert!(wants_metadata(
            "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json"
        ));
        assert!(!wants_metadata("application/json"));
        let o = object(&json!({"metadata": {"name": "a"}, "spec": {"x": 1}}));
        assert_eq!(
            o,
            json!({"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": {"name": "a"}})
        );
        let l = list(
            &[json!({"metadata": {"name": "a"}})],
            json!({"resourceVersion": "5"}),
        );
        assert_eq!(l["items"][0]["kind"], "PartialObjectMetadata");
        assert_eq!(l["metadata"]["resourceVersion"], "5");
    }
}
