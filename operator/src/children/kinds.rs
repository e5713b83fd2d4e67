//! The kinds of the Cinder's children, listed once: [`with_child_kinds!`] hands the list to a
//! macro that declares what is done to each kind, so the management cluster's watches
//! ([`crate::controller::watches::Owned`]) and a target cluster's
//! ([`crate::target_cluster::watches`]) cover the same kinds.

/// Calls `$then!` with one `field: Kind,` entry per kind of the Cinder's children (the field a
/// watch of that kind is kept in).
macro_rules! with_child_kinds {
    ($then:ident) => {
        $then! {
            deployments: k8s_openapi::api::apps::v1::Deployment,
            services: k8s_openapi::api::core::v1::Service,
            config_maps: k8s_openapi::api::core::v1::ConfigMap,
            /// The Secrets the operator creates.
            secrets: k8s_openapi::api::core::v1::Secret,
            pod_disruption_budgets: k8s_openapi::api::policy::v1::PodDisruptionBudget,
            autoscalers: k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler,
            network_policies: k8s_openapi::api::networking::v1::NetworkPolicy,
            jobs: k8s_openapi::api::batch::v1::Job,
            cron_jobs: k8s_openapi::api::batch::v1::CronJob,
        }
    };
}
pub(crate) use with_child_kinds;
