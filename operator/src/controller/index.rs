//! The index: the maps that turn a watch event on another kind into the Cinder requests it
//! concerns. The shared watches of Cinders, CinderBackends and CinderBackupBackends feed it
//! every event (see [`crate::kube_ext::shared_watch`]); each event updates only the entries of the object
//! it carries, and the (synchronous) watch mappers read it under a read lock:
//!
//! - `spec.secretRefs.name` of a Cinder: spec.database / spec.serviceUser / spec.messaging secretRef;
//! - `spec.secretRefs.name` of a satellite: spec.rbd.keySecretRef → the parent (spec.cinderRef.name);
//! - `spec.cinderRef.name`: parent → its CinderBackends and CinderBackupBackends;
//! - the store a Cinder selects (spec.secretStoreRef) and the MariaDB it names (spec.database.clusterRef).
//!
//! Every lookup is one hash-map probe. A Secret several legs match yields one request (lookups
//! return sets). A satellite or a Cinder that leaves the cluster (deleted, or missing from a
//! relist) is reported on its departures channel, so what the operator keeps of it goes too.

use crate::crd::{Cinder, CinderBackend, CinderBackupBackend, Satellite, SecretStoreKind};
use kube::ResourceExt;
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher;
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::hash::Hash;
use std::sync::{Arc, PoisonError, RwLock, RwLockReadGuard};

/// `(namespace, name)`.
pub(crate) type Key = (String, String);

/// What one Cinder references.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct CinderRefs {
    /// The credential Secrets (same namespace).
    pub secrets: BTreeSet<String>,
    /// The selected store: kind and name (a SecretStore lives in the Cinder's namespace).
    pub store: (SecretStoreKind, String),
    /// The MariaDB cluster `(namespace, name)`, if managed.
    pub mariadb: Option<Key>,
}

impl CinderRefs {
    /// The references of `cinder`.
    pub(crate) fn of(cinder: &Cinder) -> Self {
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
pub(crate) struct SatelliteRefs {
    pub parent: String,
    pub key_secret: Option<String>,
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

/// One entry that changed: its key, the references it had and the ones it has.
type Change<V> = (Key, Option<V>, Option<V>);

/// The objects one watch contributes. A relist (`Init` .. `InitDone`) upserts what it lists and
/// removes, at `InitDone`, what it did not list.
struct Source<V> {
    live: HashMap<Key, V>,
    relisted: Option<HashSet<Key>>,
    synced: bool,
}

impl<V> Default for Source<V> {
    fn default() -> Self {
        Source {
            live: HashMap::new(),
            relisted: None,
            synced: false,
        }
    }
}

impl<V: Clone + PartialEq> Source<V> {
    fn upsert(&mut self, key: Key, refs: V, changes: &mut Vec<Change<V>>) {
        let old = self.live.insert(key.clone(), refs.clone());
        if old.as_ref() != Some(&refs) {
            changes.push((key, old, Some(refs)));
        }
    }

    fn apply<K: ResourceExt>(
        &mut self,
        event: &watcher::Event<K>,
        refs: impl Fn(&K) -> V,
    ) -> Vec<Change<V>> {
        let mut changes = Vec::new();
        match event {
            watcher::Event::Apply(o) => self.upsert(key_of(o), refs(o), &mut changes),
            watcher::Event::Delete(o) => {
                let key = key_of(o);
                if let Some(old) = self.live.remove(&key) {
                    changes.push((key, Some(old), None));
                }
            }
            watcher::Event::Init => self.relisted = Some(HashSet::new()),
            watcher::Event::InitApply(o) => {
                let key = key_of(o);
                self.relisted
                    .get_or_insert_with(HashSet::new)
                    .insert(key.clone());
                self.upsert(key, refs(o), &mut changes);
            }
            watcher::Event::InitDone => {
                if let Some(seen) = self.relisted.take() {
                    let gone: Vec<Key> = self
                        .live
                        .keys()
                        .filter(|k| !seen.contains(*k))
                        .cloned()
                        .collect();
                    for key in gone {
                        if let Some(old) = self.live.remove(&key) {
                            changes.push((key, Some(old), None));
                        }
                    }
                }
                self.synced = true;
            }
        }
        changes
    }
}

/// A name set per key, with the count of legs that put each name there.
#[derive(Default)]
struct Legs<K: Eq + Hash>(HashMap<K, BTreeMap<String, usize>>);

impl<K: Eq + Hash> Legs<K> {
    fn add(&mut self, key: K, name: &str) {
        *self
            .0
            .entry(key)
            .or_default()
            .entry(name.to_string())
            .or_default() += 1;
    }

    fn remove(&mut self, key: K, name: &str) {
        if let std::collections::hash_map::Entry::Occupied(mut names) = self.0.entry(key) {
            if let Some(n) = names.get_mut().get_mut(name) {
                *n -= 1;
                if *n == 0 {
                    names.get_mut().remove(name);
                }
            }
            if names.get().is_empty() {
                names.remove();
            }
        }
    }

    fn names(&self, key: &K) -> impl Iterator<Item = &String> {
        self.0.get(key).into_iter().flat_map(|m| m.keys())
    }
}

impl Legs<Key> {
    /// References to the objects of kind `R` under `namespace/parent`.
    fn refs<R>(&self, namespace: &str, parent: &str) -> Vec<ObjectRef<R>>
    where
        R: kube::Resource<DynamicType = ()>,
    {
        let at = (namespace.to_string(), parent.to_string());
        self.names(&at)
            .map(|n| ObjectRef::new(n).within(namespace))
            .collect()
    }
}

/// Which satellite kind a change concerns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SatelliteSide {
    Backend,
    BackupBackend,
}

/// A satellite that left the cluster.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Departed {
    pub side: SatelliteSide,
    pub key: Key,
}

/// The index's state: per-object references and the reverse maps, kept in step.
#[derive(Default)]
pub(crate) struct IndexState {
    cinders: Source<CinderRefs>,
    backends: Source<SatelliteRefs>,
    backup_backends: Source<SatelliteRefs>,
    /// `spec.secretRefs.name`: (namespace, secret) → Cinder names, all three legs merged.
    secret_refs: Legs<Key>,
    /// SecretStore (namespace, name) → Cinder names of that namespace.
    secret_stores: Legs<Key>,
    /// ClusterSecretStore name → Cinders `(namespace, name)`.
    cluster_stores: HashMap<String, BTreeSet<Key>>,
    /// MariaDB (namespace, name) → Cinders `(namespace, name)`.
    mariadbs: HashMap<Key, BTreeSet<Key>>,
    /// `spec.cinderRef.name`: (namespace, cinder) → CinderBackend names.
    backends_of: Legs<Key>,
    /// `spec.cinderRef.name`: (namespace, cinder) → CinderBackupBackend names.
    backup_backends_of: Legs<Key>,
    /// (namespace, key Secret) → CinderBackend names.
    backend_keys: Legs<Key>,
    /// (namespace, key Secret) → CinderBackupBackend names.
    backup_backend_keys: Legs<Key>,
}

fn remove_from<K: Eq + Hash>(map: &mut HashMap<K, BTreeSet<Key>>, at: K, key: &Key) {
    if let std::collections::hash_map::Entry::Occupied(mut set) = map.entry(at) {
        set.get_mut().remove(key);
        if set.get().is_empty() {
            set.remove();
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

impl IndexState {
    /// Applies a Cinder watch event; returns the Cinders that left.
    pub(crate) fn apply_cinder(&mut self, event: &watcher::Event<Cinder>) -> Vec<Key> {
        let mut departed = Vec::new();
        for (key, old, new) in self.cinders.apply(event, CinderRefs::of) {
            if let Some(old) = old {
                self.index_cinder(&key, &old, false);
            }
            match new {
                Some(new) => self.index_cinder(&key, &new, true),
                None => departed.push(key),
            }
        }
        departed
    }

    /// Applies a CinderBackend watch event; returns the backends that left.
    pub(crate) fn apply_backend(&mut self, event: &watcher::Event<CinderBackend>) -> Vec<Departed> {
        let changes = self.backends.apply(event, satellite_refs);
        self.apply_satellite(SatelliteSide::Backend, changes)
    }

    /// Applies a CinderBackupBackend watch event; returns the backup backends that left.
    pub(crate) fn apply_backup_backend(
        &mut self,
        event: &watcher::Event<CinderBackupBackend>,
    ) -> Vec<Departed> {
        let changes = self.backup_backends.apply(event, satellite_refs);
        self.apply_satellite(SatelliteSide::BackupBackend, changes)
    }

    fn index_cinder(&mut self, key: &Key, refs: &CinderRefs, add: bool) {
        let (ns, name) = key;
        for s in &refs.secrets {
            let at = (ns.clone(), s.clone());
            if add {
                self.secret_refs.add(at, name);
            } else {
                self.secret_refs.remove(at, name);
            }
        }
        match refs.store.0 {
            SecretStoreKind::SecretStore => {
                let at = (ns.clone(), refs.store.1.clone());
                if add {
                    self.secret_stores.add(at, name);
                } else {
                    self.secret_stores.remove(at, name);
                }
            }
            SecretStoreKind::ClusterSecretStore => {
                let at = refs.store.1.clone();
                if add {
                    self.cluster_stores
                        .entry(at)
                        .or_default()
                        .insert(key.clone());
                } else {
                    remove_from(&mut self.cluster_stores, at, key);
                }
            }
        }
        if let Some(m) = &refs.mariadb {
            if add {
                self.mariadbs
                    .entry(m.clone())
                    .or_default()
                    .insert(key.clone());
            } else {
                remove_from(&mut self.mariadbs, m.clone(), key);
            }
        }
    }

    fn apply_satellite(
        &mut self,
        side: SatelliteSide,
        changes: Vec<Change<SatelliteRefs>>,
    ) -> Vec<Departed> {
        let mut departed = Vec::new();
        for (key, old, new) in changes {
            if let Some(old) = &old {
                self.index_satellite(side, &key, old, false);
            }
            match &new {
                Some(new) => self.index_satellite(side, &key, new, true),
                None => departed.push(Departed { side, key }),
            }
        }
        departed
    }

    fn index_satellite(&mut self, side: SatelliteSide, key: &Key, refs: &SatelliteRefs, add: bool) {
        let (ns, name) = key;
        let (of, keys) = match side {
            SatelliteSide::Backend => (&mut self.backends_of, &mut self.backend_keys),
            SatelliteSide::BackupBackend => {
                (&mut self.backup_backends_of, &mut self.backup_backend_keys)
            }
        };
        let parent = (ns.clone(), refs.parent.clone());
        if add {
            of.add(parent, name);
        } else {
            of.remove(parent, name);
        }
        if let Some(s) = &refs.key_secret {
            let at = (ns.clone(), s.clone());
            if add {
                keys.add(at.clone(), name);
                self.secret_refs.add(at, &refs.parent);
            } else {
                keys.remove(at.clone(), name);
                self.secret_refs.remove(at, &refs.parent);
            }
        }
    }

    /// True once all three sources delivered their first complete list.
    pub(crate) fn synced(&self) -> bool {
        self.cinders.synced && self.backends.synced && self.backup_backends.synced
    }

    /// How many Cinders the index holds.
    #[cfg(test)]
    pub(crate) fn cinder_count(&self) -> usize {
        self.cinders.live.len()
    }

    /// The Cinders a Secret concerns: by reference (Cinder legs) or as a satellite's key.
    pub(crate) fn cinders_for_secret(
        &self,
        namespace: &str,
        secret: &str,
    ) -> Vec<ObjectRef<Cinder>> {
        let at = (namespace.to_string(), secret.to_string());
        requests(namespace, self.secret_refs.names(&at).cloned())
    }

    /// The Cinders selecting a store (`namespace` is `None` for a ClusterSecretStore).
    pub(crate) fn cinders_for_store(
        &self,
        kind: SecretStoreKind,
        namespace: Option<&str>,
        name: &str,
    ) -> Vec<ObjectRef<Cinder>> {
        match (kind, namespace) {
            (SecretStoreKind::ClusterSecretStore, _) => self
                .cluster_stores
                .get(name)
                .into_iter()
                .flatten()
                .map(|(ns, n)| ObjectRef::new(n).within(ns))
                .collect(),
            (SecretStoreKind::SecretStore, Some(ns)) => {
                let at = (ns.to_string(), name.to_string());
                requests(ns, self.secret_stores.names(&at).cloned())
            }
            (SecretStoreKind::SecretStore, None) => Vec::new(),
        }
    }

    /// The Cinders whose spec.database.clusterRef names this MariaDB.
    pub(crate) fn cinders_for_mariadb(
        &self,
        namespace: &str,
        name: &str,
    ) -> Vec<ObjectRef<Cinder>> {
        self.mariadbs
            .get(&(namespace.to_string(), name.to_string()))
            .into_iter()
            .flatten()
            .map(|(ns, n)| ObjectRef::new(n).within(ns))
            .collect()
    }

    /// The satellites of kind `side` whose parent is `namespace/cinder`.
    pub(crate) fn satellites_of<R>(
        &self,
        side: SatelliteSide,
        namespace: &str,
        cinder: &str,
    ) -> Vec<ObjectRef<R>>
    where
        R: kube::Resource<DynamicType = ()>,
    {
        let parents = match side {
            SatelliteSide::Backend => &self.backends_of,
            SatelliteSide::BackupBackend => &self.backup_backends_of,
        };
        parents.refs(namespace, cinder)
    }

    /// The names of the satellites of kind `side` whose key Secret is `namespace/secret`.
    pub(crate) fn satellites_for_secret(
        &self,
        side: SatelliteSide,
        namespace: &str,
        secret: &str,
    ) -> Vec<String> {
        let keys = match side {
            SatelliteSide::Backend => &self.backend_keys,
            SatelliteSide::BackupBackend => &self.backup_backend_keys,
        };
        let at = (namespace.to_string(), secret.to_string());
        keys.names(&at).cloned().collect()
    }
}

/// The receiving ends of the index's departures.
pub(crate) struct Departures {
    /// Satellites that left.
    pub satellites: futures::channel::mpsc::UnboundedReceiver<Departed>,
    /// Cinders that left, `(namespace, name)`.
    pub cinders: futures::channel::mpsc::UnboundedReceiver<Key>,
}

/// What one index update reports as gone.
#[derive(Default)]
struct Gone {
    satellites: Vec<Departed>,
    cinders: Vec<Key>,
}

/// The shared handle the watch mappers, the watches and the readiness check use.
#[derive(Clone)]
pub(crate) struct IndexHandle {
    state: Arc<RwLock<IndexState>>,
    synced: tokio::sync::watch::Sender<bool>,
    departures: futures::channel::mpsc::UnboundedSender<Departed>,
    cinder_departures: futures::channel::mpsc::UnboundedSender<Key>,
}

impl std::fmt::Debug for IndexHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IndexHandle").finish_non_exhaustive()
    }
}

impl IndexHandle {
    /// An empty index and the receiving ends of its departures.
    pub(crate) fn new() -> (IndexHandle, Departures) {
        let (departures, satellites) = futures::channel::mpsc::unbounded();
        let (cinder_departures, cinders) = futures::channel::mpsc::unbounded();
        let handle = IndexHandle {
            state: Arc::default(),
            synced: tokio::sync::watch::Sender::new(false),
            departures,
            cinder_departures,
        };
        (
            handle,
            Departures {
                satellites,
                cinders,
            },
        )
    }

    /// The index for reading (lookups are one hash probe each; hold the guard briefly).
    pub(crate) fn read(&self) -> RwLockReadGuard<'_, IndexState> {
        self.state.read().unwrap_or_else(PoisonError::into_inner)
    }

    fn write(&self, apply: impl FnOnce(&mut IndexState) -> Gone) {
        let (gone, synced) = {
            let mut state = self.state.write().unwrap_or_else(PoisonError::into_inner);
            let gone = apply(&mut state);
            (gone, state.synced())
        };
        // The receivers go only with the operator; nothing is left to forget then.
        for d in gone.satellites {
            let _ = self.departures.unbounded_send(d);
        }
        for c in gone.cinders {
            let _ = self.cinder_departures.unbounded_send(c);
        }
        self.synced.send_if_modified(|s| {
            let changed = *s != synced;
            *s = synced;
            changed
        });
    }

    /// A watch listener applying each event to the index with `apply`.
    fn feeder<K: 'static>(
        &self,
        apply: fn(&mut IndexState, &watcher::Event<K>) -> Gone,
    ) -> impl FnMut(&watcher::Event<K>) + Send + 'static {
        let ix = self.clone();
        move |e| ix.write(|s| apply(s, e))
    }

    /// Feeds the index from the Cinder watch.
    pub(crate) fn on_cinder(&self) -> impl FnMut(&watcher::Event<Cinder>) + Send + 'static {
        self.feeder(|s, e| Gone {
            cinders: s.apply_cinder(e),
            ..Gone::default()
        })
    }

    /// Feeds the index from the CinderBackend watch.
    pub(crate) fn on_backend(&self) -> impl FnMut(&watcher::Event<CinderBackend>) + Send + 'static {
        self.feeder(|s, e| Gone {
            satellites: s.apply_backend(e),
            ..Gone::default()
        })
    }

    /// Feeds the index from the CinderBackupBackend watch.
    pub(crate) fn on_backup_backend(
        &self,
    ) -> impl FnMut(&watcher::Event<CinderBackupBackend>) + Send + 'static {
        self.feeder(|s, e| Gone {
            satellites: s.apply_backup_backend(e),
            ..Gone::default()
        })
    }

    /// Waits until all three sources delivered their first complete list.
    pub(crate) async fn wait_synced(&self) -> bool {
        let mut rx = self.synced.subscribe();
        rx.wait_for(|s| *s).await.is_ok()
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
        s.apply_cinder(&watcher::Event::Apply(cinder(
            "ns", "c1", "shared", "shared", "m",
        )));
        s.apply_backend(&watcher::Event::Apply(rbd_backend(
            "ns", "b1", "c1", "shared",
        )));
        let reqs = s.cinders_for_secret("ns", "shared");
        assert_eq!(reqs, vec![ObjectRef::new("c1").within("ns")]);
        assert!(s.cinders_for_secret("other", "shared").is_empty());
        assert_eq!(
            s.satellites_of::<CinderBackend>(SatelliteSide::Backend, "ns", "c1"),
            vec![ObjectRef::new("b1").within("ns")]
        );
        assert_eq!(s.cinders_for_mariadb("ns", "maria").len(), 1);
        assert_eq!(
            s.cinders_for_store(
                SecretStoreKind::ClusterSecretStore,
                None,
                "openbao-cluster-store"
            )
            .len(),
            1
        );
        assert!(
            s.cinders_for_store(
                SecretStoreKind::SecretStore,
                Some("ns"),
                "openbao-cluster-store"
            )
            .is_empty()
        );
        assert_eq!(
            (
                s.satellites_for_secret(SatelliteSide::Backend, "ns", "shared"),
                s.satellites_for_secret(SatelliteSide::BackupBackend, "ns", "shared"),
            ),
            (vec!["b1".to_string()], vec![])
        );
    }

    #[test]
    fn updates_and_deletes_replace_old_references_and_relists_swap() {
        let mut s = IndexState::default();
        s.apply_cinder(&watcher::Event::Apply(cinder("ns", "c1", "db1", "su", "m")));
        s.apply_cinder(&watcher::Event::Apply(cinder("ns", "c1", "db2", "su", "m")));
        assert!(s.cinders_for_secret("ns", "db1").is_empty());
        assert_eq!(s.cinders_for_secret("ns", "db2").len(), 1);
        s.apply_cinder(&watcher::Event::Delete(cinder(
            "ns", "c1", "db2", "su", "m",
        )));
        assert!(s.cinders_for_secret("ns", "db2").is_empty());
        assert!(s.cinders_for_mariadb("ns", "maria").is_empty());
        assert!(!s.synced());
        s.apply_cinder(&watcher::Event::Apply(cinder("ns", "c3", "x", "y", "z")));
        s.apply_cinder(&watcher::Event::Init);
        s.apply_cinder(&watcher::Event::InitApply(cinder(
            "ns", "c2", "x", "y", "z",
        )));
        s.apply_cinder(&watcher::Event::InitDone);
        assert_eq!(s.cinder_count(), 1);
        assert_eq!(
            s.cinders_for_secret("ns", "x"),
            vec![ObjectRef::new("c2").within("ns")],
            "the relist dropped c3"
        );
        assert!(!s.synced(), "the satellites have not listed yet");
        s.apply_backend(&watcher::Event::InitDone);
        s.apply_backup_backend(&watcher::Event::InitDone);
        assert!(s.synced());
    }

    #[test]
    fn a_departed_cinder_is_reported_by_a_delete_and_by_a_relist() {
        let mut s = IndexState::default();
        let key = |n: &str| ("ns".to_string(), n.to_string());
        assert!(
            s.apply_cinder(&watcher::Event::Apply(cinder("ns", "c1", "d", "s", "m")))
                .is_empty()
        );
        s.apply_cinder(&watcher::Event::Apply(cinder("ns", "c2", "d", "s", "m")));
        let gone = s.apply_cinder(&watcher::Event::Delete(cinder("ns", "c1", "d", "s", "m")));
        assert_eq!(gone, vec![key("c1")]);
        s.apply_cinder(&watcher::Event::Init);
        let gone = s.apply_cinder(&watcher::Event::InitDone);
        assert_eq!(gone, vec![key("c2")], "the relist without c2 departs it");
    }

    #[test]
    fn a_departed_satellite_is_reported_and_its_legs_go() {
        let mut s = IndexState::default();
        s.apply_backend(&watcher::Event::Apply(rbd_backend("ns", "b1", "c1", "k")));
        s.apply_backend(&watcher::Event::Apply(rbd_backend("ns", "b2", "c1", "k")));
        assert_eq!(s.cinders_for_secret("ns", "k").len(), 1);
        let gone = s.apply_backend(&watcher::Event::Delete(rbd_backend("ns", "b1", "c1", "k")));
        assert_eq!(
            gone,
            vec![Departed {
                side: SatelliteSide::Backend,
                key: ("ns".to_string(), "b1".to_string())
            }]
        );
        assert_eq!(
            s.cinders_for_secret("ns", "k").len(),
            1,
            "b2 still names the key"
        );
        s.apply_backend(&watcher::Event::Init);
        let gone = s.apply_backend(&watcher::Event::InitDone);
        assert_eq!(gone.len(), 1, "the relist without b2 departs it");
        assert!(s.cinders_for_secret("ns", "k").is_empty());
        assert!(
            s.satellites_of::<CinderBackend>(SatelliteSide::Backend, "ns", "c1")
                .is_empty()
        );
    }
}
