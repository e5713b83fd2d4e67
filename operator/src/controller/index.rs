//! The index actor: one task owns the maps that turn a watch event on another kind into the
//! Cinder requests it concerns. It is fed from reflector
//! streams of Cinders, CinderBackends and CinderBackupBackends and publishes an immutable
//! snapshot after every change, which the (synchronous) watch mappers read:
//!
//! - `spec.secretRefs.name` of a Cinder: spec.database / spec.serviceUser / spec.messaging secretRef;
//! - `spec.secretRefs.name` of a satellite: spec.rbd.keySecretRef → the parent (spec.cinderRef.name);
//! - `spec.cinderRef.name`: parent → its CinderBackends and CinderBackupBackends;
//! - the store a Cinder selects (spec.secretStoreRef) and the MariaDB it names (spec.database.clusterRef).
//!
//! A Secret several legs match yields one request (lookups return sets).

use crate::crd::{Cinder, CinderBackend, CinderBackupBackend, Satellite, SecretStoreKind};
use futures::{Stream, StreamExt};
use kube::runtime::reflector::ObjectRef;
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client, ResourceExt};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// `(namespace, name)`.
pub type Key = (String, String);

/// What one Cinder references.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CinderRefs {
    /// The credential Secrets (same namespace).
    pub secrets: BTreeSet<String>,
    /// The selected store: kind and name (a SecretStore lives in the Cinder's namespace).
    pub store: (SecretStoreKind, String),
    /// The MariaDB cluster `(namespace, name)`, if managed.
    pub mariadb: Option<Key>,
}

impl CinderRefs {
    /// The references of `cinder`.
    pub fn of(cinder: &Cinder) -> Self {
        let spec = &cinder.spec;
        let ns = cinder.namespace().unwrap_or_default();
        let mut secrets = BTreeSet::new();
        secrets.insert(spec.database.secret_ref.name.clone());
        secrets.insert(spec.service_user.secret_ref.name.clone());
        if let Some(r) = &spec.messaging.secret_ref {
            secrets.insert(r.name.clone());
        }
        if let Some(c) = &spec.messaging.cluster_ref
            && c.namespace.as_deref().unwrap_or(&ns) == ns
        {
            // The RabbitmqCluster's `{name}-default-user` Secret supplies the connection.
            secrets.insert(format!("{}-default-user", c.name));
        }
        CinderRefs {
            secrets,
            store: (
                spec.secret_store_ref.kind,
                spec.secret_store_ref.name.clone(),
            ),
            mariadb: spec.database.cluster_ref.as_ref().map(|c| {
                (
                    c.namespace.clone().unwrap_or_else(|| ns.clone()),
                    c.name.clone(),
                )
            }),
        }
    }
}

/// What one satellite references: its parent Cinder and its key Secret (RBD).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SatelliteRefs {
    pub parent: String,
    pub key_secret: Option<String>,
}

/// The published state of the index: per-object references and the reverse maps.
#[derive(Clone, Debug, Default)]
pub struct IndexSnapshot {
    pub cinders: BTreeMap<Key, CinderRefs>,
    pub backends: BTreeMap<Key, SatelliteRefs>,
    pub backup_backends: BTreeMap<Key, SatelliteRefs>,
    /// `spec.secretRefs.name`: (namespace, secret) → Cinder names, all three legs merged.
    secret_refs: BTreeMap<Key, BTreeSet<String>>,
    /// `spec.cinderRef.name`: (namespace, cinder) → CinderBackend names.
    backends_of: BTreeMap<Key, BTreeSet<String>>,
    /// `spec.cinderRef.name`: (namespace, cinder) → CinderBackupBackend names.
    backup_backends_of: BTreeMap<Key, BTreeSet<String>>,
    /// True once all three sources delivered their first complete list.
    pub synced: bool,
}

impl IndexSnapshot {
    fn rebuild(&mut self) {
        self.secret_refs.clear();
        self.backends_of.clear();
        self.backup_backends_of.clear();
        for ((ns, name), refs) in &self.cinders {
            for s in &refs.secrets {
                self.secret_refs
                    .entry((ns.clone(), s.clone()))
                    .or_default()
                    .insert(name.clone());
            }
        }
        for (sats, of) in [
            (&self.backends, &mut self.backends_of),
            (&self.backup_backends, &mut self.backup_backends_of),
        ] {
            for ((ns, name), refs) in sats {
                of.entry((ns.clone(), refs.parent.clone()))
                    .or_default()
                    .insert(name.clone());
                if let Some(s) = &refs.key_secret {
                    self.secret_refs
                        .entry((ns.clone(), s.clone()))
                        .or_default()
                        .insert(refs.parent.clone());
                }
            }
        }
    }

    fn requests(ns: &str, names: impl IntoIterator<Item = String>) -> Vec<ObjectRef<Cinder>> {
        names
            .into_iter()
            .collect::<BTreeSet<_>>()
            .into_iter()
            .map(|n| ObjectRef::new(&n).within(ns))
            .collect()
    }

    /// The Cinders a Secret concerns: by reference (Cinder legs) or as a satellite's key.
    pub fn cinders_for_secret(&self, namespace: &str, secret: &str) -> Vec<ObjectRef<Cinder>> {
        let names = self
            .secret_refs
            .get(&(namespace.to_string(), secret.to_string()))
            .cloned()
            .unwrap_or_default();
        Self::requests(namespace, names)
    }

    /// The Cinders selecting a store (`namespace` is `None` for a ClusterSecretStore).
    pub fn cinders_for_store(
        &self,
        kind: SecretStoreKind,
        namespace: Option<&str>,
        name: &str,
    ) -> Vec<ObjectRef<Cinder>> {
        let mut out: BTreeSet<Key> = BTreeSet::new();
        for ((ns, cinder), refs) in &self.cinders {
            let same_ns = match (kind, namespace) {
                (SecretStoreKind::ClusterSecretStore, _) => true,
                (SecretStoreKind::SecretStore, Some(n)) => n == ns,
                (SecretStoreKind::SecretStore, None) => false,
            };
            if same_ns && refs.store.0 == kind && refs.store.1 == name {
                out.insert((ns.clone(), cinder.clone()));
            }
        }
        out.into_iter()
            .map(|(ns, n)| ObjectRef::new(&n).within(&ns))
            .collect()
    }

    /// The Cinders whose spec.database.clusterRef names this MariaDB.
    pub fn cinders_for_mariadb(&self, namespace: &str, name: &str) -> Vec<ObjectRef<Cinder>> {
        let want = Some((namespace.to_string(), name.to_string()));
        self.cinders
            .iter()
            .filter(|(_, refs)| refs.mariadb == want)
            .map(|((ns, n), _)| ObjectRef::new(n).within(ns))
            .collect()
    }

    /// The CinderBackends whose parent is `namespace/cinder`.
    pub fn backends_of(&self, namespace: &str, cinder: &str) -> Vec<ObjectRef<CinderBackend>> {
        self.backends_of
            .get(&(namespace.to_string(), cinder.to_string()))
            .into_iter()
            .flatten()
            .map(|n| ObjectRef::new(n).within(namespace))
            .collect()
    }

    /// The CinderBackupBackends whose parent is `namespace/cinder`.
    pub fn backup_backends_of(
        &self,
        namespace: &str,
        cinder: &str,
    ) -> Vec<ObjectRef<CinderBackupBackend>> {
        self.backup_backends_of
            .get(&(namespace.to_string(), cinder.to_string()))
            .into_iter()
            .flatten()
            .map(|n| ObjectRef::new(n).within(namespace))
            .collect()
    }

    /// The satellites (either kind) whose key Secret is `namespace/secret`.
    pub fn satellites_for_secret(
        &self,
        namespace: &str,
        secret: &str,
    ) -> (Vec<String>, Vec<String>) {
        let pick = |m: &BTreeMap<Key, SatelliteRefs>| {
            m.iter()
                .filter(|((ns, _), r)| ns == namespace && r.key_secret.as_deref() == Some(secret))
                .map(|((_, n), _)| n.clone())
                .collect()
        };
        (pick(&self.backends), pick(&self.backup_backends))
    }
}

/// One change the actor applies.
#[derive(Debug)]
pub enum IndexEvent {
    Cinder(Box<watcher::Event<Cinder>>),
    Backend(Box<watcher::Event<CinderBackend>>),
    BackupBackend(Box<watcher::Event<CinderBackupBackend>>),
    /// A source's stream failed (it retries with backoff); nothing changes.
    SourceError(String),
}

fn key_of<K: ResourceExt>(o: &K) -> Key {
    (o.namespace().unwrap_or_default(), o.name_any())
}

/// What the index keeps of a satellite of either kind: its parent and its RBD key Secret.
fn satellite_refs<K: Satellite>(b: &K) -> SatelliteRefs {
    let spec = b.satellite();
    SatelliteRefs {
        parent: spec.cinder_ref.name.clone(),
        key_secret: spec.rbd.as_ref().map(|r| r.key_secret_ref.name.clone()),
    }
}

/// The state one source contributes while it relists: `Init` opens a buffer, `InitDone` swaps.
struct Source<V> {
    live: BTreeMap<Key, V>,
    buffer: Option<BTreeMap<Key, V>>,
    synced: bool,
}

impl<V> Default for Source<V> {
    fn default() -> Self {
        Source {
            live: BTreeMap::new(),
            buffer: None,
            synced: false,
        }
    }
}

impl<V: Clone> Source<V> {
    fn apply<K: ResourceExt>(&mut self, event: watcher::Event<K>, refs: impl Fn(&K) -> V) {
        match event {
            watcher::Event::Apply(o) => {
                self.live.insert(key_of(&o), refs(&o));
            }
            watcher::Event::Delete(o) => {
                self.live.remove(&key_of(&o));
            }
            watcher::Event::Init => self.buffer = Some(BTreeMap::new()),
            watcher::Event::InitApply(o) => {
                self.buffer
                    .get_or_insert_with(BTreeMap::new)
                    .insert(key_of(&o), refs(&o));
            }
            watcher::Event::InitDone => {
                if let Some(b) = self.buffer.take() {
                    self.live = b;
                }
                self.synced = true;
            }
        }
    }
}

/// The actor's state.
#[derive(Default)]
pub struct IndexState {
    cinders: Source<CinderRefs>,
    backends: Source<SatelliteRefs>,
    backup_backends: Source<SatelliteRefs>,
}

impl IndexState {
    /// Applies one event and returns the snapshot to publish.
    pub fn apply(&mut self, event: IndexEvent) -> Option<IndexSnapshot> {
        match event {
            IndexEvent::Cinder(e) => self.cinders.apply(*e, CinderRefs::of),
            IndexEvent::Backend(e) => self.backends.apply(*e, satellite_refs),
            IndexEvent::BackupBackend(e) => self.backup_backends.apply(*e, satellite_refs),
            IndexEvent::SourceError(_) => return None,
        }
        let mut snap = IndexSnapshot {
            cinders: self.cinders.live.clone(),
            backends: self.backends.live.clone(),
            backup_backends: self.backup_backends.live.clone(),
            synced: self.cinders.synced && self.backends.synced && self.backup_backends.synced,
            ..Default::default()
        };
        snap.rebuild();
        Some(snap)
    }
}

/// The cheap handle the watch mappers and the steps read the index through.
#[derive(Clone, Debug)]
pub struct IndexHandle {
    rx: tokio::sync::watch::Receiver<Arc<IndexSnapshot>>,
}

impl IndexHandle {
    /// The latest published snapshot.
    pub fn snapshot(&self) -> Arc<IndexSnapshot> {
        self.rx.borrow().clone()
    }

    /// A receiver that sees every published snapshot (for followers of the index).
    pub fn subscribe(&self) -> tokio::sync::watch::Receiver<Arc<IndexSnapshot>> {
        self.rx.clone()
    }

    /// Waits until all three sources delivered their first complete list (or the actor stopped).
    pub async fn wait_synced(&self) -> bool {
        let mut rx = self.rx.clone();
        rx.wait_for(|s| s.synced).await.is_ok()
    }

    /// Starts the actor over three reflector streams (scoped to `namespace` when given); it stops
    /// when `shutdown` turns true.
    pub fn spawn(
        client: Client,
        namespace: Option<&str>,
        shutdown: tokio::sync::watch::Receiver<bool>,
    ) -> (IndexHandle, tokio::task::JoinHandle<()>) {
        fn api<K>(client: &Client, ns: Option<&str>) -> Api<K>
        where
            K: kube::Resource<Scope = kube::core::NamespaceResourceScope>,
            K::DynamicType: Default,
        {
            match ns {
                Some(ns) => Api::namespaced(client.clone(), ns),
                None => Api::all(client.clone()),
            }
        }
        fn feed<K>(
            api: Api<K>,
            wrap: fn(Box<watcher::Event<K>>) -> IndexEvent,
        ) -> impl Stream<Item = IndexEvent>
        where
            K: kube::Resource
                + Clone
                + std::fmt::Debug
                + serde::de::DeserializeOwned
                + Send
                + 'static,
            K::DynamicType: Default,
        {
            watcher(api, watcher::Config::default())
                .default_backoff()
                .map(move |r| match r {
                    Ok(e) => wrap(Box::new(e)),
                    Err(e) => IndexEvent::SourceError(e.to_string()),
                })
        }
        let events = futures::stream::select_all([
            feed(api::<Cinder>(&client, namespace), IndexEvent::Cinder).boxed(),
            feed(
                api::<CinderBackend>(&client, namespace),
                IndexEvent::Backend,
            )
            .boxed(),
            feed(
                api::<CinderBackupBackend>(&client, namespace),
                IndexEvent::BackupBackend,
            )
            .boxed(),
        ]);
        let (tx, rx) = tokio::sync::watch::channel(Arc::new(IndexSnapshot::default()));
        let task = tokio::spawn(run_actor(events, tx, shutdown));
        (IndexHandle { rx }, task)
    }
}

async fn run_actor(
    mut events: impl Stream<Item = IndexEvent> + Unpin,
    tx: tokio::sync::watch::Sender<Arc<IndexSnapshot>>,
    mut shutdown: tokio::sync::watch::Receiver<bool>,
) {
    let mut state = IndexState::default();
    loop {
        tokio::select! {
            _ = shutdown.wait_for(|s| *s) => break,
            next = events.next() => match next {
                None => break,
                Some(IndexEvent::SourceError(e)) => {
                    tracing::warn!(error = %e, "index source watch failed; retrying with backoff");
                }
                Some(event) => {
                    tracing::trace!(?event, "index event");
                    if let Some(snap) = state.apply(event) {
                        tx.send_replace(Arc::new(snap));
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crd::{CinderBackendSpec, CinderSpec};

    fn cinder(ns: &str, name: &str, db: &str, su: &str, msg: &str) -> Cinder {
        let spec: CinderSpec = serde_json::from_value(serde_json::json!({
            "openStackRelease": "2026.1",
            "image": {"repository": "r", "tag": "2026.1"},
            "database": {"clusterRef": {"name": "maria"}, "secretRef": {"name": db}},
            "messaging": {"secretRef": {"name": msg}},
            "serviceUser": {"secretRef": {"name": su}},
            "keystoneEndpoint": "http://keystone:5000"
        }))
        .unwrap();
        let mut c = Cinder::new(name, spec);
        c.metadata.namespace = Some(ns.to_string());
        c
    }

    fn rbd_backend(ns: &str, name: &str, parent: &str, key: &str) -> CinderBackend {
        let spec: CinderBackendSpec = serde_json::from_value(serde_json::json!({
            "cinderRef": {"name": parent}, "type": "RBD",
            "rbd": {"pool": "p", "user": "u", "monitors": ["m"], "keySecretRef": {"name": key}}
        }))
        .unwrap();
        let mut b = CinderBackend::new(name, spec);
        b.metadata.namespace = Some(ns.to_string());
        b
    }

    #[test]
    fn a_secret_several_legs_match_yields_one_request() {
        let mut s = IndexState::default();
        s.apply(IndexEvent::Cinder(Box::new(watcher::Event::Apply(cinder(
            "ns", "c1", "shared", "shared", "m",
        )))));
        let snap = s
            .apply(IndexEvent::Backend(Box::new(watcher::Event::Apply(
                rbd_backend("ns", "b1", "c1", "shared"),
            ))))
            .unwrap();
        let reqs = snap.cinders_for_secret("ns", "shared");
        assert_eq!(reqs, vec![ObjectRef::new("c1").within("ns")]);
        assert!(snap.cinders_for_secret("other", "shared").is_empty());
        assert_eq!(
            snap.backends_of("ns", "c1"),
            vec![ObjectRef::new("b1").within("ns")]
        );
        assert_eq!(snap.cinders_for_mariadb("ns", "maria").len(), 1);
        assert_eq!(
            snap.cinders_for_store(
                SecretStoreKind::ClusterSecretStore,
                None,
                "openbao-cluster-store"
            )
            .len(),
            1
        );
        assert!(
            snap.cinders_for_store(
                SecretStoreKind::SecretStore,
                Some("ns"),
                "openbao-cluster-store"
            )
            .is_empty()
        );
    }

    #[test]
    fn updates_and_deletes_replace_old_references_and_relists_swap() {
        let mut s = IndexState::default();
        s.apply(IndexEvent::Cinder(Box::new(watcher::Event::Apply(cinder(
            "ns", "c1", "db1", "su", "m",
        )))));
        let snap = s
            .apply(IndexEvent::Cinder(Box::new(watcher::Event::Apply(cinder(
                "ns", "c1", "db2", "su", "m",
            )))))
            .unwrap();
        assert!(snap.cinders_for_secret("ns", "db1").is_empty());
        assert_eq!(snap.cinders_for_secret("ns", "db2").len(), 1);
        let snap = s
            .apply(IndexEvent::Cinder(Box::new(watcher::Event::Delete(
                cinder("ns", "c1", "db2", "su", "m"),
            ))))
            .unwrap();
        assert!(snap.cinders_for_secret("ns", "db2").is_empty());
        assert!(!snap.synced);
        s.apply(IndexEvent::Cinder(Box::new(watcher::Event::Init)));
        s.apply(IndexEvent::Cinder(Box::new(watcher::Event::InitApply(
            cinder("ns", "c2", "x", "y", "z"),
        ))));
        let snap = s
            .apply(IndexEvent::Cinder(Box::new(watcher::Event::InitDone)))
            .unwrap();
        assert_eq!(snap.cinders.len(), 1);
        assert!(!snap.synced, "the satellites have not listed yet");
        s.apply(IndexEvent::Backend(Box::new(watcher::Event::InitDone)));
        let snap = s
            .apply(IndexEvent::BackupBackend(Box::new(
                watcher::Event::InitDone,
            )))
            .unwrap();
        assert!(snap.synced);
    }
}
