//! The baselines' resource cache: one table per kind (`id → Arc<Value>`) behind a short-held
//! std read/write lock, as in the reference orchestrator's concurrent cache (cache-level locks are taken only for
//! the brief copy or commit, never across a transaction).

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use serde_json::Value;

use crate::engine::{EngineError, EngineResult};
use crate::query::Kind;

/// Values of every kind.
#[derive(Default)]
pub struct Store {
    tables: [RwLock<HashMap<String, Arc<Value>>>; Kind::ALL.len()],
}

fn poisoned(kind: Kind) -> EngineError {
    EngineError(format!("{kind} table lock poisoned"))
}

impl Store {
    /// Copy (an `Arc` clone) of one value.
    pub fn get(&self, kind: Kind, id: &str) -> EngineResult<Option<Arc<Value>>> {
        let table = self.tables[kind.index()]
            .read()
            .map_err(|_| poisoned(kind))?;
        Ok(table.get(id).cloned())
    }

    /// Copies of every value of `kind` with their ids, optionally only those whose `field`
    /// equals `owner`.
    pub fn list(
        &self,
        kind: Kind,
        filter: Option<(&str, &str)>,
    ) -> EngineResult<Vec<(String, Arc<Value>)>> {
        let table = self.tables[kind.index()]
            .read()
            .map_err(|_| poisoned(kind))?;
        Ok(match filter {
            None => table
                .iter()
                .map(|(id, v)| (id.clone(), v.clone()))
                .collect(),
            Some((field, owner)) => table
                .iter()
                .filter(|(_, v)| v.get(field).and_then(Value::as_str) == Some(owner))
                .map(|(id, v)| (id.clone(), v.clone()))
                .collect(),
        })
    }

    /// Commit a value.
    pub fn put(&self, kind: Kind, id: &str, value: Arc<Value>) -> EngineResult<()> {
        let mut table = self.tables[kind.index()]
            .write()
            .map_err(|_| poisoned(kind))?;
        table.insert(id.to_owned(), value);
        Ok(())
    }

    /// Read-modify-write of one value under the table's write lock (interior mutation).
    pub fn update(
        &self,
        kind: Kind,
        id: &str,
        change: impl FnOnce(&mut Value),
    ) -> EngineResult<()> {
        let mut table = self.tables[kind.index()]
            .write()
            .map_err(|_| poisoned(kind))?;
        let slot = table
            .get_mut(id)
            .ok_or_else(|| EngineError(format!("{kind} {id:?} not found")))?;
        change(Arc::make_mut(slot));
        Ok(())
    }
}
