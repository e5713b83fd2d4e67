//! The OpenAPI schemas of the built-in kinds, from the k8s-openapi types (their `JsonSchema`
//! implementations carry the upstream names, e.g. `io.k8s.api.apps.v1.Deployment`, and
//! descriptions), generated once per form: OpenAPI v3 (`#/components/schemas/...` references)
//! and OpenAPI v2 (`#/definitions/...`). `kubectl explain` and client-side validation read them.

use k8s_openapi::Resource;
use k8s_openapi::api::{
    apps, autoscaling, batch, coordination, core, discovery, events, networking, policy, rbac,
};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use schemars::{JsonSchema, SchemaGenerator, generate::SchemaSettings};
use serde_json::{Map, Value};
use std::collections::BTreeSet;
use std::sync::LazyLock;

/// The definitions of one form and, per built-in kind, its definition name.
pub struct Schemas {
    pub definitions: Map<String, Value>,
    /// (group, version, kind) → definition name.
    pub kinds: Vec<((String, String, String), String)>,
}

impl Schemas {
    /// The definition name of a built-in kind.
    pub fn name_of(&self, group: &str, version: &str, kind: &str) -> Option<&str> {
        self.kinds
            .iter()
            .find(|((g, v, k), _)| g == group && v == version && k == kind)
            .map(|(_, n)| n.as_str())
    }

    /// `roots` and every definition they reference, directly or not.
    pub fn closure(&self, roots: &[&str]) -> Map<String, Value> {
        let mut seen: BTreeSet<String> = BTreeSet::new();
        let mut todo: Vec<String> = roots.iter().map(|r| r.to_string()).collect();
        while let Some(name) = todo.pop() {
            if !seen.insert(name.clone()) {
                continue;
            }
            if let Some(def) = self.definitions.get(&name) {
                collect_refs(def, &mut todo);
            }
        }
        seen.into_iter()
            .filter_map(|n| self.definitions.get(&n).map(|d| (n, d.clone())))
            .collect()
    }
}

fn collect_refs(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::Object(m) => {
            if let Some(r) = m.get("$ref").and_then(Value::as_str)
                && let Some(name) = r.rsplit('/').next()
            {
                out.push(name.to_string());
            }
            m.values().for_each(|x| collect_refs(x, out));
        }
        Value::Array(a) => a.iter().for_each(|x| collect_refs(x, out)),
        _ => {}
    }
}

fn add<T: Resource + JsonSchema>(
    g: &mut SchemaGenerator,
    kinds: &mut Vec<((String, String, String), String)>,
) {
    g.subschema_for::<T>();
    kinds.push((
        (
            T::GROUP.to_string(),
            T::VERSION.to_string(),
            T::KIND.to_string(),
        ),
        T::schema_name().to_string(),
    ));
}

fn generate(settings: SchemaSettings) -> Schemas {
    let mut g = settings.into_generator();
    let mut kinds = Vec::new();
    let k = &mut kinds;
    add::<core::v1::Namespace>(&mut g, k);
    add::<core::v1::Secret>(&mut g, k);
    add::<core::v1::ConfigMap>(&mut g, k);
    add::<core::v1::Service>(&mut g, k);
    add::<core::v1::Pod>(&mut g, k);
    add::<core::v1::Endpoints>(&mut g, k);
    add::<core::v1::Node>(&mut g, k);
    add::<core::v1::ReplicationController>(&mut g, k);
    add::<core::v1::Event>(&mut g, k);
    add::<core::v1::ServiceAccount>(&mut g, k);
    add::<core::v1::LimitRange>(&mut g, k);
    add::<core::v1::PersistentVolumeClaim>(&mut g, k);
    add::<apps::v1::Deployment>(&mut g, k);
    add::<apps::v1::ReplicaSet>(&mut g, k);
    add::<apps::v1::DaemonSet>(&mut g, k);
    add::<apps::v1::StatefulSet>(&mut g, k);
    add::<batch::v1::Job>(&mut g, k);
    add::<batch::v1::CronJob>(&mut g, k);
    add::<policy::v1::PodDisruptionBudget>(&mut g, k);
    add::<autoscaling::v2::HorizontalPodAutoscaler>(&mut g, k);
    add::<networking::v1::NetworkPolicy>(&mut g, k);
    add::<discovery::v1::EndpointSlice>(&mut g, k);
    add::<coordination::v1::Lease>(&mut g, k);
    add::<CustomResourceDefinition>(&mut g, k);
    add::<events::v1::Event>(&mut g, k);
    add::<rbac::v1::Role>(&mut g, k);
    add::<rbac::v1::RoleBinding>(&mut g, k);
    add::<rbac::v1::ClusterRole>(&mut g, k);
    add::<rbac::v1::ClusterRoleBinding>(&mut g, k);
    Schemas {
        definitions: g.take_definitions(true),
        kinds,
    }
}

/// OpenAPI v3 schemas (`#/components/schemas/...`).
pub static V3: LazyLock<Schemas> = LazyLock::new(|| generate(SchemaSettings::openapi3()));

/// OpenAPI v2 schemas (`#/definitions/...`).
pub static V2: LazyLock<Schemas> = LazyLock::new(|| generate(SchemaSettings::draft07()));

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deployment_schema_reaches_the_pod_template() {
        let name = V3.name_of("apps", "v1", "Deployment").unwrap();
        assert_eq!(name, "io.k8s.api.apps.v1.Deployment");
        let defs = V3.closure(&[name]);
        assert!(defs.contains_key("io.k8s.api.core.v1.PodTemplateSpec"));
        assert!(defs.contains_key("io.k8s.api.core.v1.Container"));
        let text = serde_json::to_string(&V2.closure(&[name])).unwrap();
        assert!(text.contains("#/definitions/io.k8s.api.core.v1.PodTemplateSpec"));
        assert!(!text.contains("#/components/"));
    }
}
