//! Properties of the pure planner: every plan is sorted in the total order, and no execution
//! (Lock, then NestedLock) asks for a lock that sorts before one it holds.

use crate::support::{entries, step};
use cinder_actors::plan::{CacheView, EntryAction, MapView, compare_entries, plan};
use cinder_actors::query::*;
use cinder_actors::{Op, Query, Schema, Subquery};
use proptest::prelude::*;
use serde_json::json;
use std::cmp::Ordering;

fn view(schema: &Schema) -> MapView {
    let mut v = MapView::new();
    for b in 0..2 {
        v.insert(
            schema,
            "backend",
            &format!("b{b}"),
            json!({"name": format!("n{b}")}),
        );
    }
    for n in 0..2 {
        v.insert(schema, "node", &format!("n{n}"), json!({}));
    }
    for i in 0..4 {
        v.insert(
            schema,
            "volume",
            &format!("v{i}"),
            json!({"backend": format!("b{}", i % 2)}),
        );
    }
    v.insert(schema, "snapshot", "s0", json!({"volume": "v0"}));
    v.insert(
        schema,
        "volumePublication",
        "v1.n1",
        json!({"volume": "v1", "node": "n1"}),
    );
    v
}

fn subquery() -> impl Strategy<Value = Subquery> {
    let v = (0..4usize).prop_map(|i| format!("v{i}"));
    let b = (0..2usize).prop_map(|i| format!("b{i}"));
    let n = (0..2usize).prop_map(|i| format!("n{i}"));
    prop_oneof![
        Just(list_volumes()),
        Just(list_nodes()),
        b.clone().prop_map(|b| list_volumes_for_backend(&b)),
        v.clone().prop_map(|v| read_volume(&v)),
        v.clone().prop_map(|v| upsert_volume(&v, "")),
        v.clone().prop_map(|v| delete_volume(&v)),
        v.clone().prop_map(|v| inconsistent_read_volume(&v)),
        b.clone().prop_map(|b| read_backend(&b)),
        b.clone().prop_map(|b| upsert_backend(&b, "", "")),
        Just(read_backend("")),
        n.clone().prop_map(|n| read_node(&n)),
        n.clone().prop_map(|n| upsert_node(&n)),
        (v.clone(), n.clone()).prop_map(|(v, n)| upsert_volume_publication(&v, &n)),
        (v.clone(), n).prop_map(|(v, n)| read_volume_publication(&v, &n)),
        v.clone().prop_map(|v| upsert_snapshot(&v, "s0")),
        v.prop_map(|v| upsert_subordinate_volume("sub0", &v)),
        Just(read_snapshot("s0")),
        Just(upsert_device("d0")),
    ]
}

fn queries() -> impl Strategy<Value = Vec<Query>> {
    prop::collection::vec(
        prop::collection::vec(subquery(), 1..5).prop_map(Query),
        1..4,
    )
}

fn key(e: &cinder_actors::PlanEntry) -> (Op, &str, &str) {
    (e.op, e.kind.as_str(), e.id.as_str())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn plans_are_sorted_in_the_total_order(qs in queries()) {
        let schema = Schema::standard();
        let view = view(&schema);
        if let Ok(p) = plan(&schema, &view, &qs, None) {
            for w in p.entries.windows(2) {
                prop_assert_ne!(compare_entries(&schema, key(&w[0]), key(&w[1])), Ordering::Greater, "{:?}", p.entries);
            }
            if p.entries.iter().any(|e| e.op.is_consistent()) {
                prop_assert_eq!(p.entries[0].kind.as_str(), "root");
            }
            // Every acquisition sorts strictly after the previous one.
            let acquired: Vec<_> = p.entries.iter().zip(&p.actions)
                .filter(|(_, a)| matches!(a, EntryAction::Acquire(_))).map(|(e, _)| e).collect();
            for w in acquired.windows(2) {
                prop_assert_eq!(compare_entries(&schema, key(w[0]), key(w[1])), Ordering::Less);
            }
            prop_assert_eq!(acquired.len(), p.acquire.len());
        }
    }

    #[test]
    fn nested_execution_never_asks_for_a_lock_before_one_it_holds(outer in queries(), inner in queries()) {
        let schema = Schema::standard();
        let view = view(&schema);
        let Ok(a) = plan(&schema, &view, &outer, None) else { return Ok(()) };
        let Ok(b) = plan(&schema, &view, &inner, Some(&a.context_after)) else { return Ok(()) };
        let held: Vec<_> = a.entries.iter().zip(&a.actions)
            .filter(|(_, x)| matches!(x, EntryAction::Acquire(_))).map(|(e, _)| e).collect();
        for (e, x) in b.entries.iter().zip(&b.actions) {
            if matches!(x, EntryAction::Acquire(_)) {
                for h in &held {
                    prop_assert_eq!(compare_entries(&schema, key(h), key(e)), Ordering::Less,
                        "nested {:?} sorts before held {:?}", e, h);
                }
                prop_assert!(!a.context_after.held.contains_key(&(e.kind.clone(), e.id.clone())));
            }
        }
        prop_assert!(view.get("volume", "v0").is_some());
    }
}

#[test]
fn the_generated_queries_mostly_plan() {
    // Guards the properties above against vacuity: many generated inputs must plan successfully.
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;
    let schema = Schema::standard();
    let view = view(&schema);
    let mut runner = TestRunner::deterministic();
    let (mut ok, mut nested_ok) = (0, 0);
    for _ in 0..500 {
        let qs = queries().new_tree(&mut runner).unwrap().current();
        let inner = queries().new_tree(&mut runner).unwrap().current();
        if let Ok(p) = plan(&schema, &view, &qs, None) {
            ok += 1;
            if plan(&schema, &view, &inner, Some(&p.context_after))
                .is_ok_and(|n| !n.acquire.is_empty())
            {
                nested_ok += 1;
            }
        }
    }
    assert!(ok >= 100, "only {ok} of 500 plans succeeded");
    assert!(
        nested_ok >= 10,
        "only {nested_ok} nested plans took new locks"
    );
}

/// The generated subqueries plus blank parent reads, whose ids only a child of the query can fill.
fn subquery_with_blanks() -> impl Strategy<Value = Subquery> {
    prop_oneof![
        4 => subquery(),
        1 => Just(read_volume("")),
        1 => Just(read_backend("")),
        1 => Just(read_node("")),
    ]
}

fn queries_with_blanks() -> impl Strategy<Value = Vec<Query>> {
    prop::collection::vec(
        prop::collection::vec(subquery_with_blanks(), 1..6).prop_map(Query),
        1..4,
    )
}

/// The same queries with the subqueries of each in another order.
fn shuffled_within(qs: Vec<Query>) -> impl Strategy<Value = (Vec<Query>, Vec<Query>)> {
    let shuffles: Vec<_> = qs
        .iter()
        .map(|q| Just(q.0.clone()).prop_shuffle())
        .collect();
    (Just(qs), shuffles).prop_map(|(qs, sh)| (qs, sh.into_iter().map(Query).collect()))
}

/// What a plan does, compared across orders: the locks in acquisition order and the context
/// after, or the refusal's code.
fn outcome(p: &Result<cinder_actors::Plan, cinder_actors::LockError>) -> Result<String, String> {
    match p {
        Ok(p) => Ok(format!(
            "{:?} {:?} {:?} {}",
            p.acquisitions(),
            p.context_after.held,
            p.context_after.last_lock_held,
            p.context_after.holds_root
        )),
        Err(e) => Err(e.code().to_string()),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn plans_do_not_depend_on_the_order_of_subqueries(
        (qs, shuffled) in queries_with_blanks().prop_flat_map(shuffled_within),
        (inner, inner_shuffled) in queries_with_blanks().prop_flat_map(shuffled_within),
    ) {
        let schema = Schema::standard();
        let view = view(&schema);
        let a = plan(&schema, &view, &qs, None);
        let b = plan(&schema, &view, &shuffled, None);
        prop_assert_eq!(outcome(&a), outcome(&b), "{:?} vs {:?}", qs, shuffled);
        // The merged entries too, once the ties of identical entries are set aside.
        if let (Ok(a), Ok(b)) = (&a, &b) {
            prop_assert_eq!(entries(&a.entries), entries(&b.entries));
            // A nested phase on the context of either plans the same.
            let na = plan(&schema, &view, &inner, Some(&a.context_after));
            let nb = plan(&schema, &view, &inner_shuffled, Some(&b.context_after));
            prop_assert_eq!(outcome(&na), outcome(&nb), "{:?} vs {:?}", inner, inner_shuffled);
        }
    }

    #[test]
    fn acquisitions_do_not_depend_on_the_order_of_queries(
        (qs, shuffled) in queries_with_blanks()
            .prop_flat_map(|qs| (Just(qs.clone()), Just(qs).prop_shuffle())),
    ) {
        let schema = Schema::standard();
        let view = view(&schema);
        let a = plan(&schema, &view, &qs, None);
        let b = plan(&schema, &view, &shuffled, None);
        prop_assert_eq!(a.is_ok(), b.is_ok(), "{:?}", qs);
        if let (Ok(a), Ok(b)) = (a, b) {
            prop_assert_eq!(outcome(&Ok(a)), outcome(&Ok(b)));
        }
    }
}

fn seed_view(schema: &Schema) -> MapView {
    let mut v = MapView::new();
    v.insert(schema, "backend", "backend1", json!({"name": "b1"}));
    v.insert(schema, "node", "node1", json!({}));
    v.insert(schema, "volume", "volume1", json!({"backend": "backend1"}));
    v
}

#[test]
fn a_blank_read_filled_by_a_child_brings_its_own_parent_in_either_order() {
    let schema = Schema::standard();
    let view = seed_view(&schema);
    let forward = query([
        read_volume(""),
        upsert_volume_publication("volume1", "node1"),
    ]);
    let reversed = query([
        upsert_volume_publication("volume1", "node1"),
        read_volume(""),
    ]);
    let expected = vec![
        step("read", "root", "."),
        step("read", "backend", "backend1"),
        step("read", "node", "node1"),
        step("read", "volume", "volume1"),
        step("write", "volumePublication", "volume1.node1"),
    ];
    for q in [forward, reversed] {
        let p = plan(&schema, &view, &[q], None).unwrap();
        assert_eq!(p.acquisitions(), expected);
    }
}

#[test]
fn blank_parent_reads_are_filled_from_the_cache_in_either_order() {
    let schema = Schema::standard();
    let view = seed_view(&schema);
    let expected = vec![
        step("read", "root", "."),
        step("read", "backend", "backend1"),
        step("read", "volume", "volume1"),
        step("write", "snapshot", "snap1"),
    ];
    for q in [
        query([
            read_volume(""),
            read_backend(""),
            upsert_snapshot("volume1", "snap1"),
        ]),
        query([
            upsert_snapshot("volume1", "snap1"),
            read_backend(""),
            read_volume(""),
        ]),
        query([
            read_backend(""),
            upsert_snapshot("volume1", "snap1"),
            read_volume(""),
        ]),
    ] {
        let p = plan(&schema, &view, std::slice::from_ref(&q), None)
            .unwrap_or_else(|e| panic!("{q:?}: {e}"));
        assert_eq!(p.acquisitions(), expected, "{q:?}");
        // Both reads are the caller's (results are set from them), none synthetic.
        let callers: Vec<_> = p
            .entries
            .iter()
            .filter(|e| !e.synthetic)
            .map(|e| (e.kind.as_str(), e.id.as_str()))
            .collect();
        assert_eq!(
            callers,
            vec![
                ("backend", "backend1"),
                ("volume", "volume1"),
                ("snapshot", "snap1")
            ]
        );
    }
}
