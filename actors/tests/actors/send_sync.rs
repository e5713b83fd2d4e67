//! The handle, the lock outcome and the lock futures can cross threads (callers run on
//! multi-threaded tokio runtimes and actix-web workers).

use cinder_actors::Kind;
use cinder_actors::query::*;
use cinder_actors::{CoordinatorHandle, CoordinatorSnapshot, LockError, Locked};
use std::future::Future;

fn assert_send<T: Send>(_: &T) {}
fn assert_send_sync<T: Send + Sync>() {}

#[test]
fn types_are_send_and_sync() {
    assert_send_sync::<CoordinatorHandle>();
    assert_send_sync::<LockError>();
    assert_send_sync::<CoordinatorSnapshot>();
    fn locked_is_send<T: Send>() {}
    locked_is_send::<Locked<'static>>();
    // Compiling this function is the check: every future of the API is Send.
    let _check: fn(CoordinatorHandle, Locked<'static>) = futures_are_send;
}

fn futures_are_send(c: CoordinatorHandle, l: Locked<'static>) {
    let f = async move {
        let n = l.nested_lock(vec![query([upsert_node("n")])]).await?;
        let node = &n.results()[0].node;
        node.upsert(serde_json::json!({})).await?;
        n.results()[0].backend.reserve_capacity(1).await?;
        n.unlock().await;
        l.unlock().await;
        let _ = c.inspect().await?;
        let s = c.shutdown().await?;
        s.release().await;
        Ok::<_, LockError>(())
    };
    assert_send(&f);
    fn is_future<F: Future>(_: &F) {}
    is_future(&f);
}

#[test]
fn handle_works_from_another_thread() {
    let system = actix::System::new();
    let c = system.block_on(async { CoordinatorHandle::start_standard() });
    let c2 = c.clone();
    let worker = std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            c2.load(Kind::Node, "n", serde_json::json!({"v": 1}))
                .await
                .unwrap();
            let l = tokio::spawn({
                let c2 = c2.clone();
                async move { c2.lock(vec![query([upsert_node("n")])]).await }
            });
            let l = l.await.unwrap().unwrap();
            l.results()[0]
                .node
                .upsert(serde_json::json!({"v": 2}))
                .await
                .unwrap();
            l.unlock().await.len()
        })
    });
    // The actors live on this thread's actix system: keep it running until the worker is done.
    let released = system.block_on(async move {
        loop {
            if worker.is_finished() {
                return worker.join().unwrap();
            }
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
    });
    assert_eq!(released, 2);
    let peeked = system.block_on(async move { c.peek(Kind::Node, "n").await });
    assert_eq!(peeked.unwrap()["v"], 2);
}
