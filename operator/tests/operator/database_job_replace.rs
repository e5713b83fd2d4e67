//! Replacing a database Job under the device lock deletes only the Job the pass read: when the
//! live Job of that name is another one (a replica replaced it since), it is left alone and the
//! write reports `JobChanged`; when it is the one read, it is deleted and the new one created.

use crate::support::*;
use cinder_operator::context::{OperatorContext, OperatorOptions};
use cinder_operator::crd::Cinder;
use cinder_operator::kube_ext::reader::ClusterStores;
use cinder_operator::metrics::Metrics;
use cinder_operator::pipeline::{Clusters, StepMemory};
use cinder_operator::steps::database::jobs::{self, Act, JobWrite, SchemaJob};
use cinder_operator::steps::database::services::DatabaseServices;
use k8s_openapi::api::batch::v1::Job;
use kube::Api;
use kube::api::{DeleteParams, PostParams};
use serde_json::json;
use std::sync::Arc;

const NS: &str = "default";

fn cinder_manifest() -> serde_json::Value {
    json!({
        "apiVersion": "cinder.openstack.c5c3.io/v1alpha1",
        "kind": "Cinder",
        "metadata": {"name": "cinder", "namespace": NS},
        "spec": {
            "openStackRelease": "2026.1",
            "image": {"repository": "ghcr.io/c5c3/cinder", "tag": "2026.1"},
            "database": {
                "clusterRef": {"name": "mariadb"},
                "database": "cinder",
                "secretRef": {"name": "cinder-db-credentials"}
            },
            "messaging": {"secretRef": {"name": "cinder-messaging"}},
            "serviceUser": {
                "username": "cinder",
                "projectName": "service",
                "userDomainName": "Default",
                "projectDomainName": "Default",
                "secretRef": {"name": "keystone-cinder", "key": "password"}
            },
            "keystoneEndpoint": "https://keystone.openstack.svc:5000/v3",
            "region": "RegionOne"
        }
    })
}

/// The UID of the live Job `name`, if any and not going away.
async fn live_uid(api: &Api<Job>, name: &str) -> Option<String> {
    let job = api.get_opt(name).await.expect("read Job")?;
    if job.metadata.deletion_timestamp.is_some() {
        return None;
    }
    job.metadata.uid
}

/// Deletes Job `name` and waits until it is gone.
async fn delete_and_wait(api: &Api<Job>, name: &str) {
    api.delete(name, &DeleteParams::background())
        .await
        .expect("delete Job");
    eventually("the deleted Job is gone", || async {
        api.get_opt(name).await.expect("read Job").is_none()
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replacement_deletes_only_the_job_the_pass_read() {
    let (_cluster, client) = cluster_with_crds().await;
    let cinders: Api<Cinder> = Api::namespaced(client.clone(), NS);
    let manifest: Cinder = serde_json::from_value(cinder_manifest()).unwrap();
    let cinder = cinders
        .create(&PostParams::default(), &manifest)
        .await
        .unwrap();

    let (_registry, metrics) = Metrics::new_registry();
    let options = OperatorOptions {
        // The embedded cluster's Service names do not resolve on this host.
        health_check: cinder_operator::context::HealthCheckRoute::ApiServerProxy,
        lease_namespace: NS.to_string(),
        ..OperatorOptions::default()
    };
    let op = OperatorContext::new(client.clone(), options, Arc::new(metrics))
        .await
        .expect("an operator context");
    let services = DatabaseServices::new(&op, StepMemory::default());
    let clusters = Clusters {
        management: client.clone(),
        children: client.clone(),
        children_reads: ClusterStores::default(),
    };
    let jobs_api: Api<Job> = Api::namespaced(client.clone(), NS);
    let name = SchemaJob::DbSync.job_name("cinder");

    // The db-sync Job mounting `config`, created; its UID.
    let create = |config: &'static str| {
        let (jobs_api, cinder, name) = (&jobs_api, &cinder, &name);
        async move {
            let job = jobs::desired_job(cinder, SchemaJob::DbSync, config);
            jobs_api.create(&PostParams::default(), &job).await.unwrap();
            live_uid(jobs_api, name).await.expect("the created Job")
        }
    };
    // The Job this pass read, then the one another replica put in its place.
    let read_uid = create("config-a").await;
    delete_and_wait(&jobs_api, &name).await;
    let their_uid = create("config-b").await;
    assert_ne!(read_uid, their_uid);

    let wanted = jobs::desired_job(&cinder, SchemaJob::DbSync, "config-c");
    let replace = |uid: String| {
        let (clusters, services, cinder, wanted) = (&clusters, &services, &cinder, &wanted);
        async move {
            let write = JobWrite::Replace {
                job: wanted,
                uid: &uid,
            };
            jobs::write_under_lock(clusters, services, cinder, SchemaJob::DbSync, write)
                .await
                .unwrap()
        }
    };
    let act = replace(read_uid).await;
    assert_eq!(act, Act::JobChanged);
    assert_eq!(
        live_uid(&jobs_api, &name).await.as_deref(),
        Some(their_uid.as_str()),
        "the replica's Job is left alone"
    );

    // Read again, the replacement goes through: the replica's Job is deleted (and the wanted one
    // created once it is gone and its pod has ended: until then the write waits for the pod).
    let act = replace(their_uid.clone()).await;
    assert!(
        matches!(act, Act::Done | Act::Deleted | Act::PodRunning(_)),
        "{act:?}"
    );
    assert_ne!(
        live_uid(&jobs_api, &name).await.as_deref(),
        Some(their_uid.as_str()),
        "the Job read is replaced"
    );
}
