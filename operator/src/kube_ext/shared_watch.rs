//! One watch per kind: a [`SharedWatch`] runs a single watcher over one kind, keeps the one
//! reflector store every controller reads, calls its synchronous listeners (the index) with
//! every watch event, and fans every touched object (applied, deleted, relisted) out to its
//! subscribers, the trigger streams of kube-runtime's shared-stream controllers
//! (`Controller::for_shared_stream`, `owns_shared_stream`, `watches_shared_stream`).
//!
//! Deleted objects are fanned out too (kube-runtime's own dispatcher forwards only applied
//! ones), so a deleted child still wakes its owner. Subscriber channels are bounded: a
//! controller that falls behind slows the watch instead of growing a queue.

use futures::channel::mpsc;
use futures::{SinkExt, Stream, StreamExt};
use kube::Resource;
use kube::runtime::reflector::Store;
use kube::runtime::reflector::store::Writer;
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, api::DynamicObject, core::ApiResource};
use serde::de::DeserializeOwned;
use std::fmt::Debug;
use std::hash::Hash;
use std::sync::Arc;

/// Objects a subscriber may lag behind before the watch waits for it.
const SUBSCRIBER_BUFFER: usize = 1024;

/// A synchronous listener of every watch event (called before the fan-out).
pub(crate) type Listener<K> = Box<dyn FnMut(&watcher::Event<K>) + Send>;

/// One watch of one kind, shared by every reader of that kind.
pub struct SharedWatch<K>
where
    K: Resource + Clone + 'static,
    K::DynamicType: Eq + Hash + Clone,
{
    kind: String,
    dyntype: K::DynamicType,
    api: Api<K>,
    config: watcher::Config,
    writer: Writer<K>,
    subscribers: Vec<mpsc::Sender<Arc<K>>>,
    listeners: Vec<Listener<K>>,
}

impl<K> SharedWatch<K>
where
    K: Resource + Clone + Debug + DeserializeOwned + Send + Sync + 'static,
    K::DynamicType: Eq + Hash + Clone + Send + Sync,
{
    /// A watch over `api` (not started; subscribe first, then [`Self::run`]).
    pub(crate) fn with_type(api: Api<K>, config: watcher::Config, dyntype: K::DynamicType) -> Self {
        SharedWatch {
            kind: K::kind(&dyntype).to_string(),
            dyntype: dyntype.clone(),
            api,
            config,
            writer: Writer::new(dyntype),
            subscribers: Vec::new(),
            listeners: Vec::new(),
        }
    }

    /// The reflector store this watch fills (ready after the first complete list).
    pub(crate) fn store(&self) -> Store<K> {
        self.writer.as_reader()
    }

    /// The kind's dynamic type (`()` for a kind known at compile time).
    pub(crate) fn dyntype(&self) -> K::DynamicType {
        self.dyntype.clone()
    }

    /// What the watch covers: the collection URL it watches and the namespace it is scoped to
    /// (`None`: every namespace).
    pub(crate) fn covers(&self) -> (String, Option<String>) {
        (
            self.api.resource_url().to_string(),
            self.api.namespace().map(str::to_string),
        )
    }

    /// Whether the watch selects its objects by label (holds only those carrying it).
    pub(crate) fn selects_by_label(&self) -> bool {
        self.config.label_selector.is_some()
    }

    /// A trigger stream of every object the watch touches.
    pub(crate) fn subscribe(&mut self) -> impl Stream<Item = Arc<K>> + Send + 'static {
        let (tx, rx) = mpsc::channel(SUBSCRIBER_BUFFER);
        self.subscribers.push(tx);
        rx
    }

    /// Adds a listener called with every event, in order, before subscribers see it.
    pub(crate) fn listen(&mut self, listener: impl FnMut(&watcher::Event<K>) + Send + 'static) {
        self.listeners.push(Box::new(listener));
    }

    /// Applies `event` to the store, then calls the listeners with it, in order (what the
    /// running watch does with every event before the fan-out; also how a benchmark fills a
    /// store without an API server).
    pub fn deliver(&mut self, event: &watcher::Event<K>) {
        self.writer.apply_watcher_event(event);
        for l in self.listeners.iter_mut() {
            l(event);
        }
    }

    /// Runs the watch (retrying with backoff) until the returned future is dropped.
    pub(crate) async fn run(mut self) {
        let mut events = watcher(self.api.clone(), self.config.clone())
            .default_backoff()
            .boxed();
        while let Some(next) = events.next().await {
            let event = match next {
                Ok(e) => e,
                Err(e) => {
                    tracing::warn!(kind = %self.kind, error = %e, "watch failed; retrying with backoff");
                    continue;
                }
            };
            self.deliver(&event);
            let touched = match event {
                watcher::Event::Apply(o)
                | watcher::Event::Delete(o)
                | watcher::Event::InitApply(o) => Arc::new(o),
                watcher::Event::Init | watcher::Event::InitDone => continue,
            };
            let mut gone = Vec::new();
            for (i, tx) in self.subscribers.iter_mut().enumerate() {
                if tx.send(touched.clone()).await.is_err() {
                    gone.push(i);
                }
            }
            for i in gone.into_iter().rev() {
                self.subscribers.swap_remove(i);
            }
        }
    }
}

impl<K> SharedWatch<K>
where
    K: Resource<DynamicType = ()> + Clone + Debug + DeserializeOwned + Send + Sync + 'static,
{
    /// A watch over a kind known at compile time.
    pub fn new(api: Api<K>, config: watcher::Config) -> Self {
        Self::with_type(api, config, ())
    }
}

impl SharedWatch<DynamicObject> {
    /// A watch over a kind known by its [`ApiResource`].
    pub(crate) fn dynamic(
        api: Api<DynamicObject>,
        config: watcher::Config,
        ar: ApiResource,
    ) -> Self {
        Self::with_type(api, config, ar)
    }
}
