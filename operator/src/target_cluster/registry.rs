//! The actor that owns what the operator knows of its resolved target clusters: one client per
//! registered kubeconfig (keyed by the kubeconfig's sha256), the target names that resolved to
//! it, the namespaces known to exist on it, its owner-label watches and their stores, and where watch events wake
//! the owning Cinder. Nothing else holds this state; [`super::TargetClusters`] asks by message.

use super::watches::TargetWatches;
use crate::crd::Cinder;
use crate::kube_ext::reader::ClusterStores;
use actix::prelude::*;
use futures::channel::mpsc::UnboundedSender;
use kube::Client;
use kube::runtime::reflector::ObjectRef;
use std::collections::{BTreeSet, HashMap};

/// One resolved kubeconfig.
struct Resolved {
    client: Client,
    /// The target names that resolved to this kubeconfig.
    names: BTreeSet<String>,
    /// The namespaces known to exist on the target.
    namespaces: BTreeSet<String>,
    /// The watches of the owned kinds (while the controller runs).
    watch: Option<TargetWatches>,
}

impl Resolved {
    /// The stores of the target's watches (empty without watches: reads go live).
    fn stores(&self) -> ClusterStores {
        self.watch
            .as_ref()
            .map(|w| w.stores.clone())
            .unwrap_or_default()
    }
}

/// The resolved target clusters (see the module docs).
#[derive(Default)]
pub(crate) struct TargetRegistry {
    resolved: HashMap<String, Resolved>,
    wake: Option<UnboundedSender<ObjectRef<Cinder>>>,
}

impl Actor for TargetRegistry {
    type Context = Context<Self>;
}

/// The client of kubeconfig `digest` and the stores of its watches, if resolved before; `name`
/// is recorded as resolving to it.
#[derive(Message)]
#[rtype(result = "Option<(Client, ClusterStores)>")]
pub(crate) struct CachedClient {
    pub digest: String,
    pub name: String,
}

/// Where watch events of newly resolved targets go (`None` while no controller runs).
#[derive(Message)]
#[rtype(result = "Option<UnboundedSender<ObjectRef<Cinder>>>")]
pub(crate) struct WakeChannel;

/// Records the client built for kubeconfig `digest` (the one resolved first wins when two race)
/// and returns the recorded client with its watches' stores. `watch` is kept with it while
/// watches run, dropped otherwise.
#[derive(Message)]
#[rtype(result = "(Client, ClusterStores)")]
pub(crate) struct RecordClient {
    pub digest: String,
    pub name: String,
    pub client: Client,
    pub watch: Option<TargetWatches>,
}

/// Target `name` does not resolve: the entries only it resolved to are dropped.
#[derive(Message)]
#[rtype(result = "()")]
pub(crate) struct ForgetTarget(pub String);

/// Whether `namespace` is known to exist on the target of kubeconfig `digest`.
#[derive(Message)]
#[rtype(result = "bool")]
pub(crate) struct NamespaceKnown {
    pub digest: String,
    pub namespace: String,
}

/// `namespace` exists on the target of kubeconfig `digest`.
#[derive(Message)]
#[rtype(result = "()")]
pub(crate) struct NamespaceExists {
    pub digest: String,
    pub namespace: String,
}

/// Every target resolved from here on gets a watcher that wakes the owning Cinder through the
/// sender; targets resolved before are forgotten (resolved again, with one). `None` stops every
/// watcher and forgets the resolved clients.
#[derive(Message)]
#[rtype(result = "()")]
pub(crate) struct WatchInto(pub Option<UnboundedSender<ObjectRef<Cinder>>>);

impl Handler<CachedClient> for TargetRegistry {
    type Result = Option<(Client, ClusterStores)>;

    fn handle(&mut self, msg: CachedClient, _ctx: &mut Self::Context) -> Self::Result {
        let r = self.resolved.get_mut(&msg.digest)?;
        r.names.insert(msg.name);
        Some((r.client.clone(), r.stores()))
    }
}

impl Handler<WakeChannel> for TargetRegistry {
    type Result = Option<UnboundedSender<ObjectRef<Cinder>>>;

    fn handle(&mut self, _msg: WakeChannel, _ctx: &mut Self::Context) -> Self::Result {
        self.wake.clone()
    }
}

impl Handler<RecordClient> for TargetRegistry {
    type Result = MessageResult<RecordClient>;

    fn handle(&mut self, msg: RecordClient, _ctx: &mut Self::Context) -> Self::Result {
        let watch = msg.watch.filter(|_| self.wake.is_some());
        let entry = self.resolved.entry(msg.digest).or_insert(Resolved {
            client: msg.client,
            names: BTreeSet::new(),
            namespaces: BTreeSet::new(),
            watch,
        });
        entry.names.insert(msg.name);
        MessageResult((entry.client.clone(), entry.stores()))
    }
}

impl Handler<ForgetTarget> for TargetRegistry {
    type Result = ();

    fn handle(&mut self, msg: ForgetTarget, _ctx: &mut Self::Context) {
        self.resolved.retain(|_, r| {
            r.names.remove(&msg.0);
            !r.names.is_empty()
        });
    }
}

impl Handler<NamespaceKnown> for TargetRegistry {
    type Result = bool;

    fn handle(&mut self, msg: NamespaceKnown, _ctx: &mut Self::Context) -> bool {
        self.resolved
            .get(&msg.digest)
            .is_some_and(|r| r.namespaces.contains(&msg.namespace))
    }
}

impl Handler<NamespaceExists> for TargetRegistry {
    type Result = ();

    fn handle(&mut self, msg: NamespaceExists, _ctx: &mut Self::Context) {
        if let Some(r) = self.resolved.get_mut(&msg.digest) {
            r.namespaces.insert(msg.namespace);
        }
    }
}

impl Handler<WatchInto> for TargetRegistry {
    type Result = ();

    fn handle(&mut self, msg: WatchInto, _ctx: &mut Self::Context) {
        self.resolved.clear();
        self.wake = msg.0;
    }
}
