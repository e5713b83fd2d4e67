//! The management cluster's watches: one [`SharedWatch`] per kind the controllers read, scoped
//! to `--namespace` when set, the index fed from the Cinder and satellite watches. The Cinder
//! controller and the two satellite controllers subscribe to these before [`Watches::run`].
//!
//! The kinds the operator creates (Secrets, ConfigMaps, Services, Deployments, Jobs, CronJobs,
//! PodDisruptionBudgets, HorizontalPodAutoscalers, NetworkPolicies, the MariaDB Database, User
//! and Grant) are watched by the managed-by label every child carries, so the operator caches
//! its own objects and not every one of the cluster. The credential Secrets a spec names are
//! created by users without that label: a second Secret watch selects them by
//! [`LABEL_CREDENTIAL`], which the operator sets on a credential Secret it had to read from the
//! API server ([`crate::credentials`]); a third selects the target-cluster registrations by
//! [`TARGET_CLUSTER_LABEL`], which their users set.

use super::index::IndexHandle;
use crate::children::kinds::with_child_kinds;
use crate::children::projection::parent_field;
use crate::context::WatchSelection;
use crate::crd::{Cinder, CinderBackend, CinderBackupBackend};
use crate::kube_ext::capability::HTTP_ROUTE;
use crate::kube_ext::reader::ClusterStores;
use crate::kube_ext::resources::{
    cluster_secret_store_resource, mariadb_resource, secret_store_resource,
};
use crate::kube_ext::shared_watch::SharedWatch;
use crate::kube_ext::{scoped, scoped_dynamic};
use crate::names::{LABEL_CREDENTIAL, LABEL_MANAGED_BY, MANAGED_BY, TARGET_CLUSTER_LABEL};
use crate::steps::database::provisioning::SqlKind;
use futures::future::BoxFuture;
use futures::stream::BoxStream;
use futures::{FutureExt, StreamExt};
use k8s_openapi::api::core::v1::Secret;
use kube::api::DynamicObject;
use kube::runtime::controller::Controller;
use kube::runtime::watcher;
use kube::{Api, Client};
use std::sync::Arc;

/// Declares [`Owned`] from the list of the kinds the operator creates ([`with_child_kinds!`]),
/// with what is done to each of them alike: its watch by the managed-by label, its store serving
/// reads, its run, and the Cinder controller owning it.
macro_rules! owned_watches {
    ($($(#[$doc:meta])* $field:ident: $kind:ty,)*) => {
        /// The watches of the kinds the operator creates, one per kind.
        pub(crate) struct Owned {
            $($(#[$doc])* pub $field: SharedWatch<$kind>,)*
        }

        impl Owned {
            fn new(client: &Client, ns: Option<&str>, config: impl Fn() -> watcher::Config) -> Self {
                Owned {
                    $($field: SharedWatch::new(scoped(client, ns), config()),)*
                }
            }

            fn serve_reads(&mut self, stores: &ClusterStores) {
                $(stores.add(&mut self.$field);)*
            }

            fn runs(self) -> Vec<BoxFuture<'static, ()>> {
                vec![$(self.$field.run().boxed(),)*]
            }

            /// `controller` owning every kind: a change to a child wakes the Cinder controlling it.
            pub(crate) fn owned_by(&mut self, controller: Controller<Cinder>) -> Controller<Cinder> {
                controller$(.owns_shared_stream(self.$field.subscribe()))*
            }
        }
    };
}

with_child_kinds!(owned_watches);

/// Every watch of the management cluster, one per kind.
pub(crate) struct Watches {
    pub cinders: SharedWatch<Cinder>,
    pub backends: SharedWatch<CinderBackend>,
    pub backup_backends: SharedWatch<CinderBackupBackend>,
    /// The kinds the operator creates.
    pub owned: Owned,
    /// The Secrets users create that the operator reads: the credentials the specs name
    /// (labelled [`LABEL_CREDENTIAL`]) and the target-cluster registrations (labelled
    /// [`TARGET_CLUSTER_LABEL`]); none when [`WatchSelection::Everything`] has `secrets` watch
    /// every Secret.
    pub user_secrets: Vec<SharedWatch<Secret>>,
    pub secret_stores: SharedWatch<DynamicObject>,
    /// Absent with `--namespace` (a namespaced operator does not read cluster-scoped stores).
    pub cluster_secret_stores: Option<SharedWatch<DynamicObject>>,
    pub mariadbs: SharedWatch<DynamicObject>,
    /// The mariadb-operator Database, User and Grant objects (named after their Cinder).
    pub sql_objects: Vec<(kube::core::ApiResource, SharedWatch<DynamicObject>)>,
    /// HTTPRoutes, when the Gateway API is served at start-up.
    pub http_routes: Option<SharedWatch<DynamicObject>>,
}

impl Watches {
    /// The watches (not started), the index listening on its three sources; HTTPRoutes are
    /// watched when `gateway_api` says the Gateway API is served.
    pub(crate) fn new(
        client: &Client,
        ns: Option<&str>,
        selection: WatchSelection,
        index: &IndexHandle,
        gateway_api: bool,
    ) -> Self {
        let wc = watcher::Config::default;
        let owned_selector = format!("{LABEL_MANAGED_BY}={MANAGED_BY}");
        // The kinds the operator creates: its own objects only, unless told otherwise.
        let owned = || match selection {
            WatchSelection::Labelled => wc().labels(&owned_selector),
            WatchSelection::Everything => wc(),
        };
        let dynamic = |ar: kube::core::ApiResource, config: watcher::Config| {
            SharedWatch::dynamic(scoped_dynamic(client, ns, &ar), config, ar)
        };
        let mut cinders = SharedWatch::new(scoped(client, ns), wc());
        cinders.listen(index.on_cinder());
        let mut backends = SharedWatch::new(scoped(client, ns), wc());
        backends.listen(index.on_backend());
        let mut backup_backends = SharedWatch::new(scoped(client, ns), wc());
        backup_backends.listen(index.on_backup_backend());
        let cluster_secret_stores = ns.is_none().then(|| {
            let ar = cluster_secret_store_resource();
            SharedWatch::dynamic(Api::all_with(client.clone(), &ar), wc(), ar)
        });
        let user_secrets = match selection {
            WatchSelection::Labelled => [LABEL_CREDENTIAL, TARGET_CLUSTER_LABEL]
                .into_iter()
                .map(|label| SharedWatch::new(scoped(client, ns), wc().labels(label)))
                .collect(),
            WatchSelection::Everything => Vec::new(),
        };
        Watches {
            cinders,
            backends,
            backup_backends,
            owned: Owned::new(client, ns, owned),
            user_secrets,
            secret_stores: dynamic(secret_store_resource(), wc()),
            cluster_secret_stores,
            mariadbs: dynamic(mariadb_resource(), wc()),
            sql_objects: SqlKind::ALL
                .iter()
                .map(|k| (k.resource(), dynamic(k.resource(), owned())))
                .collect(),
            http_routes: gateway_api.then(|| dynamic(HTTP_ROUTE.api_resource(), owned())),
        }
    }

    /// A trigger stream of every Secret the watches touch (the operator's and the users').
    pub(crate) fn secret_triggers(&mut self) -> BoxStream<'static, Arc<Secret>> {
        let mut all = vec![self.owned.secrets.subscribe().boxed()];
        all.extend(self.user_secrets.iter_mut().map(|w| w.subscribe().boxed()));
        futures::stream::select_all(all).boxed()
    }

    /// Adds every watch's store to `stores`, so reads on the management cluster come from them.
    pub(crate) fn serve_reads(&mut self, stores: &ClusterStores) {
        stores.add(&mut self.cinders);
        stores.add_indexed(&mut self.backends, vec![parent_field()]);
        stores.add_indexed(&mut self.backup_backends, vec![parent_field()]);
        self.owned.serve_reads(stores);
        stores.add(&mut self.secret_stores);
        stores.add(&mut self.mariadbs);
        for w in [
            self.cluster_secret_stores.as_mut(),
            self.http_routes.as_mut(),
        ]
        .into_iter()
        .flatten()
        {
            stores.add(w);
        }
        for w in self.user_secrets.iter_mut() {
            stores.add(w);
        }
        for (_, w) in self.sql_objects.iter_mut() {
            stores.add(w);
        }
    }

    /// Runs every watch until the returned future is dropped.
    pub(crate) async fn run(self) {
        let mut all = vec![
            self.cinders.run().boxed(),
            self.backends.run().boxed(),
            self.backup_backends.run().boxed(),
            self.secret_stores.run().boxed(),
            self.mariadbs.run().boxed(),
        ];
        all.extend(self.owned.runs());
        for w in [self.cluster_secret_stores, self.http_routes]
            .into_iter()
            .flatten()
        {
            all.push(w.run().boxed());
        }
        all.extend(self.user_secrets.into_iter().map(|w| w.run().boxed()));
        all.extend(self.sql_objects.into_iter().map(|(_, w)| w.run().boxed()));
        tracing::info!(watches = all.len(), "starting the shared watches");
        futures::future::join_all(all).await;
    }
}
