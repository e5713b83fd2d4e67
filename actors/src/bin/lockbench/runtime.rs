//! Where the workloads run: the actix system's current-thread runtime (the actor engine, and
//! with one arbiter the baselines too, every task a `spawn_local` on its `LocalSet`), or with
//! `--arbiters N` (N ≥ 2) a multi-thread tokio runtime of N workers for the baselines. Owns
//! the spawn and CPU-time helpers the workloads use so that they run the same code on both.

use std::collections::BTreeMap;
use std::future::Future;
use std::time::Duration;

use actix::SystemRunner;
use tokio::runtime::{Builder, Handle, Runtime, RuntimeFlavor};
use tokio::task::JoinHandle;

use crate::stats;

/// Name of the baselines' worker threads (their CPU time is read by this name).
const WORKER_NAME: &str = "baseline-worker";

/// The runtimes of one run.
pub struct Runtimes {
    actix: SystemRunner,
    /// The baselines' multi-thread runtimes, by worker count (each count of 2 or more asked for).
    threads: BTreeMap<usize, Runtime>,
}

impl Runtimes {
    /// The actix system, and for every count of `workers` that is 2 or more a multi-thread
    /// runtime with that many workers.
    pub fn new(workers: &[usize]) -> std::io::Result<Self> {
        let mut threads = BTreeMap::new();
        for &n in workers.iter().filter(|n| **n >= 2) {
            if threads.contains_key(&n) {
                continue;
            }
            let runtime = Builder::new_multi_thread()
                .worker_threads(n)
                .thread_name(WORKER_NAME)
                .enable_all()
                .build()?;
            threads.insert(n, runtime);
        }
        Ok(Runtimes {
            actix: actix::System::new(),
            threads,
        })
    }

    /// Run a workload of the actor engine on the actix system.
    pub fn actors<F: Future>(&self, workload: F) -> F::Output {
        self.actix.block_on(workload)
    }

    /// Run a workload of a baseline: for `workers` of 2 or more on the multi-thread runtime of
    /// that many workers, otherwise on the actix system like the actor engine.
    pub fn baseline<F: Future>(&self, workers: usize, workload: F) -> F::Output {
        match self.threads.get(&workers) {
            Some(threads) => threads.block_on(workload),
            None => self.actix.block_on(workload),
        }
    }
}

/// Spawn a workload task: `spawn_local` on the current-thread runtime (its `LocalSet`), a
/// task any worker may run on the multi-thread one.
pub fn spawn<F>(task: F) -> JoinHandle<F::Output>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    match Handle::current().runtime_flavor() {
        RuntimeFlavor::CurrentThread => tokio::task::spawn_local(task),
        _ => tokio::spawn(task),
    }
}

/// CPU time used so far by the runtime running the caller: the calling thread, plus on the
/// multi-thread runtime every worker thread.
pub fn runtime_cpu() -> Option<Duration> {
    let own = stats::thread_cpu()?;
    match Handle::try_current().map(|h| h.runtime_flavor()) {
        Ok(RuntimeFlavor::CurrentThread) | Err(_) => Some(own),
        Ok(_) => Some(own + stats::named_threads_cpu(WORKER_NAME)?),
    }
}
