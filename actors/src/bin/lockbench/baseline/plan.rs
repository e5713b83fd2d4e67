//! The baselines' planner, written after the reference cache: dedupe per query, synthetic parent reads,
//! id fill-in (from the caller's arguments or the cached child), merge, a synthetic root read,
//! and the total order (lists first, then rank, declared kind position, id, operation).

use std::cmp::Ordering;

use crate::engine::{EngineError, EngineResult};
use crate::query::{Kind, Op, Query};

use super::store::Store;

/// One planned subquery.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Step {
    pub op: Op,
    pub kind: Kind,
    pub id: String,
    /// Result row the step fills; `None` for the synthetic root read.
    pub query: Option<usize>,
    pub synthetic: bool,
    /// Owner filter of a list: (field of the listed value, owner id).
    pub filter: Option<(&'static str, String)>,
}

impl Step {
    /// Whether the step takes a per-resource lock.
    pub fn is_consistent(&self) -> bool {
        self.op != Op::List
    }

    /// The total order of the reference cache / design section 3.
    pub fn order(&self, other: &Step) -> Ordering {
        (other.op == Op::List)
            .cmp(&(self.op == Op::List))
            .then(self.kind.rank().cmp(&other.kind.rank()))
            .then(self.kind.position().cmp(&other.kind.position()))
            .then_with(|| self.id.cmp(&other.id))
            .then(self.op.cmp(&other.op))
            .then(self.query.cmp(&other.query))
    }
}

/// Plan `queries`; `nested` says the root read is already held.
pub fn plan(queries: &[Query], store: &Store, nested: bool) -> EngineResult<Vec<Step>> {
    let mut merged = Vec::new();
    for (index, query) in queries.iter().enumerate() {
        plan_query(index, query, store, &mut merged)?;
    }
    if !nested && merged.iter().any(Step::is_consistent) {
        merged.push(Step {
            op: Op::Read,
            kind: Kind::Root,
            id: ".".to_owned(),
            query: None,
            synthetic: true,
            filter: None,
        });
    }
    merged.sort_by(Step::order);
    Ok(merged)
}

fn plan_query(index: usize, query: &Query, store: &Store, out: &mut Vec<Step>) -> EngineResult<()> {
    let mut steps: Vec<Step> = Vec::with_capacity(query.len() + 3);
    let mut args: Vec<(Kind, String)> = Vec::new();
    for sub in query {
        let clash = steps
            .iter()
            .any(|s| s.kind == sub.kind && (s.op == Op::List) == (sub.op == Op::List));
        if clash {
            return Err(EngineError(format!(
                "duplicate operation on {} in query {index}",
                sub.kind
            )));
        }
        let filter = match &sub.owner {
            Some((owner_kind, id)) => Some((
                sub.kind.parent_field(*owner_kind).ok_or_else(|| {
                    EngineError(format!("{} has no {owner_kind} owner", sub.kind))
                })?,
                id.clone(),
            )),
            None => None,
        };
        args.extend(sub.parents.iter().cloned());
        steps.push(Step {
            op: sub.op,
            kind: sub.kind,
            id: sub.id.clone(),
            query: Some(index),
            synthetic: false,
            filter,
        });
    }
    // Synthetic parent reads for the locked subqueries, recursively (a synthetic volume read
    // brings its backend's read unless the query has the backend), as in the coordinator's planner.
    let mut next = 0;
    while next < steps.len() {
        let i = next;
        next += 1;
        if steps[i].is_consistent() {
            for &parent in steps[i].kind.parents() {
                let present = steps.iter().any(|s| s.kind == parent && s.is_consistent());
                if !present {
                    steps.push(Step {
                        op: Op::Read,
                        kind: parent,
                        id: String::new(),
                        query: Some(index),
                        synthetic: true,
                        filter: None,
                    });
                }
            }
        }
    }
    // Fill in ids from children, highest rank first so grandparents resolve through parents.
    for rank in (1..=2).rev() {
        for child in 0..steps.len() {
            let step = &steps[child];
            if !step.is_consistent() || step.kind.rank() != rank || step.id.is_empty() {
                continue;
            }
            let (child_kind, child_id) = (step.kind, step.id.clone());
            for &parent in child_kind.parents() {
                let Some(slot) = steps
                    .iter()
                    .position(|s| s.kind == parent && s.is_consistent() && s.id.is_empty())
                else {
                    continue;
                };
                let from_args = args
                    .iter()
                    .find(|(k, _)| *k == parent)
                    .map(|(_, id)| id.clone());
                let id = match from_args {
                    Some(id) => id,
                    None => cached_parent(store, child_kind, &child_id, parent)?,
                };
                steps[slot].id = id;
            }
        }
    }
    if let Some(missing) = steps.iter().find(|s| s.is_consistent() && s.id.is_empty()) {
        return Err(EngineError(format!(
            "cannot resolve the id of {} in query {index}",
            missing.kind
        )));
    }
    out.extend(steps);
    Ok(())
}

fn cached_parent(store: &Store, child: Kind, id: &str, parent: Kind) -> EngineResult<String> {
    let field = child
        .parent_field(parent)
        .ok_or_else(|| EngineError(format!("{child} has no {parent} parent")))?;
    store
        .get(child, id)?
        .and_then(|value| value.get(field).and_then(|v| v.as_str()).map(str::to_owned))
        .ok_or_else(|| {
            EngineError(format!(
                "{child} {id:?} not found (needed for its {parent})"
            ))
        })
}
