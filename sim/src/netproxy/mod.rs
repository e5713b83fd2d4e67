//! A userspace service proxy (what kube-proxy does on a node), for clusters whose pods have
//! real addresses: it holds every Service ClusterIP on a host interface of its own
//! ([`HostInterface`]) and listens on each `<clusterIP>:<port>` of a TCP Service port with a
//! ready endpoint, forwarding each connection to one of those endpoints in turn (round robin;
//! an endpoint that refuses is skipped for the next). Host programs reach the ClusterIPs
//! directly, pods through their default gateway (the host). A port with no ready endpoint has
//! no listener, so connections to it are refused.
//!
//! It talks to the cluster only through the Kubernetes API (watches of Services and
//! EndpointSlices over a `kube::Client`), so it runs beside any control plane. One task owns
//! the proxy's state (the interface, the addresses on it, the listeners); after every change it
//! sees it recomputes the pure [`plan::plan`] and applies the difference. Stopping the proxy
//! ends the listeners and their connections and deletes the interface.

pub mod iface;
pub mod plan;

use std::collections::{BTreeMap, BTreeSet};
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::sync::Arc;
use std::time::Duration;

use futures::{Stream, StreamExt};
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::Api;
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use tokio::net::{TcpListener, TcpSocket, TcpStream};
use tokio::sync::watch;
use tokio::task::{AbortHandle, JoinSet};

pub use iface::{HostInterface, NetError};
pub use plan::Plan;

/// How long a connection to one endpoint may take before the next is tried.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
/// How often a frontend whose listener could not be bound is tried again.
const RETRY_BIND: Duration = Duration::from_secs(1);

/// A running service proxy; [`ServiceProxy::shutdown`] stops it (dropping it does too, and
/// deletes the interface on the way).
#[derive(Debug)]
pub struct ServiceProxy {
    interface: String,
    stop: watch::Sender<bool>,
    task: Option<tokio::task::JoinHandle<HostInterface>>,
    applied: watch::Receiver<Plan>,
}

impl ServiceProxy {
    /// Starts proxying the Services of the cluster `client` talks to on `interface`.
    pub fn spawn(client: kube::Client, interface: HostInterface) -> ServiceProxy {
        let (stop, stopped) = watch::channel(false);
        let (applied_tx, applied) = watch::channel(Plan::default());
        let name = interface.name().to_string();
        let task = tokio::spawn(run(client, interface, stopped, applied_tx));
        ServiceProxy {
            interface: name,
            stop,
            task: Some(task),
            applied,
        }
    }

    /// The host interface the ClusterIPs are on.
    pub fn interface_name(&self) -> &str {
        &self.interface
    }

    /// What the proxy serves now: the addresses on its interface and the frontends it
    /// listens on, with their endpoints.
    pub fn serving(&self) -> Plan {
        self.applied.borrow().clone()
    }

    /// Waits until what the proxy serves satisfies `done` (or the proxy ends).
    pub async fn wait_for(&self, done: impl Fn(&Plan) -> bool) {
        let mut applied = self.applied.clone();
        let _ = applied.wait_for(|plan| done(plan)).await;
    }

    /// Stops every listener and connection, then deletes the interface.
    pub async fn shutdown(mut self) -> Result<(), NetError> {
        let _ = self.stop.send(true);
        match self.task.take() {
            Some(task) => match task.await {
                Ok(interface) => interface.delete(),
                // The task panicked or was aborted: its interface was dropped (deleted) with it.
                Err(_) => Ok(()),
            },
            None => Ok(()),
        }
    }
}

impl Drop for ServiceProxy {
    fn drop(&mut self) {
        if let Some(task) = self.task.take() {
            // Aborting drops the task's state: listeners, connections, then the interface.
            task.abort();
        }
    }
}

/// One listening frontend.
struct Frontend {
    backends: watch::Sender<Arc<Vec<SocketAddrV4>>>,
    task: AbortHandle,
}

/// The proxy's state, owned by its one task.
struct Proxy {
    interface: HostInterface,
    addresses: BTreeSet<Ipv4Addr>,
    frontends: BTreeMap<SocketAddrV4, Frontend>,
    listeners: JoinSet<()>,
    /// Frontends of the last plan whose listener could not be bound yet.
    unbound: bool,
}

enum Change {
    Services,
    Slices,
}

async fn run(
    client: kube::Client,
    interface: HostInterface,
    mut stopped: watch::Receiver<bool>,
    applied: watch::Sender<Plan>,
) -> HostInterface {
    let (services, services_writer) = reflector::store::<Service>();
    let (slices, slices_writer) = reflector::store::<EndpointSlice>();
    let service_events = reflector::reflector(
        services_writer,
        watcher(
            Api::<Service>::all(client.clone()),
            watcher::Config::default(),
        ),
    )
    .default_backoff()
    .map(|_| Change::Services);
    let slice_events = reflector::reflector(
        slices_writer,
        watcher(
            Api::<EndpointSlice>::all(client),
            watcher::Config::default(),
        ),
    )
    .default_backoff()
    .map(|_| Change::Slices);
    let mut changes = std::pin::pin!(futures::stream::select(service_events, slice_events));
    let mut proxy = Proxy {
        interface,
        addresses: BTreeSet::new(),
        frontends: BTreeMap::new(),
        listeners: JoinSet::new(),
        unbound: false,
    };
    let mut retry = tokio::time::interval(RETRY_BIND);
    loop {
        tokio::select! {
            _ = stopped.wait_for(|stop| *stop) => break,
            change = changes.next() => {
                if change.is_none() {
                    break;
                }
                drain_ready(&mut changes);
            }
            _ = retry.tick(), if proxy.unbound => {}
            Some(_) = proxy.listeners.join_next(), if !proxy.listeners.is_empty() => continue,
        }
        let wanted = plan_of(&services, &slices);
        proxy.apply(&wanted).await;
        let serving = Plan {
            addresses: proxy.addresses.clone(),
            frontends: wanted
                .frontends
                .into_iter()
                .filter(|(front, _)| proxy.frontends.contains_key(front))
                .collect(),
        };
        applied.send_if_modified(|current| {
            let changed = *current != serving;
            *current = serving;
            changed
        });
    }
    proxy.listeners.shutdown().await;
    proxy.interface
}

/// Takes every change already waiting, so a burst is planned once.
fn drain_ready(changes: &mut (impl Stream<Item = Change> + Unpin)) {
    use futures::FutureExt;
    while let Some(Some(_)) = changes.next().now_or_never() {}
}

fn plan_of(services: &Store<Service>, slices: &Store<EndpointSlice>) -> Plan {
    let services = services.state();
    let slices = slices.state();
    let slice_refs: Vec<&EndpointSlice> = slices.iter().map(AsRef::as_ref).collect();
    plan::plan(services.iter().map(AsRef::as_ref), &slice_refs)
}

impl Proxy {
    /// Brings addresses and listeners to `wanted`.
    async fn apply(&mut self, wanted: &Plan) {
        let gone: Vec<SocketAddrV4> = self
            .frontends
            .keys()
            .filter(|front| !wanted.frontends.contains_key(front))
            .copied()
            .collect();
        for front in gone {
            if let Some(frontend) = self.frontends.remove(&front) {
                frontend.task.abort();
            }
        }
        for address in self.addresses.clone().difference(&wanted.addresses) {
            if let Err(error) = self.interface.remove_address(*address).await {
                tracing::warn!(%error, %address, "service proxy address not removed");
            }
            self.addresses.remove(address);
        }
        for address in wanted.addresses.difference(&self.addresses.clone()) {
            match self.interface.add_address(*address).await {
                Ok(()) => {
                    self.addresses.insert(*address);
                }
                Err(error) => tracing::warn!(%error, %address, "service proxy address not added"),
            }
        }
        self.unbound = false;
        for (front, backends) in &wanted.frontends {
            if let Some(frontend) = self.frontends.get(front) {
                frontend.backends.send_if_modified(|current| {
                    let changed = current.as_slice() != backends.as_slice();
                    if changed {
                        *current = Arc::new(backends.clone());
                    }
                    changed
                });
                continue;
            }
            match bind(*front) {
                Ok(listener) => {
                    let (tx, rx) = watch::channel(Arc::new(backends.clone()));
                    let task = self.listeners.spawn(serve(listener, rx));
                    self.frontends
                        .insert(*front, Frontend { backends: tx, task });
                }
                Err(error) => {
                    self.unbound = true;
                    tracing::warn!(%error, frontend = %front, "service proxy cannot listen; retrying");
                }
            }
        }
    }
}

fn bind(front: SocketAddrV4) -> std::io::Result<TcpListener> {
    let socket = TcpSocket::new_v4()?;
    socket.set_reuseaddr(true)?;
    socket.bind(SocketAddr::V4(front))?;
    socket.listen(1024)
}

/// Accepts connections on one frontend and forwards each to the next endpoint.
async fn serve(listener: TcpListener, backends: watch::Receiver<Arc<Vec<SocketAddrV4>>>) {
    let mut next: usize = 0;
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((inbound, _)) => {
                    let list = Arc::clone(&backends.borrow());
                    connections.spawn(forward(inbound, list, next));
                    next = next.wrapping_add(1);
                }
                Err(error) => {
                    tracing::debug!(%error, "service proxy accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            },
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
}

/// Copies between `inbound` and the first endpoint from `start` (round robin) that accepts;
/// resets `inbound` when none does.
async fn forward(mut inbound: TcpStream, backends: Arc<Vec<SocketAddrV4>>, start: usize) {
    let count = backends.len();
    for offset in 0..count {
        let backend = backends[(start + offset) % count];
        match tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(backend)).await {
            Ok(Ok(mut outbound)) => {
                let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                return;
            }
            Ok(Err(error)) => tracing::debug!(%error, %backend, "service endpoint refused"),
            Err(_) => tracing::debug!(%backend, "service endpoint timed out"),
        }
    }
    // As kube-proxy rejects: the client sees a reset, not a silent close.
    let _ = inbound.set_zero_linger();
}
