//! The ordered-rwlock baseline's lock table: one tokio `RwLock` per (kind, id), created on
//! first use and kept, looked up under a short std mutex per kind.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::sync::{OwnedRwLockReadGuard, OwnedRwLockWriteGuard, RwLock};

use crate::query::Kind;

/// Shared or exclusive.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    Read,
    Write,
}

/// A held per-resource lock; dropping it releases the lock.
pub enum Guard {
    Read(#[allow(dead_code)] OwnedRwLockReadGuard<()>),
    Write(#[allow(dead_code)] OwnedRwLockWriteGuard<()>),
}

/// Per-kind maps of per-resource locks.
#[derive(Default)]
pub struct LockTable {
    kinds: [Mutex<HashMap<String, Arc<RwLock<()>>>>; Kind::ALL.len()],
}

impl LockTable {
    /// Wait for the lock of (kind, id) in `mode`.
    pub async fn acquire(&self, kind: Kind, id: &str, mode: Mode) -> Guard {
        let lock = {
            // A poisoned map only means another task panicked while inserting; the map is intact.
            let mut map = self.kinds[kind.index()]
                .lock()
                .unwrap_or_else(|poison| poison.into_inner());
            match map.get(id) {
                Some(lock) => lock.clone(),
                None => {
                    let lock = Arc::new(RwLock::new(()));
                    map.insert(id.to_owned(), lock.clone());
                    lock
                }
            }
        };
        match mode {
            Mode::Read => Guard::Read(lock.read_owned().await),
            Mode::Write => Guard::Write(lock.write_owned().await),
        }
    }
}
