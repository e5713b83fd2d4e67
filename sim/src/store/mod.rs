//! The in-memory object store: objects as JSON keyed by (group, resource, namespace, name), one
//! global monotonically increasing resourceVersion, a bounded history of watch events (the window
//! a watch can resume from) and a broadcast of live events per resource to its open watches
//! (each with the encodings the watches share; a watch that falls [`WATCH_LAG_LIMIT`] events
//! of its resource behind is closed, so a slow client holds back only its own resource's
//! events, and only that many). Reads walk only the key range of the resource asked for and
//! clone only the objects they return; an object version is held once, shared by the map and
//! the events of the history.

pub mod encodings;
pub mod selectors;

pub use encodings::Encodings;

use serde_json::Value;
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::ops::Bound;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use tokio::sync::broadcast;

/// How many live events of its resource a watch may fall behind before it is closed (its
/// client resumes from the last resourceVersion it saw), as a real API server closes a watcher
/// whose buffer stays full instead of holding the whole cluster's changes for it.
pub const WATCH_LAG_LIMIT: usize = 4096;

/// How many live events a receiver of every change (the garbage collector) may fall behind.
const ALL_EVENTS_LAG_LIMIT: usize = 65_536;

/// Where an object lives. `namespace` is empty for cluster-scoped objects.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ObjKey {
    pub group: String,
    pub resource: String,
    pub namespace: String,
    pub name: String,
}

impl ObjKey {
    pub fn new(group: &str, resource: &str, namespace: &str, name: &str) -> ObjKey {
        ObjKey {
            group: group.to_string(),
            resource: resource.to_string(),
            namespace: namespace.to_string(),
            name: name.to_string(),
        }
    }
}

/// The type of a watch event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventType {
    Added,
    Modified,
    Deleted,
}

impl EventType {
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Added => "ADDED",
            EventType::Modified => "MODIFIED",
            EventType::Deleted => "DELETED",
        }
    }
}

/// One change of one object, at resourceVersion `rv`.
#[derive(Debug)]
pub struct StoreEvent {
    pub rv: u64,
    pub key: ObjKey,
    pub kind: EventType,
    pub object: Arc<Value>,
    /// The object before a MODIFIED change (to tell selector watches it stopped matching).
    pub old: Option<Arc<Value>>,
}

/// An event as the open watches receive it: with the encodings they share (freed once every
/// receiver has it; the history keeps the event only).
#[derive(Debug)]
pub struct LiveEvent {
    pub event: Arc<StoreEvent>,
    pub encodings: Encodings,
}

struct Inner {
    rv: u64,
    objects: BTreeMap<ObjKey, Arc<Value>>,
    /// The resourceVersion of the last change in each API group.
    group_changed: HashMap<String, u64>,
    history: VecDeque<Arc<StoreEvent>>,
    /// Every event with rv > floor is in `history`.
    floor: u64,
    capacity: usize,
    /// The live events of each resource, by group and resource, for its watches.
    channels: HashMap<String, HashMap<String, broadcast::Sender<Arc<LiveEvent>>>>,
}

/// The object store (cheap to clone; all clones share the state).
#[derive(Clone)]
pub struct Store {
    inner: Arc<Mutex<Inner>>,
    /// Every live event, for receivers of all changes.
    tx: broadcast::Sender<Arc<LiveEvent>>,
    id: u64,
}

/// Tells stores apart (for state kept about one store, such as a cached RBAC policy).
static NEXT_STORE_ID: AtomicU64 = AtomicU64::new(1);

/// The objects of `group/resource` (in `namespace`, or in all namespaces), by reference, in key
/// order: the keys of one resource are one range of the map (keys sort by group, resource,
/// namespace, name).
fn resource_range<'a>(
    objects: &'a BTreeMap<ObjKey, Arc<Value>>,
    group: &'a str,
    resource: &'a str,
    namespace: Option<&'a str>,
) -> impl Iterator<Item = (&'a ObjKey, &'a Arc<Value>)> + 'a {
    let start = ObjKey::new(group, resource, namespace.unwrap_or(""), "");
    objects
        .range((Bound::Included(start), Bound::Unbounded))
        .take_while(move |(k, _)| {
            k.group == group
                && k.resource == resource
                && namespace.is_none_or(|ns| k.namespace == ns)
        })
}

/// One page of the objects a list selects.
#[derive(Debug)]
pub struct Selection {
    /// The selected objects from the offset on, at most the limit.
    pub items: Vec<Value>,
    /// Every selected object, the page included.
    pub total: usize,
    /// The resourceVersion the selection is consistent with.
    pub rv: u64,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("resource_version", &self.resource_version())
            .finish()
    }
}

/// Why a watch cannot start from the resourceVersion asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TooOld {
    pub oldest: u64,
}

/// What a watch starts with: the events it missed (or the current objects) and a live receiver.
pub struct Subscription {
    pub backlog: Vec<Arc<StoreEvent>>,
    pub receiver: broadcast::Receiver<Arc<LiveEvent>>,
    pub rv: u64,
}

impl Store {
    /// An empty store whose watch history keeps `capacity` events.
    pub fn new(capacity: usize) -> Store {
        let (tx, _) = broadcast::channel(ALL_EVENTS_LAG_LIMIT);
        Store {
            inner: Arc::new(Mutex::new(Inner {
                rv: 1,
                objects: BTreeMap::new(),
                group_changed: HashMap::new(),
                history: VecDeque::new(),
                floor: 1,
                capacity: capacity.max(16),
                channels: HashMap::new(),
            })),
            tx,
            id: NEXT_STORE_ID.fetch_add(1, Ordering::Relaxed),
        }
    }

    /// What tells this store (and its clones) from every other store of the process.
    pub fn id(&self) -> u64 {
        self.id
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The current (latest) resourceVersion.
    pub fn resource_version(&self) -> u64 {
        self.lock().rv
    }

    /// One object (as stored, with `apiVersion` of its storage version).
    pub fn get(&self, group: &str, resource: &str, namespace: &str, name: &str) -> Option<Value> {
        self.lock()
            .objects
            .get(&ObjKey::new(group, resource, namespace, name))
            .map(|v| Value::clone(v))
    }

    /// Objects of a resource, in one namespace (`Some`) or all (`None`), sorted by namespace/name.
    pub fn list(&self, group: &str, resource: &str, namespace: Option<&str>) -> Vec<Value> {
        self.list_with_rv(group, resource, namespace).0
    }

    /// Like `list`, with the resourceVersion the list is consistent with.
    pub fn list_with_rv(
        &self,
        group: &str,
        resource: &str,
        namespace: Option<&str>,
    ) -> (Vec<Value>, u64) {
        let inner = self.lock();
        let items = resource_range(&inner.objects, group, resource, namespace)
            .map(|(_, v)| Value::clone(v))
            .collect();
        (items, inner.rv)
    }

    /// The objects of a resource that `selects`, from the `offset`-th of them on and at most
    /// `limit` of them, with how many it selects in all: only the returned objects are cloned.
    pub fn select(
        &self,
        group: &str,
        resource: &str,
        namespace: Option<&str>,
        selects: impl Fn(&Value) -> bool,
        offset: usize,
        limit: Option<usize>,
    ) -> Selection {
        let inner = self.lock();
        let mut items = Vec::new();
        let mut total = 0;
        for (_, v) in resource_range(&inner.objects, group, resource, namespace) {
            if !selects(v.as_ref()) {
                continue;
            }
            if total >= offset && limit.is_none_or(|l| items.len() < l) {
                items.push(Value::clone(v));
            }
            total += 1;
        }
        Selection {
            items,
            total,
            rv: inner.rv,
        }
    }

    /// Whether any object of a resource (in `namespace`, or in all namespaces) satisfies `test`,
    /// looked at by reference: nothing is cloned, and the walk stops at the first that does.
    pub fn any(
        &self,
        group: &str,
        resource: &str,
        namespace: Option<&str>,
        test: impl Fn(&Value) -> bool,
    ) -> bool {
        let inner = self.lock();
        resource_range(&inner.objects, group, resource, namespace).any(|(_, v)| test(v))
    }

    /// The resourceVersion of the last change of any object of API `group` (0: none since the
    /// store started), so state derived from one group's objects can tell it is current.
    pub fn group_changed_at(&self, group: &str) -> u64 {
        self.lock().group_changed.get(group).copied().unwrap_or(0)
    }

    /// Number of stored objects.
    pub fn len(&self) -> usize {
        self.lock().objects.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// A receiver of every future event of every resource.
    pub fn receiver(&self) -> broadcast::Receiver<Arc<LiveEvent>> {
        self.tx.subscribe()
    }

    /// Runs `f` atomically against the store.
    pub fn transact<R>(&self, f: impl FnOnce(&mut Txn<'_>) -> R) -> R {
        let mut inner = self.lock();
        let mut txn = Txn {
            inner: &mut inner,
            tx: &self.tx,
        };
        f(&mut txn)
    }

    /// Starts a watch of `group/resource` from `since`: `None` means "now, starting with
    /// synthetic ADDED events for the current objects"; `Some(rv)` replays every event after rv.
    pub fn subscribe(
        &self,
        group: &str,
        resource: &str,
        since: Option<u64>,
    ) -> Result<Subscription, TooOld> {
        let mut inner = self.lock();
        let receiver = inner
            .channels
            .entry(group.to_string())
            .or_default()
            .entry(resource.to_string())
            .or_insert_with(|| broadcast::channel(WATCH_LAG_LIMIT).0)
            .subscribe();
        let backlog = match since {
            None => resource_range(&inner.objects, group, resource, None)
                .map(|(k, v)| {
                    Arc::new(StoreEvent {
                        rv: inner.rv,
                        key: k.clone(),
                        kind: EventType::Added,
                        object: v.clone(),
                        old: None,
                    })
                })
                .collect(),
            Some(rv) if rv < inner.floor => {
                return Err(TooOld {
                    oldest: inner.floor,
                });
            }
            Some(rv) => inner
                .history
                .iter()
                .filter(|e| e.rv > rv && e.key.group == group && e.key.resource == resource)
                .cloned()
                .collect(),
        };
        Ok(Subscription {
            backlog,
            receiver,
            rv: inner.rv,
        })
    }
}

/// An atomic change set against the store (holds the store's lock).
pub struct Txn<'a> {
    inner: &'a mut Inner,
    tx: &'a broadcast::Sender<Arc<LiveEvent>>,
}

impl Txn<'_> {
    pub fn get(&self, key: &ObjKey) -> Option<&Value> {
        self.inner.objects.get(key).map(|v| &**v)
    }

    pub fn rv(&self) -> u64 {
        self.inner.rv
    }

    /// Keys and objects of one resource, optionally in one namespace, by reference.
    pub fn list<'a>(
        &'a self,
        group: &'a str,
        resource: &'a str,
        namespace: Option<&'a str>,
    ) -> impl Iterator<Item = (&'a ObjKey, &'a Value)> + 'a {
        resource_range(&self.inner.objects, group, resource, namespace).map(|(k, v)| (k, &**v))
    }

    /// Every object, by reference (for the garbage collector).
    pub fn iter(&self) -> impl Iterator<Item = (&ObjKey, &Value)> {
        self.inner.objects.iter().map(|(k, v)| (k, &**v))
    }

    fn emit(&mut self, key: ObjKey, kind: EventType, object: Arc<Value>, old: Option<Arc<Value>>) {
        let rv = self.inner.rv;
        let watched = self
            .inner
            .channels
            .get(&key.group)
            .and_then(|resources| resources.get(&key.resource))
            .filter(|tx| tx.receiver_count() > 0)
            .cloned();
        match self.inner.group_changed.get_mut(&key.group) {
            Some(at) => *at = rv,
            None => {
                self.inner.group_changed.insert(key.group.clone(), rv);
            }
        }
        let event = Arc::new(StoreEvent {
            rv: self.inner.rv,
            key,
            kind,
            object,
            old,
        });
        self.inner.history.push_back(event.clone());
        while self.inner.history.len() > self.inner.capacity {
            if let Some(old) = self.inner.history.pop_front() {
                self.inner.floor = old.rv;
            }
        }
        let all = self.tx.receiver_count() > 0;
        if all || watched.is_some() {
            let live = Arc::new(LiveEvent {
                event,
                encodings: Encodings::default(),
            });
            // a receiver may close meanwhile: no receiver left is fine
            if let Some(tx) = watched {
                let _ = tx.send(live.clone());
            }
            if all {
                let _ = self.tx.send(live);
            }
        }
    }

    /// Stores `object` under `key` with a new resourceVersion; emits ADDED or MODIFIED.
    pub fn put(&mut self, key: ObjKey, mut object: Value) -> Value {
        self.inner.rv += 1;
        let rv = self.inner.rv;
        if let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut) {
            meta.insert("resourceVersion".into(), Value::String(rv.to_string()));
        }
        let object = Arc::new(object);
        let old = self.inner.objects.insert(key.clone(), object.clone());
        let kind = if old.is_some() {
            EventType::Modified
        } else {
            EventType::Added
        };
        self.emit(key, kind, object.clone(), old);
        Value::clone(&object)
    }

    /// Removes the object under `key`; emits DELETED with the object at a new resourceVersion.
    pub fn remove(&mut self, key: &ObjKey) -> Option<Value> {
        let mut object = Arc::unwrap_or_clone(self.inner.objects.remove(key)?);
        self.inner.rv += 1;
        let rv = self.inner.rv;
        if let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut) {
            meta.insert("resourceVersion".into(), Value::String(rv.to_string()));
        }
        let object = Arc::new(object);
        self.emit(key.clone(), EventType::Deleted, object.clone(), None);
        Some(Value::clone(&object))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use tokio::sync::broadcast::error::TryRecvError;

    fn put(store: &Store, resource: &str, name: &str) {
        store.transact(|txn| {
            txn.put(
                ObjKey::new("", resource, "ns", name),
                json!({"metadata": {"name": name, "namespace": "ns"}}),
            );
        });
    }

    fn watch_pods(store: &Store) -> broadcast::Receiver<Arc<LiveEvent>> {
        store
            .subscribe("", "pods", None)
            .expect("subscribe")
            .receiver
    }

    #[test]
    fn a_watch_receives_only_its_resource() {
        let store = Store::new(100);
        let mut pods = watch_pods(&store);
        put(&store, "configmaps", "a");
        put(&store, "pods", "p");
        let live = pods.try_recv().expect("the pod event");
        assert_eq!(live.event.key.resource, "pods");
        assert!(matches!(pods.try_recv(), Err(TryRecvError::Empty)));
    }

    #[test]
    fn a_watch_that_falls_behind_on_its_resource_is_told_so() {
        let store = Store::new(100);
        let mut pods = watch_pods(&store);
        // Other resources' changes are not held for it, however many.
        for i in 0..WATCH_LAG_LIMIT + 10 {
            put(&store, "configmaps", &format!("c{i}"));
        }
        assert!(matches!(pods.try_recv(), Err(TryRecvError::Empty)));
        for i in 0..WATCH_LAG_LIMIT + 1 {
            put(&store, "pods", &format!("p{i}"));
        }
        assert!(matches!(pods.try_recv(), Err(TryRecvError::Lagged(1))));
    }

    #[test]
    fn a_receiver_of_every_change_sees_every_resource() {
        let store = Store::new(100);
        let mut all = store.receiver();
        put(&store, "configmaps", "a");
        put(&store, "pods", "p");
        let kinds: Vec<String> = (0..2)
            .map(|_| all.try_recv().expect("an event").event.key.resource.clone())
            .collect();
        assert_eq!(kinds, ["configmaps", "pods"]);
    }
}
