//! The generated CustomResourceDefinitions, completed with the rules `#[derive]` cannot express:
//! the 43-character name limit (as a structural `maxLength` on `metadata.name` and as a CEL rule),
//! the Cinder's cross-field rules (exactly one of image tag and digest, of database clusterRef
//! and host, of messaging clusterRef and secretRef; autoscaling minReplicas at most
//! maxReplicas) as CEL rules whose messages name the field, and the satellites' "exactly the
//! block matching `type`" (as a structural `oneOf` and as CEL). So `kubectl apply` of such a
//! spec is refused by the API server.
//!
//! Immutability of `type` and `cinderRef` (`self == oldSelf`) only CEL can express; the
//! satellite controllers also compare against the type they recorded, and every other rule
//! here is also enforced by [`super::validation`] with a condition (for API servers that do not
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
        push_rule(
            schema,
            &format!("self.metadata.name.size() <= {MAX_CINDER_NAME_LEN}"),
            &format!("metadata.name must be at most {MAX_CINDER_NAME_LEN} characters"),
        );
        // the cause names the field rather than the object's root
        if let Some(rule) = schema["x-kubernetes-validations"]
            .as_array_mut()
            .and_then(|rules| rules.last_mut())
        {
            rule["fieldPath"] = json!(".metadata.name");
        }
        let spec = &mut schema["properties"]["spec"]["properties"];
        push_rule(
            &mut spec["image"],
            "has(self.tag) != has(self.digest)",
            "spec.image must set exactly one of tag and digest",
        );
        push_rule(
            &mut spec["database"],
            "has(self.clusterRef) != has(self.host)",
            "spec.database must set exactly one of clusterRef and host",
        );
        push_rule(
            &mut spec["messaging"],
            "has(self.clusterRef) != has(self.secretRef)",
            "spec.messaging must set exactly one of clusterRef and secretRef",
        );
        push_rule(
            &mut spec["autoscaling"],
            "self.minReplicas <= self.maxReplicas",
            "spec.autoscaling.minReplicas must not exceed maxReplicas",
        );
    })
}

/// The CinderBackend CRD.
pub fn cinder_backend_crd() -> CustomResourceDefinition {
    patch(CinderBackend::crd(), |schema| {
        storage_block_rules(&mut schema["properties"]["spec"])
    })
}

/// The CinderBackupBackend CRD.
pub fn cinder_backup_backend_crd() -> CustomResourceDefinition {
    patch(CinderBackupBackend::crd(), |schema| {
        storage_block_rules(&mut schema["properties"]["spec"])
    })
}

/// The three CRDs, in install order.
pub fn crds() -> Vec<CustomResourceDefinition> {
    vec![
        cinder_crd(),
        cinder_backend_crd(),
        cinder_backup_backend_crd(),
    ]
}

/// `type: NFS` requires `nfs` and forbids `rbd`, and the other way round.
fn storage_block_rules(spec: &mut Value) {
    spec["oneOf"] = json!([
        {"properties": {"type": {"enum": ["NFS"]}}, "required": ["nfs"], "not": {"required": ["rbd"]}},
        {"properties": {"type": {"enum": ["RBD"]}}, "required": ["rbd"], "not": {"required": ["nfs"]}}
    ]);
    push_rule(
        spec,
        "self.type == 'NFS' ? (has(self.nfs) && !has(self.rbd)) : (has(self.rbd) && !has(self.nfs))",
        "exactly the block matching type (nfs for NFS, rbd for RBD) must be set",
    );
}

fn push_rule(schema: &mut Value, rule: &str, message: &str) {
    let entry = json!({"rule": rule, "message": message});
    match schema
        .get_mut("x-kubernetes-validations")
        .and_then(Value::as_array_mut)
    {
        Some(rules) => rules.push(entry),
        None => schema["x-kubernetes-validations"] = json!([entry]),
    }
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
        assert!(
            rules
                .iter()
                .any(|r| r["rule"] == "self.metadata.name.size() <= 43")
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
            ["Ready", "Release", "Endpoint", "Age"]
        );
        assert_eq!(
            names(&cinder_backend_crd()),
            ["Ready", "Type", "Cinder", "Age"]
        );
        assert_eq!(
            names(&cinder_backup_backend_crd()),
            ["Ready", "Type", "Cinder", "Age"]
        );
        for crd in crds() {
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
}
