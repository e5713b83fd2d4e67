//! What a step actor remembers between runs, per Cinder: the keys it acted on once (a Job UID
//! counted in the metrics, an event published for a Job) and results it reuses for a while
//! (the HealthCheck probe's condition), and the device locks another replica refused it lately
//! (so the retry asks at a raised priority). [`Memory`] is the plain state the step actor owns;
//! a run reaches it through [`StepMemory`] ([`crate::pipeline::StepContext::memory`]), which
//! messages the actor, so nothing else holds it.
//! Everything of a Cinder is dropped when the Cinder goes ([`Memory::forget`]); while it lives,
//! at most [`SEEN_PER_CINDER`] keys are kept (the oldest go first: they name Jobs long gone,
//! and the durable marker on a Job still answers for it), so a Cinder whose CronJob spawns a Job
//! a day does not grow its memory forever. A key given back ([`Memory::unsee`]: the write it
//! stood for failed) is new again only after a pause that doubles with each failure in a row
//! (the key's own [`crate::requeue::backoff`], jittered), so a failing marker write is not repeated on every
//! pass of a busy Cinder.

use super::key::CinderKey;
use crate::conditions::Cond;
use actix::prelude::*;
use backon::ExponentialBackoff;
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::time::{Duration, Instant};

/// The most keys one step remembers of one Cinder.
pub const SEEN_PER_CINDER: usize = 64;

/// A condition reused until `until`.
#[derive(Clone, Debug)]
struct Cached {
    condition: Cond,
    until: Instant,
}

/// A key given back after a failure: its next pauses, and when it is new again (`None` once
/// that time came and it was handed out).
#[derive(Debug)]
struct Retry {
    delays: ExponentialBackoff,
    due: Option<Instant>,
}

/// What one step remembers of one Cinder.
#[derive(Debug, Default)]
struct CinderMemory {
    seen: BTreeSet<String>,
    /// The keys of `seen`, oldest first.
    seen_order: VecDeque<String>,
    /// The keys of `seen` given back after a failure.
    retries: BTreeMap<String, Retry>,
    cached: BTreeMap<String, Cached>,
    /// Device locks answered DeviceBusy, with when that stops counting.
    refused: BTreeMap<String, Instant>,
}

/// The state of one step actor.
#[derive(Debug, Default)]
pub struct Memory {
    by_cinder: BTreeMap<CinderKey, CinderMemory>,
}

impl Memory {
    /// True the first time `key` is asked for `cinder` at `now` (it is remembered from then on,
    /// among the last [`SEEN_PER_CINDER`] keys of that Cinder), and once more each time a pause
    /// after [`Memory::unsee`] has passed.
    pub fn first_time(&mut self, cinder: &CinderKey, key: &str, now: Instant) -> bool {
        let m = self.by_cinder.entry(cinder.clone()).or_default();
        if let Some(retry) = m.retries.get_mut(key) {
            return match retry.due {
                Some(due) if now >= due => {
                    retry.due = None;
                    true
                }
                _ => false,
            };
        }
        if !m.seen.insert(key.to_string()) {
            return false;
        }
        m.seen_order.push_back(key.to_string());
        while m.seen_order.len() > SEEN_PER_CINDER {
            if let Some(oldest) = m.seen_order.pop_front() {
                m.seen.remove(&oldest);
                m.retries.remove(&oldest);
            }
        }
        true
    }

    /// Gives `key` of `cinder` back at `now` (what it stood for did not happen after all): it is
    /// new again after the next pause of its [`crate::requeue::backoff`], jittered.
    pub fn unsee(&mut self, cinder: &CinderKey, key: &str, now: Instant) {
        let Some(m) = self.by_cinder.get_mut(cinder) else {
            return;
        };
        if !m.seen.contains(key) {
            return;
        }
        let retry = m.retries.entry(key.to_string()).or_insert_with(|| Retry {
            delays: crate::requeue::backoff(),
            due: None,
        });
        let pause = retry
            .delays
            .next()
            .unwrap_or(crate::requeue::BACKOFF_CEILING);
        retry.due = Some(now + crate::requeue::jittered(pause));
    }

    /// The condition cached under `key` for `cinder`, while it is fresh at `now`.
    pub fn recall(&self, cinder: &CinderKey, key: &str, now: Instant) -> Option<Cond> {
        let cached = self.by_cinder.get(cinder)?.cached.get(key)?;
        (now < cached.until).then(|| cached.condition.clone())
    }

    /// Caches `condition` under `key` for `cinder` for `ttl` from `now`, dropping that
    /// Cinder's expired entries.
    pub fn remember(
        &mut self,
        cinder: &CinderKey,
        key: &str,
        condition: Cond,
        ttl: Duration,
        now: Instant,
    ) {
        let m = self.by_cinder.entry(cinder.clone()).or_default();
        m.cached.retain(|_, c| now < c.until);
        m.cached.insert(
            key.to_string(),
            Cached {
                condition,
                until: now + ttl,
            },
        );
    }

    /// Notes that the device lock `key` was refused to `cinder` (DeviceBusy), until `until`.
    pub fn note_refused(&mut self, cinder: &CinderKey, key: &str, until: Instant) {
        let m = self.by_cinder.entry(cinder.clone()).or_default();
        m.refused.insert(key.to_string(), until);
    }

    /// Whether the device lock `key` was refused to `cinder` and that still counts at `now`;
    /// the note is used up either way (a retry refused again is noted again).
    pub fn take_refused(&mut self, cinder: &CinderKey, key: &str, now: Instant) -> bool {
        let Some(m) = self.by_cinder.get_mut(cinder) else {
            return false;
        };
        m.refused.retain(|_, until| now < *until);
        m.refused.remove(key).is_some()
    }

    /// Drops everything remembered of `cinder` (it was deleted).
    pub fn forget(&mut self, cinder: &CinderKey) {
        self.by_cinder.remove(cinder);
    }

    /// How many Cinders something is remembered of.
    pub fn cinders(&self) -> usize {
        self.by_cinder.len()
    }
}

/// Which key of which Cinder a memory message is about.
#[derive(Clone, Debug)]
pub struct MemoryKey {
    pub cinder: CinderKey,
    pub key: String,
}

/// Declares messages that carry only a [`MemoryKey`], each with the type its handler answers.
macro_rules! key_messages {
    ($($(#[$doc:meta])* $name:ident -> $result:literal;)*) => {
        $(
            $(#[$doc])*
            #[derive(Message)]
            #[rtype(result = $result)]
            pub struct $name(pub MemoryKey);
        )*
    };
}

key_messages! {
    /// Asks whether `key` is seen for the first time (see [`Memory::first_time`]).
    FirstTime -> "bool";
    /// Forgets one key (see [`Memory::unsee`]).
    Unsee -> "()";
    /// Asks for a cached condition (see [`Memory::recall`]).
    Recall -> "Option<Cond>";
    /// Takes the note of a refused device lock (see [`Memory::take_refused`]).
    TakeRefused -> "bool";
}

/// Caches a condition (see [`Memory::remember`]).
#[derive(Message)]
#[rtype(result = "()")]
pub struct Remember {
    pub at: MemoryKey,
    pub condition: Cond,
    pub ttl: Duration,
}

/// Notes a refused device lock (see [`Memory::note_refused`]).
#[derive(Message)]
#[rtype(result = "()")]
pub struct NoteRefused {
    pub at: MemoryKey,
    pub ttl: Duration,
}

/// The addresses a run uses to reach its step actor's [`Memory`] (the actor's address, typed by
/// the messages the memory answers).
#[derive(Clone)]
pub struct MemoryAddr {
    first_time: Recipient<FirstTime>,
    unsee: Recipient<Unsee>,
    recall: Recipient<Recall>,
    remember: Recipient<Remember>,
    note_refused: Recipient<NoteRefused>,
    take_refused: Recipient<TakeRefused>,
}

impl MemoryAddr {
    /// The memory messages of the actor at `addr`.
    pub fn of<A>(addr: &Addr<A>) -> Self
    where
        A: Actor<Context = Context<A>>
            + Handler<FirstTime>
            + Handler<Unsee>
            + Handler<Recall>
            + Handler<Remember>
            + Handler<NoteRefused>
            + Handler<TakeRefused>,
    {
        MemoryAddr {
            first_time: addr.clone().recipient(),
            unsee: addr.clone().recipient(),
            recall: addr.clone().recipient(),
            remember: addr.clone().recipient(),
            note_refused: addr.clone().recipient(),
            take_refused: addr.clone().recipient(),
        }
    }
}

/// A run's handle on what its step actor remembers of the run's Cinder. Without an actor (a
/// step called directly, outside a step actor) nothing is remembered: every key is new and
/// nothing is cached.
#[derive(Clone, Default)]
pub struct StepMemory {
    cinder: Option<CinderKey>,
    actor: Option<MemoryAddr>,
}

impl std::fmt::Debug for StepMemory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StepMemory")
            .field("cinder", &self.cinder)
            .field("actor", &self.actor.is_some())
            .finish()
    }
}

impl StepMemory {
    /// The memory about `cinder` of the actor `actor` reaches.
    pub fn at(actor: MemoryAddr, cinder: CinderKey) -> Self {
        StepMemory {
            cinder: Some(cinder),
            actor: Some(actor),
        }
    }

    /// The memory key `key` of this handle's Cinder and the actor's addresses; `None` without
    /// an actor.
    fn target(&self, key: &str) -> Option<(MemoryKey, &MemoryAddr)> {
        let at = MemoryKey {
            cinder: self.cinder.clone()?,
            key: key.to_string(),
        };
        Some((at, self.actor.as_ref()?))
    }

    /// Sends the question `ask` about `key` to the actor's recipient `to` and waits for the
    /// answer; `None` without an actor or when the actor is lost.
    async fn ask<M>(
        &self,
        key: &str,
        to: impl FnOnce(&MemoryAddr) -> &Recipient<M>,
        ask: impl FnOnce(MemoryKey) -> M,
    ) -> Option<M::Result>
    where
        M: Message + Send + 'static,
        M::Result: Send,
    {
        let (at, actor) = self.target(key)?;
        to(actor).send(ask(at)).await.ok()
    }

    /// Sends the message `tell` about `key` to the actor's recipient `to` without waiting;
    /// nothing without an actor.
    fn tell<M>(
        &self,
        key: &str,
        to: impl FnOnce(&MemoryAddr) -> &Recipient<M>,
        tell: impl FnOnce(MemoryKey) -> M,
    ) where
        M: Message + Send + 'static,
        M::Result: Send,
    {
        if let Some((at, actor)) = self.target(key) {
            to(actor).do_send(tell(at));
        }
    }

    /// True the first time `key` is asked for this Cinder; a lost actor answers true (acting
    /// twice is the lesser harm than never).
    pub async fn first_time(&self, key: &str) -> bool {
        self.ask(key, |a| &a.first_time, FirstTime)
            .await
            .unwrap_or(true)
    }

    /// Gives `key` of this Cinder back (see [`Memory::unsee`]).
    pub fn unsee(&self, key: &str) {
        self.tell(key, |a| &a.unsee, Unsee);
    }

    /// The condition cached under `key`, while fresh.
    pub async fn recall(&self, key: &str) -> Option<Cond> {
        self.ask(key, |a| &a.recall, Recall).await.flatten()
    }

    /// Caches `condition` under `key` for `ttl`.
    pub fn remember(&self, key: &str, condition: Cond, ttl: Duration) {
        self.tell(key, |a| &a.remember, |at| Remember { at, condition, ttl });
    }

    /// Notes that the device lock `key` was refused (DeviceBusy); the note counts for `ttl`.
    pub fn note_refused(&self, key: &str, ttl: Duration) {
        self.tell(key, |a| &a.note_refused, |at| NoteRefused { at, ttl });
    }

    /// Whether the device lock `key` was refused lately (using the note up); false without an
    /// actor.
    pub async fn take_refused(&self, key: &str) -> bool {
        self.ask(key, |a| &a.take_refused, TakeRefused)
            .await
            .unwrap_or(false)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conditions::{kind, reason};

    fn key(name: &str) -> CinderKey {
        CinderKey {
            namespace: "ns".into(),
            name: name.into(),
        }
    }

    fn healthy() -> Cond {
        Cond::true_(kind::CINDER_API_READY, reason::API_HEALTHY, "ok")
    }

    #[test]
    fn keys_are_new_once_per_cinder_until_unseen() {
        let mut m = Memory::default();
        let t0 = Instant::now();
        assert!(m.first_time(&key("a"), "uid1", t0));
        assert!(!m.first_time(&key("a"), "uid1", t0));
        assert!(m.first_time(&key("b"), "uid1", t0), "per Cinder");
        m.unsee(&key("a"), "uid1", t0);
        assert!(m.first_time(&key("a"), "uid1", t0 + Duration::from_secs(2)));
    }

    #[test]
    fn an_unseen_key_is_new_again_after_a_pause_that_doubles() {
        let mut m = Memory::default();
        let t0 = Instant::now();
        let at = |ms| t0 + Duration::from_millis(ms);
        assert!(m.first_time(&key("a"), "uid1", t0));
        // First failure: about 1 s (jitter ±10 %).
        m.unsee(&key("a"), "uid1", t0);
        assert!(!m.first_time(&key("a"), "uid1", at(850)));
        assert!(m.first_time(&key("a"), "uid1", at(1150)));
        assert!(
            !m.first_time(&key("a"), "uid1", at(1200)),
            "handed out once"
        );
        // Second failure in a row: about 2 s.
        m.unsee(&key("a"), "uid1", at(1200));
        assert!(!m.first_time(&key("a"), "uid1", at(1200 + 1750)));
        assert!(m.first_time(&key("a"), "uid1", at(1200 + 2250)));
        // A key never handed out is not given back.
        m.unsee(&key("a"), "other", t0);
        assert!(m.first_time(&key("a"), "other", t0));
    }

    #[test]
    fn a_long_lived_cinder_keeps_only_its_latest_keys() {
        let mut m = Memory::default();
        let t0 = Instant::now();
        for job in 0..1000 {
            assert!(m.first_time(&key("a"), &format!("uid{job}"), t0));
        }
        let a = &m.by_cinder[&key("a")];
        assert_eq!(a.seen.len(), SEEN_PER_CINDER);
        assert_eq!(a.seen_order.len(), SEEN_PER_CINDER);
        assert!(
            !m.first_time(&key("a"), "uid999", t0),
            "the latest are kept"
        );
        m.unsee(&key("a"), "uid999", t0);
        for job in 1000..1000 + SEEN_PER_CINDER {
            m.first_time(&key("a"), &format!("uid{job}"), t0);
        }
        let a = &m.by_cinder[&key("a")];
        assert!(a.retries.is_empty(), "a retry goes with its key");
    }

    #[test]
    fn cached_conditions_expire_and_go_with_their_cinder() {
        let mut m = Memory::default();
        let t0 = Instant::now();
        let at = |s| t0 + Duration::from_secs(s);
        m.remember(&key("a"), "probe", healthy(), Duration::from_secs(30), t0);
        m.remember(&key("b"), "probe", healthy(), Duration::from_secs(10), t0);
        assert!(m.recall(&key("a"), "probe", at(29)).is_some());
        assert!(m.recall(&key("a"), "probe", at(30)).is_none());
        assert!(m.recall(&key("b"), "probe", at(9)).is_some());
        assert!(m.recall(&key("b"), "probe", at(10)).is_none());
        m.remember(
            &key("b"),
            "other",
            healthy(),
            Duration::from_secs(1),
            at(11),
        );
        assert_eq!(
            m.by_cinder[&key("b")].cached.len(),
            1,
            "expired entry pruned"
        );
        m.forget(&key("a"));
        assert!(m.recall(&key("a"), "probe", t0).is_none());
        assert_eq!(m.cinders(), 1);
    }

    #[tokio::test]
    async fn without_an_actor_nothing_is_remembered() {
        let m = StepMemory::default();
        assert!(m.first_time("k").await);
        m.remember("k", healthy(), Duration::from_secs(30));
        assert!(m.recall("k").await.is_none());
        assert!(m.first_time("k").await);
    }

    #[test]
    fn a_refused_lock_is_noted_once_per_refusal_until_it_lapses() {
        let mut m = Memory::default();
        let t0 = Instant::now();
        let at = |s| t0 + Duration::from_secs(s);
        assert!(!m.take_refused(&key("a"), "db", t0));
        m.note_refused(&key("a"), "db", at(60));
        assert!(!m.take_refused(&key("b"), "db", t0), "per Cinder");
        assert!(!m.take_refused(&key("a"), "nfs", t0), "per device");
        assert!(m.take_refused(&key("a"), "db", at(1)));
        assert!(
            !m.take_refused(&key("a"), "db", at(2)),
            "used up by the retry"
        );
        m.note_refused(&key("a"), "db", at(60));
        assert!(!m.take_refused(&key("a"), "db", at(61)), "lapsed");
    }
}
