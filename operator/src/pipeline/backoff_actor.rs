//! The satellites' retry back-off: [`BackoffActor`] owns their [`Backoffs`] (keyed
//! `kind/namespace/name`; the bookkeeping and its rules are [`crate::pipeline::schedule`]'s, which
//! the pipelines registry keeps for the Cinders).

use super::schedule::{Backoffs, Retry};
use actix::prelude::*;
use std::time::{Duration, Instant};

/// The actor that owns the satellites' [`Backoffs`] (keyed `kind/namespace/name`).
#[derive(Default)]
pub struct BackoffActor {
    backoffs: Backoffs<String>,
}

impl Actor for BackoffActor {
    type Context = Context<Self>;
}

/// How long a reconcile of the object at this generation still waits for its retry.
#[derive(Message)]
#[rtype(result = "Option<Duration>")]
pub struct Holding {
    pub key: String,
    pub generation: Option<i64>,
}

/// A reconcile of the object `key` names failed at this generation: when is it retried? The
/// satellites' key is `kind/namespace/name` (this actor); a Cinder's is its [`CinderKey`]
/// ([`crate::pipeline::PassFailed`], to the pipelines registry).
///
/// [`CinderKey`]: crate::pipeline::CinderKey
#[derive(Message)]
#[rtype(result = "Retry")]
pub struct Failed<K: 'static> {
    pub key: K,
    pub generation: Option<i64>,
}

/// A reconcile of the object succeeded (or the object is gone): its count is reset.
#[derive(Message)]
#[rtype(result = "()")]
pub struct Succeeded(pub String);

/// Forget the failures of a satellite that left the cluster.
#[derive(Message)]
#[rtype(result = "()")]
pub struct Forget(pub String);

impl Handler<Holding> for BackoffActor {
    type Result = Option<Duration>;

    fn handle(&mut self, msg: Holding, _ctx: &mut Self::Context) -> Self::Result {
        self.backoffs
            .holding(&msg.key, msg.generation, Instant::now())
    }
}

impl Handler<Failed<String>> for BackoffActor {
    type Result = MessageResult<Failed<String>>;

    fn handle(&mut self, msg: Failed<String>, _ctx: &mut Self::Context) -> Self::Result {
        MessageResult(
            self.backoffs
                .failed(msg.key, msg.generation, Instant::now()),
        )
    }
}

impl Handler<Succeeded> for BackoffActor {
    type Result = ();

    fn handle(&mut self, msg: Succeeded, _ctx: &mut Self::Context) {
        self.backoffs.succeeded(&msg.0);
    }
}

impl Handler<Forget> for BackoffActor {
    type Result = ();

    fn handle(&mut self, msg: Forget, _ctx: &mut Self::Context) {
        self.backoffs.succeeded(&msg.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[actix::test]
    async fn the_actor_counts_holds_and_resets() {
        let actor = BackoffActor::default().start();
        let key = || "CinderBackend/ns/b".to_string();
        let hold = |generation| Holding {
            key: key(),
            generation,
        };
        assert_eq!(actor.send(hold(Some(1))).await.unwrap(), None);
        let retry = actor
            .send(Failed {
                key: key(),
                generation: Some(1),
            })
            .await
            .unwrap();
        assert_eq!(retry.failures, 1);
        assert!(actor.send(hold(Some(1))).await.unwrap().is_some());
        assert_eq!(actor.send(hold(Some(2))).await.unwrap(), None);
        actor.send(Succeeded(key())).await.unwrap();
        assert_eq!(actor.send(hold(Some(1))).await.unwrap(), None);
    }

    #[actix::test]
    async fn a_departed_satellite_starts_again_with_no_failures() {
        let actor = BackoffActor::default().start();
        let key = "CinderBackupBackend/ns/t".to_string();
        let failed = || Failed {
            key: key.clone(),
            generation: Some(1),
        };
        actor.send(failed()).await.unwrap();
        assert_eq!(actor.send(failed()).await.unwrap().failures, 2);
        actor.send(Forget(key.clone())).await.unwrap();
        let hold = Holding {
            key: key.clone(),
            generation: Some(1),
        };
        assert_eq!(actor.send(hold).await.unwrap(), None);
        assert_eq!(actor.send(failed()).await.unwrap().failures, 1);
    }
}
