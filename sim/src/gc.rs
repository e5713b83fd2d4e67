//! The garbage collector: deletes objects whose owners (ownerReferences by uid) are all gone,
//! drops dangling owner references, completes Foreground deletions (dependents first, then the
//! `foregroundDeletion` finalizer) and Orphan deletions (owner references removed, then the
//! `orphan` finalizer), and empties terminating Namespaces before removing them.

use crate::objects::{Engine, Target, kinds, meta};
use crate::store::{ObjKey, Txn};
use serde_json::Value;
use std::collections::{HashMap, HashSet};
use std::time::Duration;

/// Runs the collector until `stop` fires: after every delete notification and every 500 ms.
/// A pass that changed nothing is not repeated until the store has changed (its
/// resourceVersion moved), so an idle store costs no scan.
pub async fn run(engine: Engine, mut stop: tokio::sync::watch::Receiver<bool>) {
    let wake = engine.gc_notify();
    let mut idle_at: Option<u64> = None;
    loop {
        tokio::select! {
            _ = wake.notified() => {}
            _ = tokio::time::sleep(Duration::from_millis(500)) => {}
            _ = stop.changed() => return,
        }
        if *stop.borrow() {
            return;
        }
        if idle_at == Some(engine.store.resource_version()) {
            continue;
        }
        for _ in 0..16 {
            let (changed, rv) = engine.store.transact(|txn| (pass(&engine, txn), txn.rv()));
            idle_at = (!changed).then_some(rv);
            if !changed {
                break;
            }
        }
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

/// One collection pass; true when it changed something.
pub fn collect_once(engine: &Engine) -> bool {
    engine.store.transact(|txn| pass(engine, txn))
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

fn pass(engine: &Engine, txn: &mut Txn<'_>) -> bool {
    // phase 1, by reference: owners by uid, referenced uids, and the few objects to look at
    let mut owners: HashMap<String, OwnerState> = HashMap::new();
    let mut referenced: HashSet<String> = HashSet::new();
    let mut candidates: Vec<ObjKey> = Vec::new();
    for (key, obj) in txn.iter() {
        let deleting = obj.pointer("/metadata/deletionTimestamp").is_some();
        if let Some(uid) = meta::meta_str(obj, "uid") {
            // Only an owner being deleted has a deletion mode to honour.
            let fins = if deleting {
                meta::finalizers(obj)
            } else {
                Vec::new()
            };
            owners.insert(
                uid.to_string(),
                OwnerState {
                    deleting,
                    foreground: fins.iter().any(|f| f == "foregroundDeletion"),
                    orphan: fins.iter().any(|f| f == "orphan"),
                },
            );
        }
        let refs = owner_uids(obj);
        if !refs.is_empty() || deleting {
            candidates.push(key.clone());
        }
        referenced.extend(refs);
    }
    if candidates.is_empty() {
        return false;
    }
    let has_dependents = |uid: &str| referenced.contains(uid);
    let mut changed = false;
    // phase 2: act on the candidates
    for key in &candidates {
        let Some(current) = txn.get(key) else {
            continue;
        };
        // Most dependents have every owner alive and not being deleted: nothing to do, and
        // nothing to copy.
        let settled = current.pointer("/metadata/deletionTimestamp").is_none()
            && owner_uids(current)
                .iter()
                .all(|u| owners.get(u).is_some_and(|o| !o.deleting));
        if settled {
            continue;
        }
        let current = current.clone();
        let uids = owner_uids(&current);
        let deleting = current.pointer("/metadata/deletionTimestamp").is_some();
        if !uids.is_empty() {
            let live: Vec<&String> = uids.iter().filter(|u| owners.contains_key(*u)).collect();
            if live.is_empty() {
                if !deleting && let Some(t) = target_for(engine, key) {
                    engine.delete_in(txn, &t, &current, Some("Background"), None);
                    changed = true;
                }
                continue;
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
                changed = true;
                continue;
            }
            if foreground && !deleting {
                if let Some(t) = target_for(engine, key) {
                    let uid = meta::meta_str(&current, "uid").unwrap_or_default();
                    let policy = if has_dependents(uid) {
                        "Foreground"
                    } else {
                        "Background"
                    };
                    engine.delete_in(txn, &t, &current, Some(policy), None);
                    changed = true;
                }
                continue;
            }
        }
        if !deleting {
            continue;
        }
        // owners finishing Foreground / Orphan deletions
        let uid = meta::meta_str(&current, "uid")
            .unwrap_or_default()
            .to_string();
        let fins = meta::finalizers(&current);
        let mut new_fins = fins.clone();
        if !has_dependents(&uid) {
            new_fins.retain(|f| f != "foregroundDeletion" && f != "orphan");
        }
        if new_fins != fins {
            let mut new = current.clone();
            meta::set_finalizers(&mut new, &new_fins);
            rewrite(txn, key, new, engine);
            changed = true;
            continue;
        }
        // terminating namespaces: delete their content, then go
        if key.group.is_empty() && key.resource == "namespaces" {
            let contents: Vec<ObjKey> = txn
                .iter()
                .filter(|(k, _)| k.namespace == key.name)
                .map(|(k, _)| k.clone())
                .collect();
            for k in &contents {
                let Some(o) = txn.get(k).cloned() else {
                    continue;
                };
                if o.pointer("/metadata/deletionTimestamp").is_none()
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
    }
    changed
}
