//! The generated CustomResourceDefinitions. The rules live on the Rust types: CEL rules as
//! `#[x_kube(validation = …)]` and `#[kube(validation = …)]` (kube's `KubeSchema` derive), the
//! structural `oneOf`s and patterns as `#[schemars(…)]`, the list-map `conditions` as
//! `#[x_kube(merge_strategy = …)]`. So `kubectl apply` of a spec breaking them is refused by the
//! API server: exactly one of image tag and digest, of database clusterRef and host, of
//! messaging clusterRef and secretRef; autoscaling minReplicas at most maxReplicas; the
//! satellites' exactly-the-block-matching-`type` and immutable `type` and `cinderRef`.
//!
//! One rule the derive cannot express is added here: the 43-character name limit as a
//! structural `maxLength` on `metadata.name` (the derive leaves `metadata` an opaque object;
//! the same limit is also a CEL rule on the type). Every rule except the immutability ones is
//! also enforced by [`super::validation`] with a condition (for API servers that do not
//! evaluate CEL).

use super::{CinderBackend, CinderBackupBackend, cinder::Cinder};
use crate::names::MAX_CINDER_NAME_LEN;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::CustomResourceExt;
use serde_json::{Value, json};

/// The Cinder CRD.
pub fn cinder_crd() -> CustomResourceDefinition {
    patch(Cinder::crd(), |schema| {
        schema["properties"]["metadata"] = json!({
            "type": "object",
            "properties": {"name": {"type": "string", "maxLength": MAX_CINDER_NAME_LEN}}
        });
    })
}

/// The CinderBackend CRD.
pub fn cinder_backend_crd() -> CustomResourceDefinition {
    CinderBackend::crd()
}

/// The CinderBackupBackend CRD.
pub fn cinder_backup_backend_crd() -> CustomResourceDefinition {
    CinderBackupBackend::crd()
}

/// The three CRDs, in install order.
pub fn crds() -> Vec<CustomResourceDefinition> {
    vec![
        cinder_crd(),
        cinder_backend_crd(),
        cinder_backup_backend_crd(),
    ]
}

/// Applies `edit` to the openAPIV3Schema of every version of `crd`.
fn patch(mut crd: CustomResourceDefinition, edit: impl Fn(&mut Value)) -> CustomResourceDefinition {
    for version in &mut crd.spec.versions {
        let Some(validation) = version.schema.as_mut() else {
            continue;
        };
        let Some(props) = validation.open_api_v3_schema.as_mut() else {
            continue;
        };
        // The JSONSchemaProps type round-trips through JSON; a failure leaves the schema as generated.
        let Ok(mut value) = serde_json::to_value(&*props) else {
            continue;
        };
        edit(&mut value);
        if let Ok(updated) = serde_json::from_value(value) {
            *props = updated;
        }
    }
    crd
}

#[cfg(test)]
mod tests {
    use super::*;

    fn schema_of(crd: &CustomResourceDefinition) -> Value {
        let v = serde_json::to_value(crd).unwrap();
        v["spec"]["versions"][0]["schema"]["openAPIV3Schema"].clone()
    }

    #[test]
    fn cinder_schema_limits_the_name_structurally_and_with_cel() {
        let s = schema_of(&cinder_crd());
        assert_eq!(
            s["properties"]["metadata"]["properties"]["name"]["maxLength"],
            43
        );
        let rules = s["x-kubernetes-validations"].as_array().unwrap();
        let rule = rules
            .iter()
            .find(|r| r["rule"] == format!("self.metadata.name.size() <= {MAX_CINDER_NAME_LEN}"))
            .expect("the name rule, with the limit of names::MAX_CINDER_NAME_LEN");
        assert_eq!(rule["fieldPath"], ".metadata.name");
        assert_eq!(
            rule["message"],
            format!("metadata.name must be at most {MAX_CINDER_NAME_LEN} characters")
        );
    }

    #[test]
    fn cinder_schema_carries_cross_field_cel_rules() {
        let s = schema_of(&cinder_crd());
        let spec = &s["properties"]["spec"]["properties"];
        for (field, rule) in [
            ("image", "has(self.tag) != has(self.digest)"),
            ("database", "has(self.clusterRef) != has(self.host)"),
            ("messaging", "has(self.clusterRef) != has(self.secretRef)"),
            ("autoscaling", "self.minReplicas <= self.maxReplicas"),
        ] {
            assert_eq!(
                spec[field]["x-kubernetes-validations"][0]["rule"], rule,
                "{field}"
            );
        }
    }

    #[test]
    fn cinder_schema_carries_release_pattern_and_image_one_of() {
        let s = schema_of(&cinder_crd());
        let spec = &s["properties"]["spec"];
        assert_eq!(
            spec["properties"]["openStackRelease"]["pattern"],
            r"^\d{4}\.[12]$"
        );
        let one_of = spec["properties"]["image"]["oneOf"].as_array().unwrap();
        assert_eq!(one_of.len(), 2);
        assert_eq!(one_of[0]["required"][0], "tag");
        assert_eq!(one_of[1]["required"][0], "digest");
        assert_eq!(
            spec["properties"]["api"]["properties"]["replicas"]["default"],
            3
        );
        assert_eq!(
            spec["properties"]["dbPurge"]["properties"]["schedule"]["default"],
            "1 0 * * *"
        );
        assert_eq!(
            spec["properties"]["secretStoreRef"]["default"]["name"],
            "openbao-cluster-store"
        );
    }

    #[test]
    fn satellite_schemas_carry_type_enum_one_of_and_immutability() {
        for crd in [cinder_backend_crd(), cinder_backup_backend_crd()] {
            let s = schema_of(&crd);
            let spec = &s["properties"]["spec"];
            let mut types: Vec<_> = spec["properties"]["type"]["enum"]
                .as_array()
                .unwrap()
                .clone();
            types.sort_by_key(|v| v.to_string());
            assert_eq!(types, vec![json!("NFS"), json!("RBD")]);
            assert_eq!(spec["oneOf"].as_array().unwrap().len(), 2);
            assert_eq!(
                spec["x-kubernetes-validations"][0]["message"],
                "exactly the block matching type (nfs for NFS, rbd for RBD) must be set"
            );
            assert_eq!(
                spec["properties"]["type"]["x-kubernetes-validations"][0]["rule"],
                "self == oldSelf"
            );
            assert_eq!(
                spec["properties"]["cinderRef"]["x-kubernetes-validations"][0]["rule"],
                "self == oldSelf"
            );
            assert_eq!(
                spec["properties"]["rbd"]["properties"]["clusterName"]["default"],
                "ceph"
            );
        }
    }

    #[test]
    fn printer_columns_and_status_subresource() {
        let names = |crd: &CustomResourceDefinition| -> Vec<String> {
            crd.spec.versions[0]
                .additional_printer_columns
                .as_ref()
                .unwrap()
                .iter()
                .map(|c| c.name.clone())
                .collect()
        };
        assert_eq!(
            names(&cinder_crd()),
            ["Ready", "Reason", "Release", "Endpoint", "Age"]
        );
        assert_eq!(
            names(&cinder_backend_crd()),
            ["Ready", "Reason", "Type", "Cinder", "Age"]
        );
        assert_eq!(
            names(&cinder_backup_backend_crd()),
            ["Ready", "Reason", "Type", "Cinder", "Age"]
        );
        for crd in crds() {
            assert_eq!(
                crd.spec.names.categories.as_deref(),
                Some(&["openstack".to_string(), "cinder".to_string()][..])
            );
            assert!(crd.spec.names.short_names.is_some());
            assert_eq!(crd.spec.group, "cinder.openstack.c5c3.io");
            assert_eq!(crd.spec.scope, "Namespaced");
            assert!(
                crd.spec.versions[0]
                    .subresources
                    .as_ref()
                    .unwrap()
                    .status
                    .is_some()
            );
        }
    }

    /// Every property under `path` has a description (`kubectl explain` shows it); the paths of
    /// those without one are collected. Maps (`additionalProperties`) and list items are walked
    /// into; their own entries are not properties.
    fn undescribed(schema: &Value, path: &str, out: &mut Vec<String>) {
        if let Some(props) = schema["properties"].as_object() {
            for (name, prop) in props {
                let here = format!("{path}.{name}");
                if prop["description"]
                    .as_str()
                    .is_none_or(|d| d.trim().is_empty())
                {
                    out.push(here.clone());
                }
                undescribed(prop, &here, out);
            }
        }
        if schema["items"].is_object() {
            undescribed(&schema["items"], &format!("{path}[]"), out);
        }
        if schema["additionalProperties"].is_object() {
            undescribed(&schema["additionalProperties"], &format!("{path}{{}}"), out);
        }
        for key in ["oneOf", "anyOf", "allOf"] {
            for sub in schema[key].as_array().into_iter().flatten() {
                undescribed(sub, path, out);
            }
        }
    }

    #[test]
    fn every_spec_and_status_field_has_a_description() {
        for crd in crds() {
            let s = schema_of(&crd);
            let mut missing = Vec::new();
            for top in ["spec", "status"] {
                // oneOf branches restate properties only to constrain them; they are not fields.
                let mut part = s["properties"][top].clone();
                strip_one_of(&mut part);
                undescribed(&part, top, &mut missing);
            }
            assert!(
                missing.is_empty(),
                "{}: fields without a description: {missing:#?}",
                crd.spec.names.kind
            );
        }
    }

    fn strip_one_of(v: &mut Value) {
        match v {
            Value::Object(map) => {
                map.remove("oneOf");
                map.values_mut().for_each(strip_one_of);
            }
            Value::Array(items) => items.iter_mut().for_each(strip_one_of),
            _ => {}
        }
    }

    #[test]
    fn the_description_walk_finds_a_field_without_one() {
        let schema = json!({"properties": {"a": {"description": "x", "properties": {"b": {}}},
            "c": {"description": "y", "items": {"properties": {"d": {"description": ""}}}}}});
        let mut missing = Vec::new();
        undescribed(&schema, "spec", &mut missing);
        assert_eq!(missing, ["spec.a.b", "spec.c[].d"]);
    }

    #[test]
    fn conditions_are_a_list_map_keyed_by_type() {
        for crd in crds() {
            let s = schema_of(&crd);
            let conditions = &s["properties"]["status"]["properties"]["conditions"];
            assert_eq!(
                conditions["x-kubernetes-list-type"], "map",
                "{}",
                crd.spec.names.kind
            );
            assert_eq!(conditions["x-kubernetes-list-map-keys"], json!(["type"]));
        }
    }
}
