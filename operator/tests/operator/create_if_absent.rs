//! Creating an object another writer may have created first: the API server's 409 AlreadyExists
//! is as good as creating it; any other 409 (an answer about a conflict, not about the name) is
//! an error the caller sees.

use cinder_operator::kube_ext::create_if_absent;
use cinder_sim::{ClusterConfig, EmbeddedCluster, ErrorRule};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::api::ObjectMeta;

fn config_map(name: &str) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            ..Default::default()
        },
        ..Default::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_already_exists_counts_as_created() {
    let cluster = EmbeddedCluster::start(ClusterConfig::default())
        .await
        .unwrap();
    let api: Api<ConfigMap> = Api::namespaced(cluster.client().await, "default");

    assert!(create_if_absent(&api, &config_map("first")).await.unwrap());
    assert!(
        !create_if_absent(&api, &config_map("first")).await.unwrap(),
        "an existing object is AlreadyExists"
    );

    cluster
        .faults()
        .add_error_rule(ErrorRule::always(Some("create"), Some("configmaps"), 409));
    let refused = create_if_absent(&api, &config_map("second")).await;
    assert!(
        refused.is_err(),
        "a 409 Conflict is not 'exists': {refused:?}"
    );
    cluster.faults().clear();
    assert!(
        api.get_opt("second").await.unwrap().is_none(),
        "nothing was created"
    );
}
