//! The coordinator's catalog: for every kind, the current value of each resource (`Arc` clones of
//! what the owning resource actors committed) and the key → id map. Only the coordinator actor
//! holds it: resource actors report each commit to it by message (`Committed`), and the planner
//! (id fill-in, key lookups), lists, inconsistent reads and peeks read it inside the coordinator's
//! handlers. A list of 100 000 volumes is a copy of `Arc`s and never messages the actors.

use crate::fast_hash::FxHashMap;
use crate::plan::CacheView;
use crate::schema::{KindInfo, Schema};
use serde_json::Value;
use std::sync::Arc;

#[derive(Debug)]
struct KindData {
    info: Arc<KindInfo>,
    values: FxHashMap<String, Arc<Value>>,
    keys: FxHashMap<String, String>,
}

/// A key that another resource already owns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyCollision {
    /// The key.
    pub key: String,
    /// The id that already owns it.
    pub owner: String,
}

/// The values and keys of every kind of a schema.
#[derive(Debug)]
pub struct Catalog {
    schema: Arc<Schema>,
    kinds: FxHashMap<String, KindData>,
}

impl Catalog {
    /// An empty catalog for every kind of `schema`.
    pub fn new(schema: Arc<Schema>) -> Self {
        let kinds = schema
            .kinds()
            .iter()
            .map(|k| {
                (
                    k.name.clone(),
                    KindData {
                        info: k.clone(),
                        values: FxHashMap::default(),
                        keys: FxHashMap::default(),
                    },
                )
            })
            .collect();
        Catalog { schema, kinds }
    }

    /// The schema.
    pub fn schema(&self) -> &Arc<Schema> {
        &self.schema
    }

    /// The declaration of `kind`.
    pub fn info(&self, kind: &str) -> Option<&Arc<KindInfo>> {
        self.kinds.get(kind).map(|k| &k.info)
    }

    /// Copies of all values of `kind` (with their ids), optionally only those whose parent `.0`
    /// is `.1`.
    pub fn list(&self, kind: &str, filter: Option<&(String, String)>) -> Vec<(String, Arc<Value>)> {
        let Some(data) = self.kinds.get(kind) else {
            return Vec::new();
        };
        match filter {
            None => data
                .values
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
            Some((parent, pid)) => data
                .values
                .iter()
                .filter(|(_, v)| data.info.owner_str(v, parent) == Some(pid.as_str()))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
        }
    }

    /// Number of values of `kind`.
    pub fn len(&self, kind: &str) -> usize {
        self.kinds.get(kind).map_or(0, |k| k.values.len())
    }

    /// Records `key` of `kind` as owned by `id`; refuses a key another id owns.
    pub fn claim_key(&mut self, kind: &str, key: &str, id: &str) -> Result<(), KeyCollision> {
        let Some(data) = self.kinds.get_mut(kind) else {
            return Ok(());
        };
        match data.keys.get(key) {
            Some(owner) if owner != id => Err(KeyCollision {
                key: key.to_string(),
                owner: owner.clone(),
            }),
            Some(_) => Ok(()),
            None => {
                data.keys.insert(key.to_string(), id.to_string());
                Ok(())
            }
        }
    }

    /// Whether `key` of `kind` is free for `id` (unowned, or owned by `id`).
    pub fn key_free(&self, kind: &str, key: &str, id: &str) -> Result<(), KeyCollision> {
        match self.kinds.get(kind).and_then(|d| d.keys.get(key)) {
            Some(owner) if owner != id => Err(KeyCollision {
                key: key.to_string(),
                owner: owner.clone(),
            }),
            _ => Ok(()),
        }
    }

    /// Gives back a claimed `key` that `id`'s value does not carry (its commit was refused).
    pub fn unclaim_key(&mut self, kind: &str, key: &str, id: &str) {
        let Some(data) = self.kinds.get_mut(kind) else {
            return;
        };
        let carried = data
            .values
            .get(id)
            .and_then(|v| data.info.key_str(v))
            .is_some_and(|k| k == key);
        if !carried && data.keys.get(key).is_some_and(|owner| owner == id) {
            data.keys.remove(key);
        }
    }

    /// Sets (or with `None` removes) the value of `id`, moving its key: the key of the old value
    /// is forgotten, the key of the new one recorded (a collision was refused before the commit).
    pub fn apply(&mut self, kind: &str, id: &str, value: Option<Arc<Value>>) {
        let Some(data) = self.kinds.get_mut(kind) else {
            return;
        };
        let new_key = value.as_deref().and_then(|v| data.info.key_str(v));
        let old_key = data.values.get(id).and_then(|v| data.info.key_str(v));
        if let Some(k) = old_key
            && Some(k) != new_key
            && data.keys.get(k).is_some_and(|owner| owner == id)
        {
            let k = k.to_string();
            data.keys.remove(&k);
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
    }
}

impl CacheView for Catalog {
    fn get(&self, kind: &str, id: &str) -> Option<Arc<Value>> {
        self.kinds.get(kind).and_then(|k| k.values.get(id).cloned())
    }
    fn id_by_key(&self, kind: &str, key: &str) -> Option<String> {
        self.kinds.get(kind).and_then(|k| k.keys.get(key).cloned())
    }
}
