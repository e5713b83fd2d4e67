//! The objects of one informer's store by owner: for each owner uid, the namespace and name of
//! every object whose ownerReferences name it, kept up to date from the watch events that feed
//! the store, so a controller finds what it owns in O(owned) instead of a walk of the whole kind
//! (every namespace of the cluster) per reconcile.

use std::collections::{BTreeSet, HashMap};

use kube::Resource;

/// Where an object lives: its namespace (empty for a cluster-scoped kind) and name.
pub type Location = (String, String);

/// Owner uid to the objects it owns, and each object's owner uids (to drop its old entries).
#[derive(Debug, Default)]
pub struct OwnerIndex {
    owned: HashMap<String, BTreeSet<Location>>,
    owners: HashMap<Location, Vec<String>>,
}

fn location<K: Resource>(object: &K) -> Location {
    let meta = object.meta();
    (
        meta.namespace.clone().unwrap_or_default(),
        meta.name.clone().unwrap_or_default(),
    )
}

impl OwnerIndex {
    /// Records `object` as the store now holds it (added or modified).
    pub fn apply<K: Resource>(&mut self, object: &K) {
        let at = location(object);
        let uids: Vec<String> = object
            .meta()
            .owner_references
            .iter()
            .flatten()
            .map(|o| o.uid.clone())
            .collect();
        if self
            .owners
            .get(&at)
            .map_or(uids.is_empty(), |known| *known == uids)
        {
            return;
        }
        self.forget(&at);
        for uid in &uids {
            self.owned
                .entry(uid.clone())
                .or_default()
                .insert(at.clone());
        }
        self.owners.insert(at, uids);
    }

    /// Drops `object` (deleted from the store).
    pub fn delete<K: Resource>(&mut self, object: &K) {
        self.forget(&location(object));
    }

    /// Starts over from `objects` (the store after a (re)list).
    pub fn rebuild<'a, K: Resource + 'a>(&mut self, objects: impl IntoIterator<Item = &'a K>) {
        *self = OwnerIndex::default();
        for object in objects {
            self.apply(object);
        }
    }

    fn forget(&mut self, at: &Location) {
        for uid in self.owners.remove(at).unwrap_or_default() {
            if let Some(set) = self.owned.get_mut(&uid) {
                set.remove(at);
                if set.is_empty() {
                    self.owned.remove(&uid);
                }
            }
        }
    }

    /// Where the objects owned by `uid` live, by namespace and name.
    pub fn owned_by(&self, uid: &str) -> Vec<Location> {
        self.owned
            .get(uid)
            .map(|set| set.iter().cloned().collect())
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::Pod;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
    use kube::api::ObjectMeta;

    fn pod(namespace: &str, name: &str, owners: &[&str]) -> Pod {
        Pod {
            metadata: ObjectMeta {
                namespace: Some(namespace.into()),
                name: Some(name.into()),
                owner_references: Some(
                    owners
                        .iter()
                        .map(|uid| OwnerReference {
                            uid: (*uid).into(),
                            ..OwnerReference::default()
                        })
                        .collect(),
                ),
                ..ObjectMeta::default()
            },
            ..Pod::default()
        }
    }

    fn at(namespace: &str, name: &str) -> Location {
        (namespace.into(), name.into())
    }

    #[test]
    fn follows_adds_owner_changes_and_deletes() {
        let mut index = OwnerIndex::default();
        index.apply(&pod("b", "p2", &["rs-1"]));
        index.apply(&pod("a", "p1", &["rs-1", "job-1"]));
        index.apply(&pod("a", "p3", &[]));
        assert_eq!(index.owned_by("rs-1"), vec![at("a", "p1"), at("b", "p2")]);
        assert_eq!(index.owned_by("job-1"), vec![at("a", "p1")]);
        // Orphaned, then adopted by another owner.
        index.apply(&pod("a", "p1", &[]));
        assert_eq!(index.owned_by("rs-1"), vec![at("b", "p2")]);
        assert!(index.owned_by("job-1").is_empty());
        index.apply(&pod("a", "p1", &["rs-2"]));
        assert_eq!(index.owned_by("rs-2"), vec![at("a", "p1")]);
        index.delete(&pod("b", "p2", &["rs-1"]));
        assert!(index.owned_by("rs-1").is_empty());
        assert!(
            !index.owned.contains_key("rs-1"),
            "an owner with nothing left is dropped"
        );
    }

    #[test]
    fn rebuild_replaces_everything() {
        let mut index = OwnerIndex::default();
        index.apply(&pod("a", "gone", &["rs-1"]));
        let listed = [pod("a", "kept", &["rs-1"])];
        index.rebuild(listed.iter());
        assert_eq!(index.owned_by("rs-1"), vec![at("a", "kept")]);
    }
}
