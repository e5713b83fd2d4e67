//! [`StoreIndex`]: the names of one reflector store's objects by namespace and indexed value,
//! so that a list selecting by an indexed label (or field) costs the objects it matches, not
//! the whole kind. It is kept from the same watch events as the store, applied the same way:
//! an applied object is filed anew (its old values removed), a deleted one removed, and a
//! relist (`Init` .. `InitDone`) builds a fresh index that replaces the old one at `InitDone`,
//! as the store swaps in its relisted objects. The index names candidates only: a read checks
//! each against the object the store holds.

use kube::ResourceExt;
use kube::runtime::watcher;
use std::collections::{BTreeSet, HashMap};
use std::sync::{PoisonError, RwLock};

/// A value an object is looked up by, other than a label: a field's name and how to read it
/// (like controller-runtime's field indexes).
pub(crate) struct Field<K> {
    /// The field's path, as callers name it (`spec.cinderRef.name`).
    pub name: &'static str,
    /// The field's value of an object (`None`: not filed under this field).
    pub value: fn(&K) -> Option<String>,
}

impl<K> Clone for Field<K> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<K> Copy for Field<K> {}

/// What a value is indexed under: a label key or a field name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum By {
    Label(&'static str),
    Field(&'static str),
}

/// `(namespace, what, value)`; the namespace is empty for a cluster-scoped object.
type Posting = (String, By, String);

/// One generation of the index: the names under each posting, and what each object
/// (`(namespace, name)`) is filed under, to unfile it when it changes or goes.
#[derive(Default)]
struct Postings {
    names: HashMap<Posting, BTreeSet<String>>,
    filed: HashMap<(String, String), Vec<(By, String)>>,
}

impl Postings {
    fn remove(&mut self, ns: &str, name: &str) {
        let Some(old) = self.filed.remove(&(ns.to_string(), name.to_string())) else {
            return;
        };
        for (by, value) in old {
            let posting = (ns.to_string(), by, value);
            if let Some(names) = self.names.get_mut(&posting) {
                names.remove(name);
                if names.is_empty() {
                    self.names.remove(&posting);
                }
            }
        }
    }

    fn insert(&mut self, ns: String, name: String, values: Vec<(By, String)>) {
        self.remove(&ns, &name);
        if values.is_empty() {
            return;
        }
        for (by, value) in &values {
            self.names
                .entry((ns.clone(), *by, value.clone()))
                .or_default()
                .insert(name.clone());
        }
        self.filed.insert((ns, name), values);
    }
}

/// The live index and, during a relist, the one being built.
#[derive(Default)]
struct Generations {
    live: Postings,
    relisting: Option<Postings>,
}

/// The index of one store over the label keys and fields it was built with (see the module
/// docs). Written by the store's watch, read by the cached reads.
pub(crate) struct StoreIndex<K> {
    labels: &'static [&'static str],
    fields: Vec<Field<K>>,
    postings: RwLock<Generations>,
}

impl<K: ResourceExt> StoreIndex<K> {
    /// An empty index over the label keys `labels` and the fields `fields`.
    pub(crate) fn new(labels: &'static [&'static str], fields: Vec<Field<K>>) -> Self {
        StoreIndex {
            labels,
            fields,
            postings: RwLock::default(),
        }
    }

    /// What `o` is filed under.
    fn values(&self, o: &K) -> Vec<(By, String)> {
        let labels = o.labels();
        let by_label = self
            .labels
            .iter()
            .copied()
            .filter_map(|k| Some((By::Label(k), labels.get(k)?.clone())));
        let by_field = self
            .fields
            .iter()
            .filter_map(|f| Some((By::Field(f.name), (f.value)(o)?)));
        by_label.chain(by_field).collect()
    }

    /// Applies one watch event (after the store applied it).
    pub(crate) fn apply(&self, event: &watcher::Event<K>) {
        let mut postings = self
            .postings
            .write()
            .unwrap_or_else(PoisonError::into_inner);
        let key = |o: &K| (o.namespace().unwrap_or_default(), o.name_any());
        match event {
            watcher::Event::Apply(o) => {
                let (ns, name) = key(o);
                postings.live.insert(ns, name, self.values(o));
            }
            watcher::Event::Delete(o) => {
                let (ns, name) = key(o);
                postings.live.remove(&ns, &name);
            }
            watcher::Event::Init => postings.relisting = Some(Postings::default()),
            watcher::Event::InitApply(o) => {
                let (ns, name) = key(o);
                postings
                    .relisting
                    .get_or_insert_with(Postings::default)
                    .insert(ns, name, self.values(o));
            }
            watcher::Event::InitDone => {
                if let Some(relisted) = postings.relisting.take() {
                    postings.live = relisted;
                }
            }
        }
    }

    /// The term of label `key` when the index covers it.
    pub(crate) fn label(&self, key: &str) -> Option<By> {
        self.labels
            .iter()
            .copied()
            .find(|k| *k == key)
            .map(By::Label)
    }

    /// Whether the index files objects under `by`.
    pub(crate) fn covers(&self, by: By) -> bool {
        match by {
            By::Label(k) => self.labels.contains(&k),
            By::Field(f) => self.fields.iter().any(|x| x.name == f),
        }
    }

    /// The names in `namespace` filed under every one of `terms` it covers, from the fewest
    /// candidates of any one term (a superset of the matches: callers check each object);
    /// `None` when it covers none of `terms`.
    pub(crate) fn candidates(&self, namespace: &str, terms: &[(By, &str)]) -> Option<Vec<String>> {
        let postings = self.postings.read().unwrap_or_else(PoisonError::into_inner);
        let mut fewest: Option<&BTreeSet<String>> = None;
        for (by, value) in terms.iter().filter(|(by, _)| self.covers(*by)) {
            let posting = (namespace.to_string(), *by, (*value).to_string());
            let Some(names) = postings.live.names.get(&posting) else {
                return Some(Vec::new());
            };
            if fewest.is_none_or(|f| names.len() < f.len()) {
                fewest = Some(names);
            }
        }
        fewest.map(|names| names.iter().cloned().collect())
    }

    /// How many objects the live index files and how many postings it holds (for tests).
    #[cfg(test)]
    fn size(&self) -> (usize, usize) {
        let postings = self.postings.read().unwrap_or_else(PoisonError::into_inner);
        (postings.live.filed.len(), postings.live.names.len())
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::api::ObjectMeta;
    use watcher::Event::{self, Apply, Delete, Init, InitApply, InitDone};

    const LABELS: &[&str] = &["instance", "owner"];

    /// A ConfigMap `ns/name` carrying `labels` (shared with the stores' tests).
    pub(crate) fn cm(ns: &str, name: &str, labels: &[(&str, &str)]) -> ConfigMap {
        ConfigMap {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some(ns.into()),
                labels: Some(
                    labels
                        .iter()
                        .map(|(k, v)| ((*k).to_string(), (*v).to_string()))
                        .collect(),
                ),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    /// The field a test indexes: the ConfigMap's `data.parent`.
    fn parent(o: &ConfigMap) -> Option<String> {
        o.data.as_ref()?.get("parent").cloned()
    }

    fn index() -> StoreIndex<ConfigMap> {
        StoreIndex::new(
            LABELS,
            vec![Field {
                name: "data.parent",
                value: parent,
            }],
        )
    }

    fn names(index: &StoreIndex<ConfigMap>, ns: &str, terms: &[(By, &str)]) -> Vec<String> {
        index.candidates(ns, terms).unwrap_or_default()
    }

    /// A ConfigMap `a/name` labelled `instance={cinder}`.
    fn instance(name: &str, cinder: &str) -> ConfigMap {
        cm("a", name, &[("instance", cinder)])
    }

    /// The names the index files in namespace `a` under `instance={cinder}`.
    fn of(index: &StoreIndex<ConfigMap>, cinder: &str) -> Vec<String> {
        names(index, "a", &[(By::Label("instance"), cinder)])
    }

    /// An index that has seen `events`, in order.
    fn index_after(events: impl IntoIterator<Item = Event<ConfigMap>>) -> StoreIndex<ConfigMap> {
        let index = index();
        for e in events {
            index.apply(&e);
        }
        index
    }

    #[test]
    fn an_applied_object_is_found_by_each_indexed_label_in_its_namespace_only() {
        let x = cm(
            "a",
            "x",
            &[("instance", "c1"), ("owner", "a.c1"), ("other", "v")],
        );
        let z = cm("b", "z", &[("instance", "c1")]);
        let index = index_after([Apply(x), Apply(instance("y", "c2")), Apply(z)]);
        assert_eq!(of(&index, "c1"), ["x"]);
        assert_eq!(names(&index, "b", &[(By::Label("instance"), "c1")]), ["z"]);
        assert_eq!(names(&index, "a", &[(By::Label("owner"), "a.c1")]), ["x"]);
        assert!(of(&index, "c3").is_empty());
        // A label the index does not cover cannot answer; alongside a covered one it is ignored.
        assert_eq!(index.candidates("a", &[(By::Label("other"), "v")]), None);
        let other_and_c2 = [(By::Label("other"), "v"), (By::Label("instance"), "c2")];
        assert_eq!(names(&index, "a", &other_and_c2), ["y"]);
        // Two covered terms: a value nobody carries answers none.
        let c1_and_nobody = [
            (By::Label("instance"), "c1"),
            (By::Label("owner"), "nobody"),
        ];
        assert!(names(&index, "a", &c1_and_nobody).is_empty());
    }

    #[test]
    fn an_update_that_changes_labels_leaves_no_stale_posting() {
        let index = index_after([Apply(instance("x", "c1")), Apply(instance("x", "c2"))]);
        assert!(of(&index, "c1").is_empty());
        assert_eq!(of(&index, "c2"), ["x"]);
        index.apply(&Apply(cm("a", "x", &[])));
        assert!(of(&index, "c2").is_empty());
        assert_eq!(index.size(), (0, 0));
    }

    #[test]
    fn a_deleted_object_leaves_no_posting() {
        let (x, y) = (instance("x", "c1"), instance("y", "c1"));
        let index = index_after([Apply(x.clone()), Apply(y.clone()), Delete(x)]);
        assert_eq!(of(&index, "c1"), ["y"]);
        index.apply(&Delete(y.clone()));
        assert_eq!(index.size(), (0, 0));
        // Deleting what the index never held changes nothing.
        index.apply(&Delete(y));
        assert_eq!(index.size(), (0, 0));
    }

    #[test]
    fn a_relist_replaces_the_index_at_its_end() {
        let index = index_after([
            Apply(instance("gone", "c1")),
            Apply(instance("kept", "c1")),
            Init,
            InitApply(instance("kept", "c2")),
            InitApply(instance("new", "c2")),
        ]);
        // Until the relist completes, the index answers as the store does: from the old list.
        assert_eq!(of(&index, "c1"), ["gone", "kept"]);
        index.apply(&InitDone);
        assert!(of(&index, "c1").is_empty());
        assert_eq!(of(&index, "c2"), ["kept", "new"]);
        assert_eq!(index.size(), (2, 1));
    }

    #[test]
    fn a_field_is_indexed_like_a_label() {
        let index = index();
        let mut x = cm("a", "x", &[]);
        x.data = Some([("parent".to_string(), "c1".to_string())].into());
        index.apply(&Apply(x.clone()));
        assert_eq!(
            names(&index, "a", &[(By::Field("data.parent"), "c1")]),
            ["x"]
        );
        x.data = None;
        index.apply(&Apply(x));
        assert!(names(&index, "a", &[(By::Field("data.parent"), "c1")]).is_empty());
        assert!(index.covers(By::Field("data.parent")));
        assert!(!index.covers(By::Field("spec.other")));
        assert_eq!(index.size(), (0, 0));
    }
}
