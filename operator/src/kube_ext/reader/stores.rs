//! [`ClusterStores`]: the reflector stores of one cluster's shared watches, by kind, and the
//! cached reads they answer ([`ClusterStores::get_opt`], [`ClusterStores::list`]), like
//! controller-runtime's cached client.
//!
//! A read is answered from the store when the kind is watched on that cluster, the watch has
//! completed its first list, and the watch covers the request (its namespace, and for a
//! label-filtered watch, the objects it admits). Otherwise it goes to the API server.
//!
//! Absence is trusted once the store is synced: a synced store holds every object its watch
//! covers, so a name it does not hold is answered `None` without a request (a steady pass does
//! not GET the optional children the spec does not ask for). A label-filtered watch (the
//! children on a target cluster, by the ownership label) sees only objects carrying that label:
//! an object of the same name without it reads as absent (creating it is answered 409 by the
//! API server), and a list from such a store holds the labelled objects only (every child the
//! operator writes there carries the label).
//!
//! A store lags the API server by the time a watch event takes to arrive. Writes go to the API
//! server, and where a step must not act twice on a stale read (creating a Job, claiming a Job's
//! count, checking that the Cinder snapshot is current) it reads live.

use super::super::shared_watch::SharedWatch;
use kube::api::ListParams;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::watcher;
use kube::{Api, Resource, ResourceExt};
use serde::de::DeserializeOwned;
use std::any::Any;
use std::collections::{BTreeMap, HashMap};
use std::fmt::Debug;
use std::hash::Hash;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};

/// The store of one watched kind with what it covers.
struct CachedKind<K>
where
    K: Resource + Clone + 'static,
    K::DynamicType: Eq + Hash + Clone,
{
    store: Store<K>,
    dyntype: K::DynamicType,
    /// True once the watch has delivered its first complete list.
    synced: Arc<AtomicBool>,
    /// The namespace the watch is scoped to (`None`: every namespace).
    namespace: Option<String>,
}

type Entry = Arc<dyn Any + Send + Sync>;

/// The reflector stores of one cluster (see the module docs). Cheap to clone; clones share the
/// stores. An empty one answers every read from the API server.
#[derive(Clone, Default)]
pub struct ClusterStores {
    kinds: Arc<RwLock<HashMap<String, Entry>>>,
}

impl std::fmt::Debug for ClusterStores {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kinds = self.kinds.read().map(|k| k.len()).unwrap_or_default();
        f.debug_struct("ClusterStores")
            .field("kinds", &kinds)
            .finish()
    }
}

/// The path of a kind's collection with any namespace segment removed
/// (`/api/v1/namespaces/x/secrets` → `/api/v1/secrets`): the same for every namespace.
fn collection_key(url: &str) -> String {
    let segments: Vec<&str> = url.split('/').collect();
    let mut out = Vec::with_capacity(segments.len());
    let mut i = 0;
    while i < segments.len() {
        if segments[i] == "namespaces" && i + 2 < segments.len() {
            i += 2;
            continue;
        }
        out.push(segments[i]);
        i += 1;
    }
    out.join("/")
}

/// A label selector of equality terms (`k=v`, `k==v`) and existence terms (`k`) as a map from
/// key to the value required (`None`: any value); `None` for anything else (`!=`, `in`, `!k`).
fn parse_selector(selector: &str) -> Option<BTreeMap<String, Option<String>>> {
    let mut terms = BTreeMap::new();
    for term in selector.split(',').map(str::trim).filter(|t| !t.is_empty()) {
        if term.contains(['!', '(', ' ']) {
            return None;
        }
        match term.split_once('=') {
            Some((k, v)) => {
                let v = v.strip_prefix('=').unwrap_or(v);
                terms.insert(k.to_string(), Some(v.to_string()));
            }
            None => {
                terms.insert(term.to_string(), None);
            }
        }
    }
    Some(terms)
}

fn selector_matches(
    selector: &BTreeMap<String, Option<String>>,
    labels: &BTreeMap<String, String>,
) -> bool {
    selector.iter().all(|(k, v)| match v {
        Some(v) => labels.get(k) == Some(v),
        None => labels.contains_key(k),
    })
}

impl ClusterStores {
    /// Adds the store of `watch` (call before the watch runs: the store counts as synced from
    /// the watch's first complete list).
    pub fn add<K>(&self, watch: &mut SharedWatch<K>)
    where
        K: Resource + Clone + Debug + DeserializeOwned + Send + Sync + 'static,
        K::DynamicType: Eq + Hash + Clone + Send + Sync,
    {
        let synced = Arc::new(AtomicBool::new(false));
        {
            let synced = synced.clone();
            watch.listen(move |event| {
                if matches!(event, watcher::Event::InitDone) {
                    synced.store(true, Ordering::Release);
                }
            });
        }
        let (url, namespace) = watch.covers();
        let kind = CachedKind {
            store: watch.store(),
            dyntype: watch.dyntype(),
            synced,
            namespace,
        };
        if let Ok(mut kinds) = self.kinds.write() {
            kinds.insert(collection_key(&url), Arc::new(kind));
        }
    }

    /// Forgets every store (their watches stopped): reads go to the API server.
    pub fn clear(&self) {
        if let Ok(mut kinds) = self.kinds.write() {
            kinds.clear();
        }
    }

    /// The synced store of `api`'s kind when its watch covers `api`'s namespace.
    fn covering<K>(&self, api: &Api<K>) -> Option<Arc<CachedKind<K>>>
    where
        K: Resource + Clone + Send + Sync + 'static,
        K::DynamicType: Eq + Hash + Clone + Send + Sync,
    {
        let entry = self
            .kinds
            .read()
            .ok()?
            .get(&collection_key(api.resource_url()))?
            .clone();
        let kind = entry.downcast::<CachedKind<K>>().ok()?;
        if !kind.synced.load(Ordering::Acquire) {
            return None;
        }
        match (&kind.namespace, api.namespace()) {
            (None, _) => Some(kind),
            (Some(scope), Some(ns)) if scope == ns => Some(kind),
            _ => None,
        }
    }

    /// `api.get_opt(name)`, answered from the store when it covers the object (module docs).
    pub async fn get_opt<K>(&self, api: &Api<K>, name: &str) -> Result<Option<K>, kube::Error>
    where
        K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
        K::DynamicType: Eq + Hash + Clone + Send + Sync,
    {
        let Some(kind) = self.covering(api) else {
            return api.get_opt(name).await;
        };
        let mut key = ObjectRef::new_with(name, kind.dyntype.clone());
        if let Some(ns) = api.namespace() {
            key = key.within(ns);
        }
        match kind.store.get(&key) {
            Some(found) => Ok(Some(found.as_ref().clone())),
            // Filtered watches miss unlabelled objects; their absence is trusted all the same.
            None => Ok(None),
        }
    }

    /// `api.list(params)` of the items only, answered from the store when the params select by
    /// labels only, with equality and existence terms (module docs: a label-filtered watch
    /// lists the objects carrying its label).
    pub async fn list<K>(&self, api: &Api<K>, params: &ListParams) -> Result<Vec<K>, kube::Error>
    where
        K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
        K::DynamicType: Eq + Hash + Clone + Send + Sync,
    {
        self.list_where(api, params, |_| true).await
    }

    /// [`Self::list`] of the items `keep` selects, tested before they are copied out of the
    /// store (a pass that wants a few objects of a fleet-wide kind copies only those).
    pub async fn list_where<K>(
        &self,
        api: &Api<K>,
        params: &ListParams,
        keep: impl Fn(&K) -> bool,
    ) -> Result<Vec<K>, kube::Error>
    where
        K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
        K::DynamicType: Eq + Hash + Clone + Send + Sync,
    {
        let cached = self.covering(api).and_then(|kind| {
            if params.field_selector.is_some() || params.limit.is_some() {
                return None;
            }
            let wanted = parse_selector(params.label_selector.as_deref().unwrap_or_default())?;
            Some((kind, wanted))
        });
        let Some((kind, wanted)) = cached else {
            let mut items = api.list(params).await?.items;
            items.retain(|o| keep(o));
            return Ok(items);
        };
        let ns = api.namespace();
        Ok(kind
            .store
            .state_filter(|o| {
                (ns.is_none() || o.namespace().as_deref() == ns)
                    && selector_matches(&wanted, o.labels())
                    && keep(o)
            })
            .into_iter()
            .map(|o| o.as_ref().clone())
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_collection_key_drops_the_namespace() {
        assert_eq!(
            collection_key("/api/v1/namespaces/x/secrets"),
            "/api/v1/secrets"
        );
        assert_eq!(collection_key("/api/v1/secrets"), "/api/v1/secrets");
        assert_eq!(collection_key("/api/v1/namespaces"), "/api/v1/namespaces");
        assert_eq!(
            collection_key("/apis/k8s.mariadb.com/v1alpha1/namespaces/db/databases"),
            "/apis/k8s.mariadb.com/v1alpha1/databases"
        );
    }

    #[test]
    fn equality_and_existence_selectors_parse_and_others_do_not() {
        let s = parse_selector("a=1,b==2,c").expect("parses");
        assert_eq!(s.get("a"), Some(&Some("1".to_string())));
        assert_eq!(s.get("b"), Some(&Some("2".to_string())));
        assert_eq!(s.get("c"), Some(&None));
        assert!(parse_selector("a!=1").is_none());
        assert!(parse_selector("a in (1,2)").is_none());
        assert!(parse_selector("!a").is_none());
        assert_eq!(parse_selector(""), Some(BTreeMap::new()));
        let labels: BTreeMap<String, String> =
            [("a".into(), "1".into()), ("b".into(), "2".into())].into();
        assert!(selector_matches(&parse_selector("a=1").unwrap(), &labels));
        assert!(!selector_matches(&parse_selector("a=2").unwrap(), &labels));
        assert!(!selector_matches(&parse_selector("c").unwrap(), &labels));
    }
}
