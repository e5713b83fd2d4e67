//! Turning a CustomResourceDefinition object into a served resource, and the status the server
//! gives a CRD (NamesAccepted, Established).

use super::resource_info::{CrdFacts, PrinterColumn, ResourceInfo};
use crate::error::{ApiError, Cause};
use crate::json::strings;
use serde_json::{Value, json};

fn s(v: &Value, key: &str) -> String {
    v.get(key)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string()
}

/// Validates a CRD object and derives the resource it defines.
pub fn resource_from_crd(crd: &Value) -> Result<ResourceInfo, ApiError> {
    let name = crd
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let spec = crd.get("spec").cloned().unwrap_or(Value::Null);
    let group = s(&spec, "group");
    let names = spec.get("names").cloned().unwrap_or(Value::Null);
    let plural = s(&names, "plural");
    let kind = s(&names, "kind");
    let scope = s(&spec, "scope");
    let mut causes = Vec::new();
    if group.is_empty() {
        causes.push(Cause::new(
            "FieldValueRequired",
            "spec.group",
            "Required value",
        ));
    }
    if plural.is_empty() {
        causes.push(Cause::new(
            "FieldValueRequired",
            "spec.names.plural",
            "Required value",
        ));
    }
    if kind.is_empty() {
        causes.push(Cause::new(
            "FieldValueRequired",
            "spec.names.kind",
            "Required value",
        ));
    }
    if scope != "Namespaced" && scope != "Cluster" {
        causes.push(Cause::new(
            "FieldValueNotSupported",
            "spec.scope",
            format!("Unsupported value: {scope:?}: supported values: \"Cluster\", \"Namespaced\""),
        ));
    }
    if !plural.is_empty() && !group.is_empty() && name != format!("{plural}.{group}") {
        causes.push(Cause::new(
            "FieldValueInvalid",
            "metadata.name",
            format!("Invalid value: {name:?}: must be spec.names.plural+\".\"+spec.group"),
        ));
    }
    let versions = spec
        .get("versions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    if versions.is_empty() {
        causes.push(Cause::new(
            "FieldValueRequired",
            "spec.versions",
            "Required value: must have exactly one version marked as storage version",
        ));
    }
    if versions
        .iter()
        .filter(|v| v.get("storage").and_then(Value::as_bool) == Some(true))
        .count()
        != 1
        && !versions.is_empty()
    {
        causes.push(Cause::new(
            "FieldValueInvalid",
            "spec.versions",
            "must have exactly one version marked as storage version",
        ));
    }
    if !causes.is_empty() {
        return Err(ApiError::invalid(
            "apiextensions.k8s.io",
            "CustomResourceDefinition",
            name,
            causes,
        ));
    }
    let mut served: Vec<String> = Vec::new();
    let mut facts = CrdFacts::default();
    let mut has_status = false;
    // storage version first (the preferred one), then the other served ones
    let mut ordered = versions.clone();
    ordered.sort_by_key(|v| v.get("storage").and_then(Value::as_bool) != Some(true));
    for v in &ordered {
        let vname = s(v, "name");
        if vname.is_empty() || v.get("served").and_then(Value::as_bool) == Some(false) {
            continue;
        }
        if v.pointer("/subresources/status").is_some() {
            has_status = true;
        }
        if let Some(schema) = v.pointer("/schema/openAPIV3Schema") {
            facts.schemas.insert(vname.clone(), schema.clone());
        }
        let cols = v
            .get("additionalPrinterColumns")
            .and_then(Value::as_array)
            .map(|cols| {
                cols.iter()
                    .map(|c| PrinterColumn {
                        name: s(c, "name"),
                        type_: s(c, "type"),
                        format: s(c, "format"),
                        description: s(c, "description"),
                        json_path: s(c, "jsonPath"),
                        priority: c.get("priority").and_then(Value::as_i64).unwrap_or(0),
                    })
                    .collect()
            })
            .unwrap_or_default();
        facts.columns.insert(vname.clone(), cols);
        let selectable = v
            .get("selectableFields")
            .and_then(Value::as_array)
            .map(|fields| {
                fields
                    .iter()
                    .map(|f| s(f, "jsonPath").trim_start_matches('.').to_string())
                    .collect()
            })
            .unwrap_or_default();
        facts.selectable_fields.insert(vname.clone(), selectable);
        served.push(vname);
    }
    let singular = match s(&names, "singular") {
        x if x.is_empty() => kind.to_lowercase(),
        x => x,
    };
    let list_kind = match s(&names, "listKind") {
        x if x.is_empty() => format!("{kind}List"),
        x => x,
    };
    Ok(ResourceInfo {
        group,
        versions: served,
        resource: plural,
        kind,
        singular,
        list_kind,
        namespaced: scope == "Namespaced",
        short_names: strings(names.get("shortNames")),
        categories: strings(names.get("categories")),
        has_status,
        has_proxy: false,
        crd: Some(facts),
    })
}

/// The status the server keeps on an accepted CRD.
pub fn crd_status(crd: &Value, now: &str) -> Value {
    let names = crd.pointer("/spec/names").cloned().unwrap_or(json!({}));
    let storage: Vec<Value> = crd
        .pointer("/spec/versions")
        .and_then(Value::as_array)
        .map(|vs| {
            vs.iter()
                .filter(|v| v.get("storage").and_then(Value::as_bool) == Some(true))
                .filter_map(|v| v.get("name").cloned())
                .collect()
        })
        .unwrap_or_default();
    json!({
        "acceptedNames": names,
        "storedVersions": storage,
        "conditions": [
            {"type": "NamesAccepted", "status": "True", "reason": "NoConflicts",
             "message": "no conflicts found", "lastTransitionTime": now},
            {"type": "Established", "status": "True", "reason": "InitialNamesAccepted",
             "message": "the initial names have been accepted", "lastTransitionTime": now}
        ]
    })
}
