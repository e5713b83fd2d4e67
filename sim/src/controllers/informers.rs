//! The watch-fed stores the simulated controllers of one cluster read, as real controllers
//! read their informers' caches: one watch per kind, its reflector store shared by every
//! controller that looks objects of that kind up (by name, owner or labels) instead of listing
//! them over HTTP per reconcile, and its touched objects (applied and deleted) fanned out as
//! the trigger streams of kube-runtime's shared-stream controllers.
//!
//! A watch starts when a controller first reads or subscribes to its kind (a cluster whose
//! controllers are off watches nothing) and stops when the controllers are dropped. A trigger
//! is sent after the store holds the object it carries, so a reconcile it starts reads a store
//! at least as new as the trigger. A new subscriber first gets every object the store holds,
//! so subscribing late misses nothing. Each store is indexed by owner ([`OwnerIndex`]), updated
//! before the trigger too, so a controller finds what it owns without a walk of the kind.

use std::fmt::Debug;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use futures::channel::mpsc::{UnboundedSender, unbounded};
use futures::{Stream, StreamExt};
use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{ConfigMap, Endpoints, Node, Pod, Secret, ServiceAccount};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::Api;
use kube::runtime::reflector::store::Writer;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, Resource};
use serde::de::DeserializeOwned;
use tokio::task::AbortHandle;

use super::owner_index::OwnerIndex;

type Subscribers<K> = Arc<Mutex<Vec<UnboundedSender<Arc<K>>>>>;

/// One watched kind: its store and its trigger fan-out, once started.
pub struct Informer<K>
where
    K: Resource<DynamicType = ()> + Clone + 'static,
{
    client: Client,
    running: OnceLock<Running<K>>,
}

/// A started informer's watch task, store and subscribers.
struct Running<K>
where
    K: Resource<DynamicType = ()> + Clone + 'static,
{
    store: Store<K>,
    /// True once the store holds its first complete list. (The store's own
    /// `wait_until_ready` wakes only the last of several concurrent waiters.)
    filled: tokio::sync::watch::Receiver<bool>,
    /// The store's objects by owner uid, as current as the store when a trigger is sent.
    owners: Arc<Mutex<OwnerIndex>>,
    subscribers: Subscribers<K>,
    task: AbortHandle,
}

impl<K> Drop for Informer<K>
where
    K: Resource<DynamicType = ()> + Clone + 'static,
{
    fn drop(&mut self) {
        if let Some(running) = self.running.get() {
            running.task.abort();
        }
    }
}

impl<K> Informer<K>
where
    K: Resource<DynamicType = ()> + Clone + Debug + DeserializeOwned + Send + Sync + 'static,
{
    /// An informer of every object of `K` on the cluster `client` talks to (not started).
    fn new(client: &Client) -> Self {
        Informer {
            client: client.clone(),
            running: OnceLock::new(),
        }
    }

    /// The running watch, started on first use (inside the Tokio runtime).
    fn running(&self) -> &Running<K> {
        self.running.get_or_init(|| Self::start(&self.client))
    }

    fn start(client: &Client) -> Running<K> {
        let mut writer: Writer<K> = Writer::default();
        let store = writer.as_reader();
        let subscribers: Subscribers<K> = Arc::default();
        let fan_out = Arc::clone(&subscribers);
        let owners: Arc<Mutex<OwnerIndex>> = Arc::default();
        let index = Arc::clone(&owners);
        let (fill, filled) = tokio::sync::watch::channel(false);
        let events =
            watcher(Api::<K>::all(client.clone()), watcher::Config::default()).default_backoff();
        let task = tokio::spawn(async move {
            let mut events = std::pin::pin!(events);
            while let Some(event) = events.next().await {
                let event = match event {
                    Ok(event) => event,
                    Err(error) => {
                        tracing::debug!(%error, kind = %K::kind(&()), "simulated informer watch failed");
                        continue;
                    }
                };
                writer.apply_watcher_event(&event);
                {
                    let mut index = index.lock().unwrap_or_else(PoisonError::into_inner);
                    match &event {
                        watcher::Event::Apply(object) => index.apply(object),
                        watcher::Event::Delete(object) => index.delete(object),
                        watcher::Event::InitDone => {
                            index.rebuild(writer.as_reader().state().iter().map(AsRef::as_ref));
                        }
                        watcher::Event::Init | watcher::Event::InitApply(_) => {}
                    }
                }
                let touched = match event {
                    watcher::Event::Apply(object) | watcher::Event::Delete(object) => {
                        vec![Arc::new(object)]
                    }
                    // A (re)list replaces the store at its end: every object it holds then.
                    watcher::Event::InitDone => {
                        fill.send_replace(true);
                        writer.as_reader().state()
                    }
                    watcher::Event::Init | watcher::Event::InitApply(_) => continue,
                };
                let mut subscribers = fan_out.lock().unwrap_or_else(PoisonError::into_inner);
                subscribers.retain(|tx| {
                    touched
                        .iter()
                        .all(|object| tx.unbounded_send(Arc::clone(object)).is_ok())
                });
            }
        });
        Running {
            store,
            filled,
            owners,
            subscribers,
            task: task.abort_handle(),
        }
    }

    /// The store (possibly not yet filled: see [`Self::ready`]).
    pub fn store(&self) -> Store<K> {
        self.running().store.clone()
    }

    /// The store once it holds its first complete list.
    pub async fn ready(&self) -> Store<K> {
        let running = self.running();
        let mut filled = running.filled.clone();
        // The sender lives as long as the watch task; once that is gone so are the controllers.
        let _ = filled.wait_for(|filled| *filled).await;
        running.store.clone()
    }

    /// Every object the store holds, then every object the watch touches from now on.
    pub fn subscribe(&self) -> impl Stream<Item = Arc<K>> + Send + 'static {
        let (tx, rx) = unbounded();
        let running = self.running();
        let mut subscribers = running
            .subscribers
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        for object in running.store.state() {
            // The receiver is in hand: sending cannot fail.
            let _ = tx.unbounded_send(object);
        }
        subscribers.push(tx);
        rx
    }

    /// The object `name` in `namespace` (None for a cluster-scoped kind), if the store holds it
    /// once it is filled. Absent may mean "not seen yet": callers look again later.
    pub async fn get(&self, namespace: Option<&str>, name: &str) -> Option<Arc<K>> {
        self.ready().await;
        self.cached(namespace, name)
    }

    /// The object `name` in `namespace` if the store holds it now (filled or not).
    pub fn cached(&self, namespace: Option<&str>, name: &str) -> Option<Arc<K>> {
        self.running().store.get(&object_ref(namespace, name))
    }

    /// The objects of `namespace` (every namespace for None) whose ownerReferences name
    /// `owner_uid` and that `keep` selects, once the store is filled, by namespace and name (as
    /// [`Self::select`] gives them): looked up by owner, not by a walk of the store.
    pub async fn owned_by(
        &self,
        namespace: Option<&str>,
        owner_uid: &str,
        keep: impl Fn(&K) -> bool,
    ) -> Vec<Arc<K>> {
        let store = self.ready().await;
        let owned = self
            .running()
            .owners
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .owned_by(owner_uid);
        owned
            .iter()
            .filter(|(ns, _)| namespace.is_none_or(|wanted| ns == wanted))
            .filter_map(|(ns, name)| {
                store.get(&object_ref(
                    Some(ns).filter(|ns| !ns.is_empty()).map(String::as_str),
                    name,
                ))
            })
            // The index and the store are updated one after the other: the object decides.
            .filter(|object| {
                object
                    .meta()
                    .owner_references
                    .iter()
                    .flatten()
                    .any(|o| o.uid == owner_uid)
                    && keep(object)
            })
            .collect()
    }

    /// The objects of `namespace` (every namespace for None) that `keep` selects, once the
    /// store is filled, by namespace and name as the API server lists them (a store's own order
    /// is arbitrary, and controllers that pick the first of a tie must pick the same one).
    pub async fn select(&self, namespace: Option<&str>, keep: impl Fn(&K) -> bool) -> Vec<Arc<K>> {
        let mut selected = self.ready().await.state_filter(|object| {
            namespace.is_none_or(|ns| object.meta().namespace.as_deref() == Some(ns))
                && keep(object)
        });
        selected.sort_by(|a, b| {
            (&a.meta().namespace, &a.meta().name).cmp(&(&b.meta().namespace, &b.meta().name))
        });
        selected
    }
}

/// The store key of `name` in `namespace` (None for a cluster-scoped kind).
fn object_ref<K>(namespace: Option<&str>, name: &str) -> ObjectRef<K>
where
    K: Resource<DynamicType = ()>,
{
    let key = ObjectRef::new(name);
    match namespace {
        Some(namespace) => key.within(namespace),
        None => key,
    }
}

/// The informers of one cluster, one per kind the controllers look up.
pub struct Informers {
    /// Every Pod: the scheduler, the kubelet and the controllers of pods read it.
    pub pods: Informer<Pod>,
    /// Every Node: the scheduler and the kubelet.
    pub nodes: Informer<Node>,
    /// Every Secret: the kubelet's check of a pod's references.
    pub secrets: Informer<Secret>,
    /// Every ConfigMap: the kubelet's check of a pod's references.
    pub config_maps: Informer<ConfigMap>,
    /// Every ServiceAccount: the kubelet's check of a pod's account.
    pub service_accounts: Informer<ServiceAccount>,
    /// Every ReplicaSet: the Deployment controller.
    pub replica_sets: Informer<ReplicaSet>,
    /// Every Job: the CronJob controller.
    pub jobs: Informer<Job>,
    /// Every EndpointSlice: the EndpointSlice controller's view of what it wrote.
    pub endpoint_slices: Informer<EndpointSlice>,
    /// Every Endpoints object: the EndpointSlice controller's view of what it wrote.
    pub endpoints: Informer<Endpoints>,
}

impl std::fmt::Debug for Informers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Informers").finish_non_exhaustive()
    }
}

impl Informers {
    /// The informers of the cluster `client` talks to, each started on first use.
    pub fn new(client: &Client) -> Self {
        Informers {
            pods: Informer::new(client),
            nodes: Informer::new(client),
            secrets: Informer::new(client),
            config_maps: Informer::new(client),
            service_accounts: Informer::new(client),
            replica_sets: Informer::new(client),
            jobs: Informer::new(client),
            endpoint_slices: Informer::new(client),
            endpoints: Informer::new(client),
        }
    }
}
