//! Watch streams: newline-delimited JSON WatchEvents (ADDED / MODIFIED / DELETED / BOOKMARK /
//! ERROR). Resumes from a resourceVersion inside the history window, answers an ERROR event with
//! a 410 Expired Status for older ones, starts with synthetic ADDED events when no version (or
//! "0") is given, honours sendInitialEvents (then a BOOKMARK with k8s.io/initial-events-end),
//! selectors (objects entering / leaving a selector appear as ADDED / DELETED), timeoutSeconds,
//! periodic bookmarks, server shutdown and injected drops. A live event is encoded once per
//! form (line type and answer format) and the bytes are shared by every watch that sends it.

use super::context::AppState;
use super::table::{self, IncludeObject};
use crate::error::ApiError;
use crate::objects::{Target, present};
use crate::store::selectors::{FieldSelector, LabelSelector};
use crate::store::{Encodings, EventType, LiveEvent, StoreEvent};
use actix_web::web::Bytes;
use serde_json::{Value, json};
use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::broadcast::error::RecvError;

/// The parameters of one watch.
pub struct WatchParams {
    /// None: start "now" with synthetic ADDED events for existing objects.
    pub since: Option<u64>,
    pub send_initial_events: bool,
    pub bookmarks: bool,
    pub timeout: Duration,
    pub labels: LabelSelector,
    pub fields: FieldSelector,
    /// Some(include) when the client asked for Table rows.
    pub table: Option<IncludeObject>,
    /// The client asked for PartialObjectMetadata.
    pub metadata_only: bool,
}

struct State {
    app: AppState,
    target: Target,
    params: WatchParams,
    pending: VecDeque<Bytes>,
    receiver: tokio::sync::broadcast::Receiver<Arc<LiveEvent>>,
    last_rv: u64,
    deadline: tokio::time::Instant,
    stop: tokio::sync::watch::Receiver<bool>,
    drops: tokio::sync::watch::Receiver<u64>,
    bookmark_at: tokio::time::Instant,
    done: bool,
    /// The answer format, telling this watch's encodings of an event from other watches' (None:
    /// Table rows, encoded per watch).
    format: Option<String>,
}

fn line(kind: &str, object: Value) -> Bytes {
    let mut v = serde_json::to_vec(&json!({"type": kind, "object": object})).unwrap_or_default();
    v.push(b'\n');
    Bytes::from(v)
}

/// The ERROR event a watch from an expired resourceVersion gets.
pub fn gone_line(message: &str) -> Bytes {
    let mut v = b"{\"type\":\"ERROR\",\"object\":".to_vec();
    v.extend(ApiError::gone(message).status_bytes());
    v.extend(b"}\n");
    Bytes::from(v)
}

impl State {
    fn matches(&self, obj: &Value) -> bool {
        let ns_ok = self.target.namespace.is_empty()
            || obj
                .get("metadata")
                .and_then(|m| m.get("namespace"))
                .and_then(Value::as_str)
                == Some(self.target.namespace.as_str());
        ns_ok && self.params.labels.matches(obj) && self.params.fields.matches(obj)
    }

    fn render(&self, obj: &Value) -> Value {
        let shown = present(&self.target.info, &self.target.version, obj.clone());
        match self.params.table {
            Some(include) => {
                let rv = shown
                    .pointer("/metadata/resourceVersion")
                    .cloned()
                    .unwrap_or(json!(""));
                table::table(
                    &self.target.info,
                    &self.target.version,
                    &[shown],
                    include,
                    json!({"resourceVersion": rv}),
                )
            }
            None if self.params.metadata_only => super::partial::object(&shown),
            None => shown,
        }
    }

    /// Queues the lines an event yields for this watch (none when filtered out), reusing the
    /// encodings other watches made of a live event.
    fn push_event(&mut self, e: &StoreEvent, shared: Option<&Encodings>) {
        if e.key.group != self.target.info.group || e.key.resource != self.target.info.resource {
            return;
        }
        let now = self.matches(&e.object);
        let kind = match e.kind {
            EventType::Added if now => Some("ADDED"),
            EventType::Deleted if now => Some("DELETED"),
            EventType::Modified => {
                let before = e.old.as_ref().is_some_and(|o| self.matches(o));
                match (before, now) {
                    (true, true) => Some("MODIFIED"),
                    (false, true) => Some("ADDED"),
                    (true, false) => Some("DELETED"),
                    (false, false) => None,
                }
            }
            _ => None,
        };
        let Some(kind) = kind else {
            return;
        };
        let encode = || line(kind, self.render(&e.object));
        let bytes = match (shared, &self.format) {
            (Some(encodings), Some(format)) => encodings.get_or_encode(kind, format, encode),
            _ => encode(),
        };
        self.pending.push_back(bytes);
    }

    fn bookmark(&self, initial_end: bool) -> Bytes {
        let mut meta = json!({"resourceVersion": self.last_rv.to_string()});
        if initial_end {
            meta["annotations"] = json!({"k8s.io/initial-events-end": "true"});
        }
        let object = if self.params.metadata_only {
            super::partial::object(&json!({"metadata": meta}))
        } else {
            json!({"kind": self.target.info.kind, "apiVersion": self.target.info.api_version(&self.target.version), "metadata": meta})
        };
        line("BOOKMARK", object)
    }
}

const BOOKMARK_EVERY: Duration = Duration::from_secs(30);

/// The body stream of a watch, or the error to answer instead.
pub fn stream(
    app: AppState,
    target: Target,
    params: WatchParams,
) -> impl futures::Stream<Item = Result<Bytes, actix_web::Error>> + 'static {
    let store = app.engine.store.clone();
    let since = if params.send_initial_events {
        None
    } else {
        params.since
    };
    let stop = app.stop.clone();
    let drops = app.faults.drop_signal();
    let mut pending = VecDeque::new();
    let (receiver, last_rv, done, backlog) =
        match store.subscribe(&target.info.group, &target.info.resource, since) {
            Ok(sub) => (sub.receiver, sub.rv, false, sub.backlog),
            Err(too_old) => {
                pending.push_back(gone_line(&format!(
                    "too old resource version: {} ({})",
                    params.since.unwrap_or_default(),
                    too_old.oldest
                )));
                (store.receiver(), 0, true, Vec::new())
            }
        };
    let deadline = tokio::time::Instant::now() + params.timeout;
    let format = match params.table {
        Some(_) => None,
        None if params.metadata_only => Some("PartialObjectMetadata".to_string()),
        None => Some(target.info.api_version(&target.version)),
    };
    let mut state = State {
        app,
        target,
        params,
        pending,
        receiver,
        last_rv,
        deadline,
        stop,
        drops,
        bookmark_at: tokio::time::Instant::now() + BOOKMARK_EVERY,
        done,
        format,
    };
    for e in &backlog {
        state.push_event(e, None);
    }
    if !state.done && state.params.send_initial_events {
        let b = state.bookmark(true);
        state.pending.push_back(b);
    }
    futures::stream::unfold(state, |mut st| async move {
        loop {
            if let Some(b) = st.pending.pop_front() {
                if !b.starts_with(b"{\"type\":\"ERROR\"") && st.app.faults.drop_watch_now() {
                    return None;
                }
                return Some((Ok(b), st));
            }
            if st.done {
                return None;
            }
            tokio::select! {
                ev = st.receiver.recv() => match ev {
                    Ok(live) => {
                        if live.event.rv > st.last_rv {
                            st.last_rv = live.event.rv;
                            st.push_event(&live.event, Some(&live.encodings));
                        }
                    }
                    // a watch that fell behind is closed; the client resumes from its last version
                    Err(RecvError::Lagged(_)) | Err(RecvError::Closed) => return None,
                },
                _ = tokio::time::sleep_until(st.deadline) => return None,
                _ = tokio::time::sleep_until(st.bookmark_at) => {
                    st.bookmark_at = tokio::time::Instant::now() + BOOKMARK_EVERY;
                    if st.params.bookmarks && st.params.table.is_none() {
                        let b = st.bookmark(false);
                        st.pending.push_back(b);
                    }
                }
                _ = st.stop.changed() => return None,
                _ = st.drops.changed() => return None,
            }
        }
    })
}
