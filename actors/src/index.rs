//! The per-kind index of current values (`Arc` clones) and keys. Owning resource actors update it
//! on every commit; lists, inconsistent reads and the planner read it, so a list of 100 000
//! volumes is a copy of `Arc`s and never messages the actors. This is the seed's cache-level lock:
//! it is held only for the copy or the update, never across an await.

use crate::fast_hash::FxHashMap;
use crate::plan::CacheView;
use crate::schema::{KindInfo, Schema};
use serde_json::Value;
use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};

#[derive(Debug, Default)]
struct KindData {
    values: FxHashMap<String, Arc<Value>>,
    keys: FxHashMap<String, String>,
}

/// The index of one kind.
#[derive(Debug)]
pub struct KindIndex {
    info: Arc<KindInfo>,
    data: RwLock<KindData>,
}

/// A key update that collides with another resource's key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyCollision {
    /// The key.
    pub key: String,
    /// The id that already owns it.
    pub owner: String,
}

impl KindIndex {
    fn new(info: Arc<KindInfo>) -> Self {
        KindIndex {
            info,
            data: RwLock::new(KindData::default()),
        }
    }

    fn read(&self) -> RwLockReadGuard<'_, KindData> {
        // A poisoned lock only means a panic elsewhere while holding it; the maps stay usable.
        self.data.read().unwrap_or_else(|e| e.into_inner())
    }

    fn write(&self) -> RwLockWriteGuard<'_, KindData> {
        self.data.write().unwrap_or_else(|e| e.into_inner())
    }

    /// The kind.
    pub fn info(&self) -> &Arc<KindInfo> {
        &self.info
    }

    /// The current value of `id`.
    pub fn get(&self, id: &str) -> Option<Arc<Value>> {
        self.read().values.get(id).cloned()
    }

    /// The id whose key is `key`.
    pub fn id_by_key(&self, key: &str) -> Option<String> {
        self.read().keys.get(key).cloned()
    }

    /// Copies of all values (with their ids), optionally only those whose parent `.0` is `.1`.
    pub fn list(&self, filter: Option<&(String, String)>) -> Vec<(String, Arc<Value>)> {
        let data = self.read();
        match filter {
            None => data
                .values
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
            Some((parent, pid)) => data
                .values
                .iter()
                .filter(|(_, v)| self.info.owner_str(v, parent) == Some(pid.as_str()))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
        }
    }

    /// Number of values.
    pub fn len(&self) -> usize {
        self.read().values.len()
    }

    /// Whether the kind has no values.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Sets (or with `None` removes) the value of `id`, updating the key map; refuses a key that
    /// another id owns.
    pub fn set(&self, id: &str, value: Option<Arc<Value>>) -> Result<(), KeyCollision> {
        let info = &self.info;
        let mut data = self.write();
        let data = &mut *data;
        let new_key = value.as_deref().and_then(|v| info.key_str(v));
        if let Some(k) = new_key
            && let Some(owner) = data.keys.get(k)
            && owner != id
        {
            return Err(KeyCollision {
                key: k.to_string(),
                owner: owner.clone(),
            });
        }
        let old_key = data.values.get(id).and_then(|v| info.key_str(v));
        if let Some(k) = old_key
            && Some(k) != new_key
        {
            data.keys.remove(k);
        }
        if let Some(k) = new_key
            && data.keys.get(k).is_none_or(|owner| owner != id)
        {
            data.keys.insert(k.to_string(), id.to_string());
        }
        match value {
            Some(v) => match data.values.get_mut(id) {
                Some(slot) => *slot = v,
                None => {
                    data.values.insert(id.to_string(), v);
                }
            },
            None => {
                data.values.remove(id);
            }
        }
        Ok(())
    }
}

/// The indexes of every kind of a schema.
#[derive(Debug)]
pub struct Store {
    schema: Arc<Schema>,
    kinds: FxHashMap<String, Arc<KindIndex>>,
}

impl Store {
    /// Empty indexes for every kind of `schema`.
    pub fn new(schema: Arc<Schema>) -> Self {
        let kinds = schema
            .kinds()
            .iter()
            .map(|k| (k.name.clone(), Arc::new(KindIndex::new(k.clone()))))
            .collect();
        Store { schema, kinds }
    }
    /// The schema.
    pub fn schema(&self) -> &Arc<Schema> {
        &self.schema
    }
    /// The index of `kind`.
    pub fn kind(&self, kind: &str) -> Option<&Arc<KindIndex>> {
        self.kinds.get(kind)
    }
}

impl CacheView for Store {
    fn get(&self, kind: &str, id: &str) -> Option<Arc<Value>> {
        self.kinds.get(kind).and_then(|k| k.get(id))
    }
    fn id_by_key(&self, kind: &str, key: &str) -> Option<String> {
        self.kinds.get(kind).and_then(|k| k.id_by_key(key))
    }
}
