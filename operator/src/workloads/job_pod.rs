//! The pod template of the Cinder's one-shot Jobs (db-sync and the phase Jobs, service-remove,
//! db-purge).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use std::collections::BTreeMap;

/// The pod template of the Cinder's one-shot Jobs (db-sync and the phase Jobs, service-remove,
/// db-purge): one container, never restarted, the rendered config ConfigMap as its `config` volume.
pub(crate) fn config_job_pod(
    labels: BTreeMap<String, String>,
    container: k8s_openapi::api::core::v1::Container,
    config_map: &str,
) -> k8s_openapi::api::core::v1::PodTemplateSpec {
    use k8s_openapi::api::core::v1::{ConfigMapVolumeSource, PodSpec, PodTemplateSpec, Volume};
    PodTemplateSpec {
        metadata: Some(ObjectMeta {
            labels: Some(labels),
            ..Default::default()
        }),
        spec: Some(PodSpec {
            restart_policy: Some("Never".to_string()),
            containers: vec![container],
            volumes: Some(vec![Volume {
                name: "config".to_string(),
                config_map: Some(ConfigMapVolumeSource {
                    name: config_map.to_string(),
                    ..Default::default()
                }),
                ..Default::default()
            }]),
            ..Default::default()
        }),
    }
}
