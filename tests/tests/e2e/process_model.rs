//! The API runs under uWSGI with the spec's processes and threads, and the oslo.db pools the
//! rendered config gives every process add up to the MariaDB User's connection cap, for three
//! topologies: the default, two backends, and an HPA with a ceiling of 10.

use cinder_e2e::database_helpers::*;
use cinder_e2e::workload_helpers::deployment;
use cinder_e2e::*;
use k8s_openapi::api::core::v1::ConfigMap;
use std::collections::BTreeMap;

/// `section.key` of INI file `file` in `data`.
fn ini_value(data: &BTreeMap<String, String>, file: &str, section: &str, key: &str) -> i64 {
    let text = data
        .get(file)
        .unwrap_or_else(|| panic!("no {file} in the config"));
    let mut current = "";
    for line in text.lines() {
        if let Some(s) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            current = s;
        } else if let Some((k, v)) = line.split_once(" = ")
            && current == section
            && k == key
        {
            return v
                .parse()
                .unwrap_or_else(|e| panic!("{file} {section}.{key} = {v}: {e}"));
        }
    }
    panic!("{file} has no {section}.{key}:\n{text}");
}

/// The connections the config the API Deployment of `cinder` mounts lets its fleet open with
/// `api_pods` API pods, `volumes` volume services and one scheduler: uWSGI processes x the API
/// pool per process for each API pod and the surge, the single-writer pool for the scheduler,
/// the volume services and the backup service, and the migration headroom.
async fn rendered_connections(h: &Harness, cinder: &str, api_pods: i64, volumes: i64) -> i64 {
    let api = eventually("the API Deployment", || async {
        deployment(&h.client, &format!("{cinder}-api")).await
    })
    .await
    .unwrap();
    let pod = api.spec.template.spec.unwrap();
    let command = pod.containers[0].command.clone().unwrap_or_default();
    assert_eq!(
        command,
        ["uwsgi", "--ini", "/etc/cinder/api-uwsgi.ini"],
        "the API runs under uWSGI"
    );
    let config_map = pod
        .volumes
        .unwrap_or_default()
        .into_iter()
        .find_map(|v| v.config_map.map(|c| c.name))
        .unwrap();
    let data = h
        .api::<ConfigMap>()
        .get(&config_map)
        .await
        .unwrap()
        .data
        .unwrap();
    assert!(!data["cinder.conf"].contains("osapi_volume_workers"));
    let processes = ini_value(&data, "api-uwsgi.ini", "uwsgi", "processes");
    let api_pool = ini_value(&data, "api.conf", "database", "max_pool_size")
        + ini_value(&data, "api.conf", "database", "max_overflow");
    let single_writer = ini_value(&data, "cinder.conf", "database", "max_pool_size")
        + ini_value(&data, "cinder.conf", "database", "max_overflow");
    (api_pods + 1) * processes * api_pool + (1 + volumes + 1) * single_writer + 2
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_rendered_process_model_fills_exactly_the_connection_cap() {
    let h = Harness::start().await.unwrap();
    database_environment(&h.client, "procs").await.unwrap();
    create_cinder(&h.client, "plain", serde_json::json!({}))
        .await
        .unwrap();
    create_cinder(&h.client, "twob", serde_json::json!({}))
        .await
        .unwrap();
    create_nfs_backend(&h.client, "twob-a", "twob")
        .await
        .unwrap();
    create_nfs_backend(&h.client, "twob-b", "twob")
        .await
        .unwrap();
    create_cinder(
        &h.client,
        "hpa",
        serde_json::json!({"autoscaling": {"minReplicas": 2, "maxReplicas": 10, "targetCPUUtilization": 80}}),
    )
    .await
    .unwrap();
    for (cinder, api_pods, volumes, cap) in
        [("plain", 3, 0, 22), ("twob", 3, 2, 26), ("hpa", 10, 0, 50)]
    {
        wait_user_cap(&h.client, cinder, cap).await.unwrap();
        assert_eq!(
            rendered_connections(&h, cinder, api_pods, volumes).await,
            cap,
            "{cinder}"
        );
    }
    h.stop().await.unwrap();
}
