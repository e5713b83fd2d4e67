//! Pods made from a workload's pod template: the template's labels, annotations and spec, the
//! controller's own labels, and a controller owner reference (so the garbage collector removes
//! them with their owner). Shared by the Job, ReplicaSet, ReplicationController, DaemonSet and
//! StatefulSet controllers.

use rand::Rng;
use serde_json::{Map, Value, json};

/// The controller a pod belongs to.
#[derive(Clone, Copy, Debug)]
pub struct Owner<'a> {
    pub api_version: &'a str,
    pub kind: &'a str,
    pub name: &'a str,
    pub uid: &'a str,
}

/// Five characters as in generated names (`web-7d4b9-x2fzq`).
pub fn random_suffix() -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let mut rng = rand::rng();
    (0..5)
        .map(|_| char::from(ALPHABET[rng.random_range(0..ALPHABET.len())]))
        .collect()
}

fn string_map(value: Option<&Value>) -> Map<String, Value> {
    value
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default()
}

/// The pod `name` in `namespace` from `template`, with `labels` and `annotations` added to the
/// template's own, owned by `owner`.
pub fn pod_from_template(
    template: &Value,
    namespace: &str,
    name: &str,
    owner: Owner<'_>,
    labels: &[(&str, &str)],
    annotations: &[(&str, &str)],
) -> Value {
    let metadata = template.get("metadata");
    let mut all_labels = string_map(metadata.and_then(|m| m.get("labels")));
    for (key, value) in labels {
        all_labels.insert((*key).to_owned(), json!(value));
    }
    let mut all_annotations = string_map(metadata.and_then(|m| m.get("annotations")));
    for (key, value) in annotations {
        all_annotations.insert((*key).to_owned(), json!(value));
    }
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": all_labels,
            "annotations": all_annotations,
            "ownerReferences": [{
                "apiVersion": owner.api_version,
                "kind": owner.kind,
                "name": owner.name,
                "uid": owner.uid,
                "controller": true,
                "blockOwnerDeletion": true,
            }],
        },
        "spec": template.get("spec").cloned().unwrap_or_else(|| json!({"containers": []})),
    })
}

/// Whether `pod` is controlled by the object with `uid`.
pub fn controlled_by(pod: &Value, uid: &str) -> bool {
    pod.pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)
        .is_some_and(|refs| {
            refs.iter()
                .any(|o| o["uid"] == uid && o["controller"] == true)
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn random_suffixes_are_dns_safe() {
        let suffix = random_suffix();
        assert_eq!(suffix.len(), 5);
        assert!(
            suffix
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
        );
    }

    #[test]
    fn pods_carry_template_and_owner() {
        let template = json!({"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "c"}]}});
        let owner = Owner {
            api_version: "apps/v1",
            kind: "ReplicaSet",
            name: "web-1",
            uid: "u",
        };
        let pod = pod_from_template(
            &template,
            "ns",
            "web-1-abcde",
            owner,
            &[("pod-template-hash", "1")],
            &[],
        );
        assert_eq!(pod["metadata"]["labels"]["app"], "web");
        assert_eq!(pod["metadata"]["labels"]["pod-template-hash"], "1");
        assert!(controlled_by(&pod, "u"));
        assert!(!controlled_by(&pod, "v"));
    }
}
