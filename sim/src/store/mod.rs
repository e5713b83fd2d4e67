//! The in-memory object store: objects as JSON keyed by (group, resource, namespace, name), one
//! global monotonically increasing resourceVersion, a bounded history of watch events (the window
//! a watch can resume from) and a broadcast of live events to open watches.

pub mod selectors;

use serde_json::Value;
use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};
use tokio::sync::broadcast;

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
#[derive(Clone, Debug)]
pub struct StoreEvent {
    pub rv: u64,
    pub key: ObjKey,
    pub kind: EventType,
    pub object: Value,
    /// The object before a MODIFIED change (to tell selector watches it stopped matching).
    pub old: Option<Value>,
}

struct Inner {
    rv: u64,
    objects: BTreeMap<ObjKey, Value>,
    history: VecDeque<Arc<StoreEvent>>,
    /// Every event with rv > floor is in `history`.
    floor: u64,
    capacity: usize,
}

/// The object store (cheap to clone; all clones share the state).
#[derive(Clone)]
pub struct Store {
    inner: Arc<Mutex<Inner>>,
    tx: broadcast::Sender<Arc<StoreEvent>>,
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
    pub receiver: broadcast::Receiver<Arc<StoreEvent>>,
    pub rv: u64,
}

impl Store {
    /// An empty store whose watch history keeps `capacity` events.
    pub fn new(capacity: usize) -> Store {
        let (tx, _) = broadcast::channel(65_536);
        Store {
            inner: Arc::new(Mutex::new(Inner {
                rv: 1,
                objects: BTreeMap::new(),
                history: VecDeque::new(),
                floor: 1,
                capacity: capacity.max(16),
            })),
            tx,
        }
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
            .cloned()
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
        let items = inner
            .objects
            .iter()
            .filter(|(k, _)| {
                k.group == group
                    && k.resource == resource
                    && namespace.is_none_or(|ns| k.namespace == ns)
            })
            .map(|(_, v)| v.clone())
            .collect();
        (items, inner.rv)
    }

    /// Number of stored objects.
    pub fn len(&self) -> usize {
        self.lock().objects.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// A receiver of every future event.
    pub fn receiver(&self) -> broadcast::Receiver<Arc<StoreEvent>> {
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
        let inner = self.lock();
        let receiver = self.tx.subscribe();
        let backlog = match since {
            None => inner
                .objects
                .iter()
                .filter(|(k, _)| k.group == group && k.resource == resource)
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
    tx: &'a broadcast::Sender<Arc<StoreEvent>>,
}

impl Txn<'_> {
    pub fn get(&self, key: &ObjKey) -> Option<&Value> {
        self.inner.objects.get(key)
    }

    pub fn rv(&self) -> u64 {
        self.inner.rv
    }

    /// Keys and objects of one resource, optionally in one namespace.
    pub fn list(
        &self,
        group: &str,
        resource: &str,
        namespace: Option<&str>,
    ) -> Vec<(ObjKey, Value)> {
        self.inner
            .objects
            .iter()
            .filter(|(k, _)| {
                k.group == group
                    && k.resource == resource
                    && namespace.is_none_or(|ns| k.namespace == ns)
            })
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    }

    /// Every object, by reference (for the garbage collector).
    pub fn iter(&self) -> impl Iterator<Item = (&ObjKey, &Value)> {
        self.inner.objects.iter()
    }

    fn emit(&mut self, key: ObjKey, kind: EventType, object: Value, old: Option<Value>) {
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
        // no receiver is fine
        let _ = self.tx.send(event);
    }

    /// Stores `object` under `key` with a new resourceVersion; emits ADDED or MODIFIED.
    pub fn put(&mut self, key: ObjKey, mut object: Value) -> Value {
        self.inner.rv += 1;
        let rv = self.inner.rv;
        if let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut) {
            meta.insert("resourceVersion".into(), Value::String(rv.to_string()));
        }
        let old = self.inner.objects.insert(key.clone(), object.clone());
        let kind = if old.is_some() {
            EventType::Modified
        } else {
            EventType::Added
        };
        self.emit(key, kind, object.clone(), old);
        object
    }

    /// Removes the object under `key`; emits DELETED with the object at a new resourceVersion.
    pub fn remove(&mut self, key: &ObjKey) -> Option<Value> {
        let mut object = self.inner.objects.remove(key)?;
        self.inner.rv += 1;
        let rv = self.inner.rv;
        if let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut) {
            meta.insert("resourceVersion".into(), Value::String(rv.to_string()));
        }
        self.emit(key.clone(), EventType::Deleted, object.clone(), None);
        Some(object)
    }
}
