//! The RBAC policy decisions read, kept between requests: built from the store's RBAC objects
//! and rebuilt once one of them changed (the key is the store's last change in the RBAC API
//! group), so a request lists no RBAC object while none changes, and a change decides from the
//! very next request on.

use super::rbac::Policy;
use crate::store::Store;
use serde_json::Value;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

pub const RBAC_GROUP: &str = "rbac.authorization.k8s.io";

/// Namespaces whose policy is kept at most (beyond, the namespaced part is built again).
const NAMESPACES_KEPT: usize = 4096;

/// The cached policy of one store (cheap to clone; clones share it).
#[derive(Clone, Debug, Default)]
pub struct PolicyCache(Arc<Mutex<Option<Cached>>>);

#[derive(Debug)]
struct Cached {
    store: u64,
    /// The store's last change in the RBAC group when the objects below were read (they were
    /// read after it, so they include it).
    version: u64,
    cluster_roles: Arc<Vec<Value>>,
    cluster_role_bindings: Arc<Vec<Value>>,
    namespaces: HashMap<String, Arc<Policy>>,
}

impl PolicyCache {
    /// The RBAC objects a decision about `namespace` ("": cluster-scoped) reads, as `store`
    /// holds them now.
    pub fn policy(&self, store: &Store, namespace: &str) -> Arc<Policy> {
        let version = store.group_changed_at(RBAC_GROUP);
        let mut cached = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let current = cached
            .as_ref()
            .is_some_and(|c| c.store == store.id() && c.version == version);
        let cached = match &mut *cached {
            Some(c) if current => c,
            stale => stale.insert(Cached {
                store: store.id(),
                version,
                cluster_roles: Arc::new(store.list(RBAC_GROUP, "clusterroles", None)),
                cluster_role_bindings: Arc::new(store.list(
                    RBAC_GROUP,
                    "clusterrolebindings",
                    None,
                )),
                namespaces: HashMap::new(),
            }),
        };
        if let Some(policy) = cached.namespaces.get(namespace) {
            return policy.clone();
        }
        let namespaced = |resource: &str| {
            Arc::new(if namespace.is_empty() {
                Vec::new()
            } else {
                store.list(RBAC_GROUP, resource, Some(namespace))
            })
        };
        let policy = Arc::new(Policy {
            cluster_roles: cached.cluster_roles.clone(),
            cluster_role_bindings: cached.cluster_role_bindings.clone(),
            roles: namespaced("roles"),
            role_bindings: namespaced("rolebindings"),
        });
        if cached.namespaces.len() >= NAMESPACES_KEPT {
            cached.namespaces.clear();
        }
        cached
            .namespaces
            .insert(namespace.to_string(), policy.clone());
        policy
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::rbac::{self, Attributes, ResourceAttributes};
    use crate::auth::user::UserInfo;
    use crate::store::ObjKey;
    use serde_json::json;

    fn get_pods(namespace: &str) -> Attributes {
        Attributes::Resource(ResourceAttributes {
            verb: "get".into(),
            resource: "pods".into(),
            namespace: namespace.into(),
            ..Default::default()
        })
    }

    fn put(store: &Store, resource: &str, namespace: &str, object: Value) {
        let name = object["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        store.transact(|txn| txn.put(ObjKey::new(RBAC_GROUP, resource, namespace, &name), object));
    }

    fn remove(store: &Store, resource: &str, namespace: &str, name: &str) {
        store.transact(|txn| txn.remove(&ObjKey::new(RBAC_GROUP, resource, namespace, name)));
    }

    fn allowed(cache: &PolicyCache, store: &Store, user: &UserInfo, namespace: &str) -> bool {
        rbac::authorize(&cache.policy(store, namespace), user, &get_pods(namespace)).allowed
    }

    #[test]
    fn every_rbac_change_decides_the_next_request() {
        let store = Store::new(100);
        let cache = PolicyCache::default();
        let user = UserInfo::service_account("team", "app", "uid");
        let reader = json!({"metadata": {"name": "reader", "namespace": "team"},
            "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}]});
        let binding = |role_kind: &str| {
            json!({"metadata": {"name": "rb", "namespace": "team"},
                "roleRef": {"kind": role_kind, "name": "reader"},
                "subjects": [{"kind": "ServiceAccount", "name": "app"}]})
        };
        assert!(!allowed(&cache, &store, &user, "team"));
        put(&store, "roles", "team", reader.clone());
        assert!(
            !allowed(&cache, &store, &user, "team"),
            "a Role alone grants nothing"
        );
        put(&store, "rolebindings", "team", binding("Role"));
        assert!(
            allowed(&cache, &store, &user, "team"),
            "the binding grants at once"
        );
        assert!(
            !allowed(&cache, &store, &user, "other"),
            "in its namespace only"
        );
        let mut narrower = reader.clone();
        narrower["rules"][0]["verbs"] = json!(["list"]);
        put(&store, "roles", "team", narrower);
        assert!(
            !allowed(&cache, &store, &user, "team"),
            "a Role's new rules apply at once"
        );
        put(&store, "roles", "team", reader);
        assert!(allowed(&cache, &store, &user, "team"));
        remove(&store, "rolebindings", "team", "rb");
        assert!(
            !allowed(&cache, &store, &user, "team"),
            "a removed binding refuses at once"
        );
        put(
            &store,
            "clusterroles",
            "",
            json!({"metadata": {"name": "reader"},
            "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}]}),
        );
        put(&store, "rolebindings", "team", binding("ClusterRole"));
        assert!(
            allowed(&cache, &store, &user, "team"),
            "a new ClusterRole binds at once"
        );
        remove(&store, "clusterroles", "", "reader");
        assert!(
            !allowed(&cache, &store, &user, "team"),
            "a removed ClusterRole refuses at once"
        );
    }

    #[test]
    fn the_policy_is_read_again_only_after_an_rbac_change() {
        let store = Store::new(100);
        let cache = PolicyCache::default();
        let first = cache.policy(&store, "team");
        store.transact(|txn| {
            txn.put(
                ObjKey::new("", "configmaps", "team", "c"),
                json!({"metadata": {"name": "c"}}),
            )
        });
        assert!(
            Arc::ptr_eq(&first, &cache.policy(&store, "team")),
            "other kinds keep it"
        );
        put(
            &store,
            "clusterrolebindings",
            "",
            json!({"metadata": {"name": "b"}}),
        );
        let second = cache.policy(&store, "team");
        assert!(!Arc::ptr_eq(&first, &second));
        assert_eq!(second.cluster_role_bindings.len(), 1);
    }

    #[test]
    fn a_cache_used_with_another_store_reads_that_store() {
        let (one, two) = (Store::new(100), Store::new(100));
        let cache = PolicyCache::default();
        put(&one, "clusterroles", "", json!({"metadata": {"name": "r"}}));
        assert_eq!(cache.policy(&one, "").cluster_roles.len(), 1);
        assert_eq!(cache.policy(&two, "").cluster_roles.len(), 0);
    }
}
