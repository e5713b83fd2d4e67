//! A Cinder naming a registered target cluster (two embedded clusters, management and target):
//! its children are created on the target, in a namespace the operator creates there, owned by
//! the ownership label instead of an ownerReference; the management cluster receives none of
//! them (only the MariaDB objects, which live beside the database); the Cinder reaches
//! Ready=True/AllReady from the target's simulated controllers; a child deleted on the target
//! is recreated because the target watch wakes its Cinder; a backend detach runs on the target;
//! deleting the Cinder deletes its children there.

use cinder_e2e::database_helpers::mariadb_object;
use cinder_e2e::group_helpers::group_cinder;
use cinder_e2e::target_helpers::{register, target_cluster};
use cinder_e2e::workload_helpers::{delete_backend, wait_backend_gone};
use cinder_e2e::*;
use cinder_operator::crd::{Cinder, CinderBackend};
use cinder_operator::kube_ext::ownership::OWNER_LABEL;
use cinder_operator::names;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::batch::v1::{CronJob, Job};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret, Service};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::ListParams;
use kube::core::NamespaceResourceScope;
use kube::{Api, Client, Resource};
use serde::de::DeserializeOwned;
use std::time::{Duration, Instant};

const CINDER: &str = "proj";
const BACKEND: &str = "proj-nfs";

/// The names of the `K` in [`NS`] carrying the Cinder's instance label.
async fn children<K>(client: &Client) -> Vec<K>
where
    K: Resource<Scope = NamespaceResourceScope> + Clone + DeserializeOwned + std::fmt::Debug,
    K::DynamicType: Default,
{
    let api: Api<K> = Api::namespaced(client.clone(), NS);
    let selector = format!("{}={CINDER}", names::LABEL_INSTANCE);
    api.list(&ListParams::default().labels(&selector))
        .await
        .map(|l| l.items)
        .unwrap_or_default()
}

async fn child_names<K>(client: &Client) -> Vec<String>
where
    K: Resource<Scope = NamespaceResourceScope> + Clone + DeserializeOwned + std::fmt::Debug,
    K::DynamicType: Default,
{
    let mut names: Vec<String> = children::<K>(client)
        .await
        .iter()
        .filter_map(|o| o.meta().name.clone())
        .collect();
    names.sort();
    names
}

/// Every child of kind `K` on the target carries the ownership label and no ownerReference.
async fn assert_label_owned<K>(target: &Client, kind: &str)
where
    K: Resource<Scope = NamespaceResourceScope> + Clone + DeserializeOwned + std::fmt::Debug,
    K::DynamicType: Default,
{
    let owner = format!("{NS}.{CINDER}");
    let items = children::<K>(target).await;
    assert!(!items.is_empty(), "no {kind} of {CINDER} on the target");
    for o in items {
        let meta = o.meta();
        let name = meta.name.clone().unwrap_or_default();
        assert_eq!(
            meta.labels.as_ref().and_then(|l| l.get(OWNER_LABEL)),
            Some(&owner),
            "{kind}/{name} lacks the ownership label"
        );
        assert!(
            meta.owner_references.as_ref().is_none_or(|o| o.is_empty()),
            "{kind}/{name} on the target carries an ownerReference"
        );
    }
}

/// The last pass of the Cinder asked for no requeue sooner than 30 s (so a prompt pass after
/// this can only come from a watch).
async fn settled(h: &Harness) -> bool {
    let records = h
        .ctx
        .pipelines
        .send(cinder_operator::pipeline::Inspect)
        .await
        .unwrap_or_default();
    records
        .into_iter()
        .find(|r| r.namespace == NS && r.name == CINDER)
        .is_some_and(|r| r.last_requeue_seconds.is_none_or(|s| s >= 30.0))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "operator bug: the API pods on the target cluster reference the service-user Secret \
            (cinder-keystone), which exists only on the management cluster, so the simulated \
            kubelet holds them in CreateContainerConfigError and the Cinder never becomes Ready"]
async fn a_target_cluster_receives_the_children_and_the_management_cluster_does_not() {
    let h = Harness::start().await.unwrap();
    // The target has no namespace of the Cinder's name yet: the operator creates it.
    let (target, remote) = target_cluster(false).await.unwrap();
    register(&h, "edge", target.kubeconfig_yaml())
        .await
        .unwrap();
    group_cinder(
        &h.client,
        CINDER,
        serde_json::json!({"targetClusterRef": {"name": "edge"}}),
    )
    .await
    .unwrap();

    wait_cinder_condition(&h.client, CINDER, "Ready", "True", "AllReady")
        .await
        .unwrap();

    // The namespace and every kind of child are on the target, owned by the label.
    let namespaces: Api<Namespace> = Api::all(remote.clone());
    assert!(namespaces.get_opt(NS).await.unwrap().is_some());
    let deployments = child_names::<Deployment>(&remote).await;
    for d in [
        names::api_deployment(CINDER),
        names::scheduler_deployment(CINDER),
        names::volume_deployment(CINDER, BACKEND),
    ] {
        assert!(
            deployments.contains(&d),
            "{d} not on the target: {deployments:?}"
        );
    }
    assert!(
        child_names::<Service>(&remote)
            .await
            .contains(&names::api_service(CINDER))
    );
    assert!(
        child_names::<PodDisruptionBudget>(&remote)
            .await
            .contains(&names::api_pdb(CINDER))
    );
    assert!(
        child_names::<CronJob>(&remote)
            .await
            .contains(&names::db_purge_cronjob(CINDER))
    );
    assert!(
        child_names::<Job>(&remote)
            .await
            .contains(&names::db_sync_job(CINDER))
    );
    let secrets = child_names::<Secret>(&remote).await;
    for s in [
        names::db_connection_secret(CINDER),
        names::transport_url_secret(CINDER),
    ] {
        assert!(secrets.contains(&s), "{s} not on the target: {secrets:?}");
    }
    assert!(
        secrets
            .iter()
            .any(|s| s.starts_with(&names::backend_secret_base(CINDER, BACKEND))),
        "the backend projection is not on the target: {secrets:?}"
    );
    assert!(!child_names::<ConfigMap>(&remote).await.is_empty());
    assert_label_owned::<Deployment>(&remote, "Deployment").await;
    assert_label_owned::<Service>(&remote, "Service").await;
    assert_label_owned::<Secret>(&remote, "Secret").await;
    assert_label_owned::<ConfigMap>(&remote, "ConfigMap").await;
    assert_label_owned::<Job>(&remote, "Job").await;
    assert_label_owned::<CronJob>(&remote, "CronJob").await;

    // The management cluster holds none of them; the MariaDB objects stay beside the database.
    let mgmt = &h.client;
    assert_eq!(child_names::<Deployment>(mgmt).await, Vec::<String>::new());
    assert_eq!(child_names::<Service>(mgmt).await, Vec::<String>::new());
    assert_eq!(child_names::<ConfigMap>(mgmt).await, Vec::<String>::new());
    assert_eq!(child_names::<Secret>(mgmt).await, Vec::<String>::new());
    assert_eq!(child_names::<Job>(mgmt).await, Vec::<String>::new());
    assert_eq!(child_names::<CronJob>(mgmt).await, Vec::<String>::new());
    assert_eq!(
        child_names::<PodDisruptionBudget>(mgmt).await,
        Vec::<String>::new()
    );
    for kind in ["Database", "User", "Grant"] {
        assert!(
            mariadb_object(mgmt, kind, CINDER).await.is_some(),
            "the MariaDB {kind} is not on the management cluster"
        );
    }
    let cinders: Api<Cinder> = h.api();
    let status = cinders
        .get(CINDER)
        .await
        .unwrap()
        .status
        .unwrap_or_default();
    assert_eq!(
        status
            .volume_services
            .iter()
            .map(|v| v.host.clone())
            .collect::<Vec<_>>(),
        vec![names::volume_service_host(CINDER, BACKEND)]
    );

    // A child deleted on the target comes back promptly: the target watch wakes the Cinder
    // (its last pass asked for no requeue within 30 s).
    eventually("the Cinder settles", || async {
        settled(&h).await.then_some(())
    })
    .await
    .unwrap();
    let remote_deployments: Api<Deployment> = Api::namespaced(remote.clone(), NS);
    let scheduler = names::scheduler_deployment(CINDER);
    let before = remote_deployments.get(&scheduler).await.unwrap();
    remote_deployments
        .delete(&scheduler, &Default::default())
        .await
        .unwrap();
    let started = Instant::now();
    let recreated = loop {
        let now = remote_deployments.get_opt(&scheduler).await.unwrap();
        if let Some(d) = now
            && d.metadata.uid != before.metadata.uid
        {
            break true;
        }
        if started.elapsed() > Duration::from_secs(8) {
            break false;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(
        recreated,
        "the scheduler Deployment deleted on the target was not recreated within 8 s: no watch woke the Cinder"
    );
    assert!(child_names::<Deployment>(mgmt).await.is_empty());

    // A detach runs on the target: the volume Deployment goes, the service-remove Job runs there,
    // the finalizer on the management cluster is released.
    delete_backend(mgmt, BACKEND).await.unwrap();
    wait_backend_gone(mgmt, BACKEND).await.unwrap();
    let backends: Api<CinderBackend> = h.api();
    assert!(backends.get_opt(BACKEND).await.unwrap().is_none());
    assert!(
        !child_names::<Deployment>(&remote)
            .await
            .contains(&names::volume_deployment(CINDER, BACKEND))
    );
    assert!(
        child_names::<Job>(&remote)
            .await
            .contains(&names::service_remove_job(CINDER, BACKEND)),
        "the service-remove Job did not run on the target"
    );
    assert!(child_names::<Job>(mgmt).await.is_empty());

    // Deleting the Cinder deletes its children on the target.
    cinders.delete(CINDER, &Default::default()).await.unwrap();
    eventually("the Cinder leaves", || {
        let cinders = cinders.clone();
        async move { cinders.get_opt(CINDER).await.ok()?.is_none().then_some(()) }
    })
    .await
    .unwrap();
    eventually("the target's Deployments go", || {
        let remote = remote.clone();
        async move {
            child_names::<Deployment>(&remote)
                .await
                .is_empty()
                .then_some(())
        }
    })
    .await
    .unwrap();

    target.shutdown().await;
    h.stop().await.unwrap();
}
