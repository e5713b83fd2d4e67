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
//! A kind may have several watches on one cluster, each with its own label selector (on the
//! management cluster: the children by the managed-by label, the credential Secrets by the
//! credential label). A read asks every store of the kind: a get finds the object in any of
//! them, a list answers the union. [`ClusterStores::get_opt_or_live`] is for objects a
//! label-filtered watch may not admit yet (a credential Secret its user created without the
//! label): what no store holds is read from the API server, unless an unfiltered store of the
//! kind vouches for its absence.
//!
//! A label-selected list with an equality term on a label the stores index
//! ([`INDEXED_LABELS`]: the instance label every child carries, the ownership label, the
//! target-cluster registration label) is answered through the kind's [`StoreIndex`]: it costs
//! the objects that carry the value, not every object of the kind. A kind may also be indexed by
//! fields ([`ClusterStores::add_indexed`], read with [`ClusterStores::list_by_field`]). Any other
//! selector scans the kind's store.
//!
//! A store lags the API server by the time a watch event takes to arrive. Writes go to the API
//! server, and where a step must not act twice on a stale read (creating a Job, claiming a Job's
//! count, checking that the Cinder snapshot is current) it reads live.

use super::super::shared_watch::SharedWatch;
use super::index::{By, Field, StoreIndex};
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
    /// The store's objects by indexed label and field, kept from the same events.
    index: Arc<StoreIndex<K>>,
    /// Whether the watch selects by label (an object it does not hold may exist).
    filtered: bool,
}

/// The label keys every store indexes: those the operator's lists select by.
pub(crate) const INDEXED_LABELS: &[&str] = &[
    crate::names::LABEL_INSTANCE,
    crate::kube_ext::ownership::OWNER_LABEL,
    crate::names::TARGET_CLUSTER_LABEL,
];

type Entry = Arc<dyn Any + Send + Sync>;

/// An object read by [`ClusterStores::get_opt_or_live`], and where it came from.
#[derive(Clone, Debug)]
pub(crate) struct Fetched<K> {
    pub object: K,
    /// True when no store held it and the API server answered.
    pub live: bool,
}

/// The reflector stores of one cluster (see the module docs). Cheap to clone; clones share the
/// stores. An empty one answers every read from the API server.
#[derive(Clone, Default)]
pub struct ClusterStores {
    kinds: Arc<RwLock<HashMap<String, Vec<Entry>>>>,
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
    /// the watch's first complete list), indexed by [`INDEXED_LABELS`].
    pub fn add<K>(&self, watch: &mut SharedWatch<K>)
    where
        K: Resource + Clone + Debug + DeserializeOwned + Send + Sync + 'static,
        K::DynamicType: Eq + Hash + Clone + Send + Sync,
    {
        self.add_indexed(watch, Vec::new());
    }

    /// [`Self::add`], the store indexed by `fields` too (for [`Self::list_by_field`]).
    pub(crate) fn add_indexed<K>(&self, watch: &mut SharedWatch<K>, fields: Vec<Field<K>>)
    where
        K: Resource + Clone + Debug + DeserializeOwned + Send + Sync + 'static,
        K::DynamicType: Eq + Hash + Clone + Send + Sync,
    {
        let synced = Arc::new(AtomicBool::new(false));
        let index = Arc::new(StoreIndex::new(INDEXED_LABELS, fields));
        {
            let synced = synced.clone();
            let index = index.clone();
            watch.listen(move |event| {
                index.apply(event);
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
            index,
            filtered: watch.selects_by_label(),
        };
        if let Ok(mut kinds) = self.kinds.write() {
            kinds
                .entry(collection_key(&url))
                .or_default()
                .push(Arc::new(kind));
        }
    }

    /// Forgets every store (their watches stopped): reads go to the API server.
    pub(crate) fn clear(&self) {
        if let Ok(mut kinds) = self.kinds.write() {
            kinds.clear();
        }
    }

    /// The stores of `api`'s kind when every one is synced and covers `api`'s namespace
    /// (`None`: the API server answers).
    fn covering<K>(&self, api: &Api<K>) -> Option<Vec<Arc<CachedKind<K>>>>
    where
        K: Resource + Clone + Send + Sync + 'static,
        K::DynamicType: Eq + Hash + Clone + Send + Sync,
    {
        let entries = self
            .kinds
            .read()
            .ok()?
            .get(&collection_key(api.resource_url()))?
            .clone();
        entries
            .into_iter()
            .map(|entry| {
                let kind = entry.downcast::<CachedKind<K>>().ok()?;
                if !kind.synced.load(Ordering::Acquire) {
                    return None;
                }
                match (&kind.namespace, api.namespace()) {
                    (None, _) => Some(kind),
                    (Some(scope), Some(ns)) if scope == ns => Some(kind),
                    _ => None,
                }
            })
            .collect()
    }

    /// The object `name` of `api` if a store of `kinds` holds it.
    fn cached<K>(kinds: &[Arc<CachedKind<K>>], api: &Api<K>, name: &str) -> Option<K>
    where
        K: Resource + Clone + 'static,
        K::DynamicType: Eq + Hash + Clone,
    {
        kinds.iter().find_map(|kind| {
            let mut key = ObjectRef::new_with(name, kind.dyntype.clone());
            if let Some(ns) = api.namespace() {
                key = key.within(ns);
            }
            kind.store.get(&key).map(|found| found.as_ref().clone())
        })
    }

    /// `api.get_opt(name)`, answered from the stores when they cover the object (module docs).
    pub(crate) async fn get_opt<K>(
        &self,
        api: &Api<K>,
        name: &str,
    ) -> Result<Option<K>, kube::Error>
    where
        K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
        K::DynamicType: Eq + Hash + Clone + Send + Sync,
    {
        let Some(kinds) = self.covering(api) else {
            return api.get_opt(name).await;
        };
        // Filtered watches miss unlabelled objects; their absence is trusted all the same.
        Ok(Self::cached(&kinds, api, name))
    }

    /// `api.get_opt(name)` for an object the kind's label-filtered watches may not admit yet:
    /// from a store that holds it, else from the API server unless a store of the kind watches
    /// without a label selector (then its absence is trusted). Says whether the API server
    /// answered.
    pub(crate) async fn get_opt_or_live<K>(
        &self,
        api: &Api<K>,
        name: &str,
    ) -> Result<Option<Fetched<K>>, kube::Error>
    where
        K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
        K::DynamicType: Eq + Hash + Clone + Send + Sync,
    {
        let kinds = self.covering(api).unwrap_or_default();
        if let Some(object) = Self::cached(&kinds, api, name) {
            return Ok(Some(Fetched {
                object,
                live: false,
            }));
        }
        if kinds.iter().any(|k| !k.filtered) {
            return Ok(None);
        }
        Ok(api
            .get_opt(name)
            .await?
            .map(|object| Fetched { object, live: true }))
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
        let cached = self.covering(api).and_then(|kinds| {
            if params.field_selector.is_some() || params.limit.is_some() {
                return None;
            }
            let wanted = parse_selector(params.label_selector.as_deref().unwrap_or_default())?;
            Some((kinds, wanted))
        });
        let Some((kinds, wanted)) = cached else {
            let mut items = api.list(params).await?.items;
            items.retain(|o| keep(o));
            return Ok(items);
        };
        let ns = api.namespace();
        let matches = |o: &K| selector_matches(&wanted, o.labels()) && keep(o);
        let mut out = Vec::new();
        for kind in &kinds {
            let terms: Vec<(By, &str)> = wanted
                .iter()
                .filter_map(|(k, v)| Some((kind.index.label(k)?, v.as_deref()?)))
                .collect();
            if let Some(ns) = ns
                && let Some(names) = kind.index.candidates(ns, &terms)
            {
                out.extend(kind.indexed(ns, names, matches));
                continue;
            }
            out.extend(
                kind.store
                    .state_filter(|o| {
                        (ns.is_none() || o.namespace().as_deref() == ns) && matches(o)
                    })
                    .into_iter()
                    .map(|o| o.as_ref().clone()),
            );
        }
        Ok(deduplicated(out, kinds.len()))
    }

    /// The objects of `api`'s kind in its namespace whose `field` is `value`: through the
    /// store's index when it covers `api` and indexes `field`, otherwise a scan of the store or
    /// a list from the API server.
    pub(crate) async fn list_by_field<K>(
        &self,
        api: &Api<K>,
        field: Field<K>,
        value: &str,
    ) -> Result<Vec<K>, kube::Error>
    where
        K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
        K::DynamicType: Eq + Hash + Clone + Send + Sync,
    {
        let matches = |o: &K| (field.value)(o).as_deref() == Some(value);
        if let (Some(kinds), Some(ns)) = (self.covering(api), api.namespace()) {
            let by = [(By::Field(field.name), value)];
            let found: Option<Vec<Vec<K>>> = kinds
                .iter()
                .map(|kind| Some(kind.indexed(ns, kind.index.candidates(ns, &by)?, matches)))
                .collect();
            if let Some(found) = found {
                let stores = kinds.len();
                return Ok(deduplicated(found.into_iter().flatten().collect(), stores));
            }
        }
        self.list_where(api, &ListParams::default(), matches).await
    }
}

/// `objects` without repeats of a `(namespace, name)` (an object two watches of its kind both
/// admit is listed by both); nothing to do when they came from one store.
fn deduplicated<K: Resource>(mut objects: Vec<K>, stores: usize) -> Vec<K> {
    if stores > 1 {
        let mut seen = std::collections::HashSet::new();
        objects.retain(|o| seen.insert((o.meta().namespace.clone(), o.meta().name.clone())));
    }
    objects
}

impl<K> CachedKind<K>
where
    K: Resource + Clone + 'static,
    K::DynamicType: Eq + Hash + Clone,
{
    /// The objects named `names` in `ns` that the store holds and `matches` accepts (the index
    /// names candidates; the store's object decides).
    fn indexed(&self, ns: &str, names: Vec<String>, matches: impl Fn(&K) -> bool) -> Vec<K> {
        names
            .into_iter()
            .filter_map(|name| {
                self.store
                    .get(&ObjectRef::new_with(&name, self.dyntype.clone()).within(ns))
            })
            .filter(|o| matches(o))
            .map(|o| o.as_ref().clone())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::Client;

    fn cm(name: &str, labels: &[(&str, &str)]) -> ConfigMap {
        super::super::index::tests::cm("ns", name, labels)
    }

    fn names(items: Vec<ConfigMap>) -> Vec<String> {
        let mut out: Vec<String> = items.into_iter().map(|o| o.name_any()).collect();
        out.sort();
        out
    }

    /// A list through the index answers what a scan of the store answers, after applies that
    /// move an object between instances, a delete and a relist; an uncovered namespace or a
    /// store that never synced goes to the API server (a client that cannot connect fails).
    #[tokio::test]
    async fn an_indexed_list_answers_as_a_scan_does() -> anyhow::Result<()> {
        use crate::names::{LABEL_COMPONENT, LABEL_INSTANCE};
        let client = Client::try_from(kube::Config::new("http://127.0.0.1:1".parse()?))?;
        let api: Api<ConfigMap> = Api::namespaced(client.clone(), "ns");
        let mut watch = SharedWatch::new(api.clone(), watcher::Config::default());
        let stores = ClusterStores::default();
        stores.add(&mut watch);
        assert!(stores.list(&api, &ListParams::default()).await.is_err());
        watch.deliver(&watcher::Event::Init);
        for (name, c, component) in [
            ("a", "c1", "api"),
            ("b", "c1", "volume"),
            ("x", "c2", "api"),
        ] {
            let labels = [(LABEL_INSTANCE, c), (LABEL_COMPONENT, component)];
            watch.deliver(&watcher::Event::InitApply(cm(name, &labels)));
        }
        watch.deliver(&watcher::Event::InitDone);
        // `b` moves to c2, `a` goes, `y` comes.
        let moved = [(LABEL_INSTANCE, "c2"), (LABEL_COMPONENT, "volume")];
        watch.deliver(&watcher::Event::Apply(cm("b", &moved)));
        watch.deliver(&watcher::Event::Delete(cm("a", &[(LABEL_INSTANCE, "c1")])));
        watch.deliver(&watcher::Event::Apply(cm("y", &[(LABEL_INSTANCE, "c1")])));
        let check = |expected: &[&str]| expected.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        for (selector, expected) in [
            (format!("{LABEL_INSTANCE}=c1"), check(&["y"])),
            (format!("{LABEL_INSTANCE}=c2"), check(&["b", "x"])),
            (
                format!("{LABEL_INSTANCE}=c2,{LABEL_COMPONENT}=volume"),
                check(&["b"]),
            ),
            (format!("{LABEL_INSTANCE}=c3"), check(&[])),
            (format!("{LABEL_COMPONENT}=api"), check(&["x"])),
        ] {
            let params = ListParams::default().labels(&selector);
            let indexed = names(stores.list(&api, &params).await?);
            let scanned = names(
                stores
                    .list_where(&api, &ListParams::default(), |o| {
                        selector_matches(&parse_selector(&selector).unwrap_or_default(), o.labels())
                    })
                    .await?,
            );
            assert_eq!(indexed, expected, "{selector}");
            assert_eq!(scanned, expected, "{selector} (scan)");
        }
        // A relist that drops `y` leaves no stale entry.
        watch.deliver(&watcher::Event::Init);
        watch.deliver(&watcher::Event::InitApply(cm(
            "x",
            &[(LABEL_INSTANCE, "c1")],
        )));
        watch.deliver(&watcher::Event::InitDone);
        let params = ListParams::default().labels(&format!("{LABEL_INSTANCE}=c1"));
        assert_eq!(names(stores.list(&api, &params).await?), ["x"]);
        let params = ListParams::default().labels(&format!("{LABEL_INSTANCE}=c2"));
        assert!(stores.list(&api, &params).await?.is_empty());
        // Another namespace is not covered: the API server is asked (and cannot answer).
        let other: Api<ConfigMap> = Api::namespaced(client, "other");
        assert!(stores.list(&other, &params).await.is_err());
        Ok(())
    }

    /// Two watches of one kind (the operator's objects by one label, credentials by another):
    /// a get finds an object in either store, a list answers their union once per object, and
    /// `get_opt_or_live` asks the API server (which cannot answer here) only for what neither
    /// holds, unless an unfiltered store vouches for the absence.
    #[tokio::test]
    async fn two_label_filtered_watches_of_a_kind_answer_together() -> anyhow::Result<()> {
        use crate::names::LABEL_INSTANCE;
        let client = Client::try_from(kube::Config::new("http://127.0.0.1:1".parse()?))?;
        let api: Api<ConfigMap> = Api::namespaced(client.clone(), "ns");
        let mut owned = SharedWatch::new(api.clone(), watcher::Config::default().labels("own"));
        let mut credentials =
            SharedWatch::new(api.clone(), watcher::Config::default().labels("cred"));
        let stores = ClusterStores::default();
        stores.add(&mut owned);
        stores.add(&mut credentials);
        let both = cm(
            "both",
            &[("own", "1"), ("cred", "1"), (LABEL_INSTANCE, "c1")],
        );
        for (watch, objects) in [
            (
                &mut owned,
                vec![
                    cm("a", &[("own", "1"), (LABEL_INSTANCE, "c1")]),
                    both.clone(),
                ],
            ),
            (&mut credentials, vec![cm("k", &[("cred", "1")]), both]),
        ] {
            watch.deliver(&watcher::Event::Init);
            // One store synced and the other not: the API server is asked.
            assert!(stores.get_opt(&api, "a").await.is_err());
            for o in objects {
                watch.deliver(&watcher::Event::InitApply(o));
            }
            watch.deliver(&watcher::Event::InitDone);
        }
        assert!(stores.get_opt(&api, "a").await?.is_some());
        assert!(stores.get_opt(&api, "k").await?.is_some());
        assert!(stores.get_opt(&api, "nobody").await?.is_none());
        let all = names(stores.list(&api, &ListParams::default()).await?);
        assert_eq!(all, ["a", "both", "k"]);
        let params = ListParams::default().labels(&format!("{LABEL_INSTANCE}=c1"));
        assert_eq!(names(stores.list(&api, &params).await?), ["a", "both"]);
        let held = stores.get_opt_or_live(&api, "k").await?.expect("held");
        assert!(!held.live);
        assert!(stores.get_opt_or_live(&api, "nobody").await.is_err());
        // An unfiltered watch of the kind holds every object: absence is trusted.
        let mut everything = SharedWatch::new(api.clone(), watcher::Config::default());
        stores.add(&mut everything);
        everything.deliver(&watcher::Event::Init);
        everything.deliver(&watcher::Event::InitDone);
        assert!(stores.get_opt_or_live(&api, "nobody").await?.is_none());
        Ok(())
    }

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
