//! The garbage collector: deletes objects whose owners (ownerReferences by uid) are all gone,
//! drops dangling owner references, completes Foreground deletions (dependents first, then the
//! `foregroundDeletion` finalizer) and Orphan deletions (owner references removed, then the
//! `orphan` finalizer), and empties terminating Namespaces before removing them.
//!
//! Like the real collector's graph builder, it works from the store's events, not from scans:
//! [`Graph`] keeps every object's uid and every owner's dependents, and each event marks the few
//! objects it concerns (an owned object that changed, the dependents of an owner that went or
//! started deleting, an owner whose dependent went, a terminating namespace whose content
//! went). A pass looks at those objects only, so its cost follows the changes, not the size of
//! the store. The events are drained inside the pass's transaction: the store sends them while
//! it holds its lock, so at that point the graph has seen every committed change. A receiver
//! that fell behind (the broadcast lagged) rebuilds the graph with one scan.

use crate::objects::{Engine, Target, kinds, meta};
use crate::store::{EventType, LiveEvent, ObjKey, StoreEvent, Txn};
use serde_json::Value;
use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::broadcast::{self, error::TryRecvError};

/// How long the collector gathers events after the first before a pass (a burst of changes is
/// one pass).
const BATCH: Duration = Duration::from_millis(20);

/// Runs the collector until `stop` fires: a pass after every burst of store events.
pub async fn run(engine: Engine, mut stop: tokio::sync::watch::Receiver<bool>) {
    let mut events = engine.store.receiver();
    // Objects stored before the receiver existed: one scan.
    let mut collector = Collector {
        dirty: Dirty::Everything,
        ..Default::default()
    };
    loop {
        let mut changed = true;
        // A pass's own writes are events too: passes repeat until one changes nothing.
        for _ in 0..16 {
            changed = engine
                .store
                .transact(|txn| collector.pass(&engine, txn, &mut events));
            if !changed {
                break;
            }
        }
        if changed {
            // Still changing after 16 passes: go on after a pause rather than spin.
            tokio::time::sleep(Duration::from_millis(100)).await;
            continue;
        }
        tokio::select! {
            received = events.recv() => match received {
                Ok(event) => collector.observe(&event.event),
                Err(broadcast::error::RecvError::Lagged(_)) => collector.dirty = Dirty::Everything,
                Err(broadcast::error::RecvError::Closed) => return,
            },
            _ = stop.changed() => return,
        }
        if *stop.borrow() {
            return;
        }
        tokio::time::sleep(BATCH).await;
    }
}

/// What the next pass looks at.
#[derive(Debug)]
enum Dirty {
    /// These objects.
    Keys(BTreeSet<ObjKey>),
    /// Everything (the graph is rebuilt first).
    Everything,
}

impl Default for Dirty {
    fn default() -> Self {
        Dirty::Keys(BTreeSet::new())
    }
}

impl Dirty {
    fn mark(&mut self, key: &ObjKey) {
        if let Dirty::Keys(keys) = self {
            keys.insert(key.clone());
        }
    }
}

/// The ownership graph, as the store's events tell it.
#[derive(Debug, Default)]
struct Graph {
    /// Every object by uid.
    by_uid: HashMap<String, ObjKey>,
    /// The objects that name each uid as an owner.
    dependents: HashMap<String, HashSet<ObjKey>>,
    /// Namespaces being deleted.
    terminating: HashSet<String>,
}

impl Graph {
    fn link(&mut self, key: &ObjKey, owners: &[String]) {
        for owner in owners {
            self.dependents
                .entry(owner.clone())
                .or_default()
                .insert(key.clone());
        }
    }

    fn unlink(&mut self, key: &ObjKey, owners: &[String]) {
        for owner in owners {
            if let Some(set) = self.dependents.get_mut(owner) {
                set.remove(key);
                if set.is_empty() {
                    self.dependents.remove(owner);
                }
            }
        }
    }

    fn has_dependents(&self, uid: &str) -> bool {
        self.dependents.get(uid).is_some_and(|d| !d.is_empty())
    }

    /// The state of the owner `uid` in `txn`, when it exists.
    fn owner(&self, txn: &Txn<'_>, uid: &str) -> Option<OwnerState> {
        let key = self.by_uid.get(uid)?;
        let obj = txn.get(key)?;
        (meta::meta_str(obj, "uid") == Some(uid)).then(|| OwnerState::of(obj))
    }
}

fn is_namespace(key: &ObjKey) -> bool {
    key.group.is_empty() && key.resource == "namespaces"
}

fn deleting(obj: &Value) -> bool {
    obj.pointer("/metadata/deletionTimestamp").is_some()
}

/// The graph, the objects the next pass looks at, and the pass itself.
#[derive(Debug, Default)]
struct Collector {
    graph: Graph,
    dirty: Dirty,
}

impl Collector {
    /// Takes in one change: the graph follows it and the objects it concerns are marked.
    fn observe(&mut self, event: &StoreEvent) {
        let key = &event.key;
        let obj = &*event.object;
        let uid = meta::meta_str(obj, "uid").unwrap_or_default().to_string();
        match event.kind {
            EventType::Added | EventType::Modified => {
                let owners = owner_uids(obj);
                if let Some(old) = &event.old {
                    let before = owner_uids(old);
                    self.graph.unlink(key, &before);
                    // An owner it left may be waiting for its dependents to go.
                    for gone in before.iter().filter(|u| !owners.contains(u)) {
                        self.mark_uid(gone);
                    }
                }
                self.graph.link(key, &owners);
                if !uid.is_empty() {
                    self.graph.by_uid.insert(uid.clone(), key.clone());
                }
                if !owners.is_empty() {
                    self.dirty.mark(key);
                }
                if deleting(obj) {
                    self.dirty.mark(key);
                    self.mark_dependents(&uid);
                    if is_namespace(key) {
                        self.graph.terminating.insert(key.name.clone());
                    }
                }
            }
            EventType::Deleted => {
                let owners = owner_uids(obj);
                self.graph.unlink(key, &owners);
                if self.graph.by_uid.get(&uid) == Some(key) {
                    self.graph.by_uid.remove(&uid);
                }
                // Its dependents lost an owner; its owners may be waiting for it to go.
                self.mark_dependents(&uid);
                for owner in &owners {
                    self.mark_uid(owner);
                }
                if is_namespace(key) {
                    self.graph.terminating.remove(&key.name);
                } else if self.graph.terminating.contains(&key.namespace) {
                    self.dirty
                        .mark(&ObjKey::new("", "namespaces", "", &key.namespace));
                }
            }
        }
    }

    fn mark_uid(&mut self, uid: &str) {
        if let Some(key) = self.graph.by_uid.get(uid) {
            self.dirty.mark(key);
        }
    }

    fn mark_dependents(&mut self, uid: &str) {
        if let Some(deps) = self.graph.dependents.get(uid) {
            for dep in deps {
                self.dirty.mark(dep);
            }
        }
    }

    /// Drains the events committed so far (called under the store's lock, so that is all of
    /// them), then rebuilds from `txn` if the receiver fell behind.
    fn catch_up(&mut self, txn: &Txn<'_>, events: &mut broadcast::Receiver<Arc<LiveEvent>>) {
        loop {
            match events.try_recv() {
                Ok(event) => self.observe(&event.event),
                Err(TryRecvError::Lagged(_)) => self.dirty = Dirty::Everything,
                Err(TryRecvError::Empty | TryRecvError::Closed) => break,
            }
        }
        if matches!(self.dirty, Dirty::Everything) {
            self.graph = Graph::default();
            let mut keys = BTreeSet::new();
            for (key, obj) in txn.iter() {
                let owners = owner_uids(obj);
                self.graph.link(key, &owners);
                if let Some(uid) = meta::meta_str(obj, "uid") {
                    self.graph.by_uid.insert(uid.to_string(), key.clone());
                }
                if deleting(obj) && is_namespace(key) {
                    self.graph.terminating.insert(key.name.clone());
                }
                if !owners.is_empty() || deleting(obj) {
                    keys.insert(key.clone());
                }
            }
            self.dirty = Dirty::Keys(keys);
        }
    }

    /// One pass over the marked objects; true when it changed something.
    fn pass(
        &mut self,
        engine: &Engine,
        txn: &mut Txn<'_>,
        events: &mut broadcast::Receiver<Arc<LiveEvent>>,
    ) -> bool {
        self.catch_up(txn, events);
        let Dirty::Keys(keys) = std::mem::take(&mut self.dirty) else {
            return false;
        };
        let mut changed = false;
        for key in &keys {
            changed |= self.collect(engine, txn, key);
        }
        changed
    }
}

fn owner_uids(obj: &Value) -> Vec<String> {
    obj.pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)
        .map(|refs| {
            refs.iter()
                .filter_map(|r| r.get("uid").and_then(Value::as_str))
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

fn target_for(engine: &Engine, key: &ObjKey) -> Option<Target> {
    let info = engine.registry.find_resource(&key.group, &key.resource)?;
    let version = info.preferred_version().to_string();
    Some(Target {
        info,
        version,
        namespace: key.namespace.clone(),
        name: key.name.clone(),
        subresource: String::new(),
    })
}

fn rewrite(txn: &mut Txn<'_>, key: &ObjKey, obj: Value, engine: &Engine) {
    // an object whose last finalizer goes is removed, like an API write would do
    if obj.pointer("/metadata/deletionTimestamp").is_some()
        && meta::finalizers(&obj).is_empty()
        && !(key.group.is_empty() && key.resource == "namespaces")
    {
        txn.put(key.clone(), obj);
        if let Some(gone) = txn.remove(key)
            && let Some(t) = target_for(engine, key)
        {
            kinds::after_delete(&engine.registry, txn, &t, &gone);
        }
    } else {
        txn.put(key.clone(), obj);
    }
}

/// What the collector needs to know of a (possible) owner.
struct OwnerState {
    deleting: bool,
    foreground: bool,
    orphan: bool,
}

impl OwnerState {
    fn of(obj: &Value) -> Self {
        // Only an owner being deleted has a deletion mode to honour.
        let fins = if deleting(obj) {
            meta::finalizers(obj)
        } else {
            Vec::new()
        };
        OwnerState {
            deleting: deleting(obj),
            foreground: fins.iter().any(|f| f == "foregroundDeletion"),
            orphan: fins.iter().any(|f| f == "orphan"),
        }
    }
}

impl Collector {
    /// Acts on one marked object; true when it changed something.
    fn collect(&self, engine: &Engine, txn: &mut Txn<'_>, key: &ObjKey) -> bool {
        let graph = &self.graph;
        let Some(current) = txn.get(key) else {
            return false;
        };
        // Most dependents have every owner alive and not being deleted: nothing to do, and
        // nothing to copy.
        let settled = !deleting(current)
            && owner_uids(current)
                .iter()
                .all(|u| graph.owner(txn, u).is_some_and(|o| !o.deleting));
        if settled {
            return false;
        }
        let current = current.clone();
        let uids = owner_uids(&current);
        let is_deleting = deleting(&current);
        let owners: HashMap<&String, OwnerState> = uids
            .iter()
            .filter_map(|u| graph.owner(txn, u).map(|o| (u, o)))
            .collect();
        if !uids.is_empty() {
            let live: Vec<&String> = uids.iter().filter(|u| owners.contains_key(*u)).collect();
            if live.is_empty() {
                if !is_deleting && let Some(t) = target_for(engine, key) {
                    engine.delete_in(txn, &t, &current, Some("Background"), None);
                    return true;
                }
                return false;
            }
            let orphaning: Vec<&String> = live
                .iter()
                .copied()
                .filter(|u| owners.get(*u).is_some_and(|o| o.deleting && o.orphan))
                .collect();
            let foreground = live
                .iter()
                .any(|u| owners.get(*u).is_some_and(|o| o.deleting && o.foreground));
            if !orphaning.is_empty() || live.len() != uids.len() {
                let mut new = current.clone();
                if let Some(refs) = new
                    .pointer_mut("/metadata/ownerReferences")
                    .and_then(Value::as_array_mut)
                {
                    refs.retain(|r| {
                        let u = r
                            .get("uid")
                            .and_then(Value::as_str)
                            .unwrap_or_default()
                            .to_string();
                        owners.contains_key(&u) && !orphaning.contains(&&u)
                    });
                    if refs.is_empty()
                        && let Some(m) = new.get_mut("metadata").and_then(Value::as_object_mut)
                    {
                        m.remove("ownerReferences");
                    }
                }
                rewrite(txn, key, new, engine);
                return true;
            }
            if foreground && !is_deleting {
                if let Some(t) = target_for(engine, key) {
                    let uid = meta::meta_str(&current, "uid").unwrap_or_default();
                    let policy = if graph.has_dependents(uid) {
                        "Foreground"
                    } else {
                        "Background"
                    };
                    engine.delete_in(txn, &t, &current, Some(policy), None);
                    return true;
                }
                return false;
            }
        }
        if !is_deleting {
            return false;
        }
        // owners finishing Foreground / Orphan deletions
        let uid = meta::meta_str(&current, "uid")
            .unwrap_or_default()
            .to_string();
        let fins = meta::finalizers(&current);
        let mut new_fins = fins.clone();
        if !graph.has_dependents(&uid) {
            new_fins.retain(|f| f != "foregroundDeletion" && f != "orphan");
        }
        if new_fins != fins {
            let mut new = current.clone();
            meta::set_finalizers(&mut new, &new_fins);
            rewrite(txn, key, new, engine);
            return true;
        }
        // terminating namespaces: delete their content, then go
        let mut changed = false;
        if is_namespace(key) {
            let contents: Vec<ObjKey> = txn
                .iter()
                .filter(|(k, _)| k.namespace == key.name)
                .map(|(k, _)| k.clone())
                .collect();
            for k in &contents {
                let Some(o) = txn.get(k).cloned() else {
                    continue;
                };
                if !deleting(&o)
                    && let Some(t) = target_for(engine, k)
                {
                    engine.delete_in(txn, &t, &o, Some("Background"), None);
                    changed = true;
                }
            }
            let remaining = txn.iter().filter(|(k, _)| k.namespace == key.name).count();
            if remaining == 0 && meta::finalizers(&current).is_empty() {
                txn.remove(key);
                changed = true;
            }
        }
        changed
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn config_map(name: &str, uid: &str, owner: Option<&str>) -> (ObjKey, Value) {
        let mut obj = json!({
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": "default", "uid": uid},
        });
        if let Some(owner) = owner {
            obj["metadata"]["ownerReferences"] =
                json!([{"apiVersion": "v1", "kind": "ConfigMap", "name": owner, "uid": owner}]);
        }
        (ObjKey::new("", "configmaps", "default", name), obj)
    }

    fn put(engine: &Engine, name: &str, owner: Option<&str>) {
        let (key, obj) = config_map(name, name, owner);
        engine.store.transact(|txn| txn.put(key, obj));
    }

    fn marked(collector: &mut Collector, engine: &Engine, events: &mut Receiver) -> Vec<String> {
        engine.store.transact(|txn| collector.catch_up(txn, events));
        match &collector.dirty {
            Dirty::Keys(keys) => keys.iter().map(|k| k.name.clone()).collect(),
            Dirty::Everything => vec!["everything".to_string()],
        }
    }

    type Receiver = broadcast::Receiver<Arc<LiveEvent>>;

    fn pass(collector: &mut Collector, engine: &Engine, events: &mut Receiver) -> bool {
        engine
            .store
            .transact(|txn| collector.pass(engine, txn, events))
    }

    fn exists(engine: &Engine, name: &str) -> bool {
        engine
            .store
            .get("", "configmaps", "default", name)
            .is_some()
    }

    #[test]
    fn a_pass_looks_only_at_the_objects_the_events_concern() {
        let engine = Engine::new(1000);
        put(&engine, "before", None);
        let mut events = engine.store.receiver();
        let mut collector = Collector {
            dirty: Dirty::Everything,
            ..Default::default()
        };
        assert!(!pass(&mut collector, &engine, &mut events), "nothing to do");
        put(&engine, "owner", None);
        put(&engine, "child", Some("owner"));
        for i in 0..50 {
            put(&engine, &format!("free-{i}"), None);
        }
        // Only the owned object is looked at; the 50 without owners are not.
        assert_eq!(marked(&mut collector, &engine, &mut events), ["child"]);
        assert!(
            !pass(&mut collector, &engine, &mut events),
            "its owner lives"
        );
        assert!(exists(&engine, "child"));

        engine
            .store
            .transact(|txn| txn.remove(&ObjKey::new("", "configmaps", "default", "owner")));
        assert_eq!(marked(&mut collector, &engine, &mut events), ["child"]);
        assert!(pass(&mut collector, &engine, &mut events));
        assert!(!exists(&engine, "child"), "its owner went: collected");
        assert!(!pass(&mut collector, &engine, &mut events));
    }

    #[test]
    fn a_dependent_created_after_its_owner_went_is_collected() {
        let engine = Engine::new(1000);
        let mut events = engine.store.receiver();
        let mut collector = Collector::default();
        put(&engine, "orphan", Some("never-existed"));
        assert!(pass(&mut collector, &engine, &mut events));
        assert!(!exists(&engine, "orphan"));
    }

    #[test]
    fn a_rebuild_finds_what_was_stored_before_the_collector_listened() {
        let engine = Engine::new(1000);
        put(&engine, "stale", Some("gone-owner"));
        put(&engine, "kept", None);
        let mut events = engine.store.receiver();
        let mut collector = Collector {
            dirty: Dirty::Everything,
            ..Default::default()
        };
        assert_eq!(marked(&mut collector, &engine, &mut events), ["stale"]);
        assert!(pass(&mut collector, &engine, &mut events));
        assert!(!exists(&engine, "stale"));
        assert!(exists(&engine, "kept"));
    }

    #[test]
    fn an_owner_is_looked_at_again_when_a_dependent_leaves_it() {
        let engine = Engine::new(1000);
        let mut events = engine.store.receiver();
        let mut collector = Collector::default();
        put(&engine, "owner", None);
        put(&engine, "child", Some("owner"));
        marked(&mut collector, &engine, &mut events);
        collector.dirty = Dirty::default();
        // The child drops its owner reference.
        put(&engine, "child", None);
        assert_eq!(marked(&mut collector, &engine, &mut events), ["owner"]);
        assert!(!collector.graph.has_dependents("owner"));
    }
}
