//! Simulated storage devices, one per backend, served by a thread of their own: each device
//! runs at most N calls at once (the others wait in its FIFO) and each call takes a fixed time,
//! timed with the OS's nanosecond timeouts. The device side is thus independent of how busy
//! the engine's runtime is (tokio's own timer would make a 5 ms call last about 6.4 ms here,
//! and a permit held until the caller is polled again would charge the runtime's latency to
//! the device). Counts calls per device and measures the time each call really took.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender, channel};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::oneshot;

/// A call asked of device `device`; `done` fires when it has completed.
struct Call {
    device: usize,
    done: oneshot::Sender<()>,
}

/// A call in progress.
struct Running {
    until: Instant,
    seq: u64,
    started: Instant,
    device: usize,
    done: oneshot::Sender<()>,
}

impl PartialEq for Running {
    fn eq(&self, other: &Self) -> bool {
        (self.until, self.seq) == (other.until, other.seq)
    }
}
impl Eq for Running {}
impl PartialOrd for Running {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Running {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (self.until, self.seq).cmp(&(other.until, other.seq))
    }
}

/// Time really spent in calls, and how many completed.
#[derive(Default)]
struct Served {
    busy: Duration,
    calls: u64,
}

struct Server {
    call: Duration,
    concurrency: usize,
    active: Vec<usize>,
    queues: Vec<VecDeque<oneshot::Sender<()>>>,
    running: BinaryHeap<Reverse<Running>>,
    seq: u64,
    served: Arc<Mutex<Served>>,
}

impl Server {
    fn start(&mut self, device: usize, done: oneshot::Sender<()>) {
        let now = Instant::now();
        self.seq += 1;
        self.active[device] += 1;
        self.running.push(Reverse(Running {
            until: now + self.call,
            seq: self.seq,
            started: now,
            device,
            done,
        }));
    }

    fn ask(&mut self, call: Call) {
        let Some(active) = self.active.get(call.device) else {
            return;
        };
        if *active < self.concurrency {
            self.start(call.device, call.done);
        } else {
            self.queues[call.device].push_back(call.done);
        }
    }

    fn complete_due(&mut self) {
        let now = Instant::now();
        while self.running.peek().is_some_and(|Reverse(r)| r.until <= now) {
            let Some(Reverse(done)) = self.running.pop() else {
                break;
            };
            {
                let mut served = self.served.lock().unwrap_or_else(|p| p.into_inner());
                served.busy += now.saturating_duration_since(done.started);
                served.calls += 1;
            }
            // The caller may have gone away; the device finished anyway.
            let _ = done.done.send(());
            self.active[done.device] -= 1;
            if let Some(next) = self.queues[done.device].pop_front() {
                self.start(done.device, next);
            }
        }
    }

    fn run(mut self, calls: Receiver<Call>) {
        loop {
            self.complete_due();
            let next = match self.running.peek() {
                Some(Reverse(r)) => {
                    calls.recv_timeout(r.until.saturating_duration_since(Instant::now()))
                }
                None => calls.recv().map_err(|_| RecvTimeoutError::Disconnected),
            };
            match next {
                Ok(call) => self.ask(call),
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => return,
            }
        }
    }
}

/// The devices of one run (cheap to clone; shared by the tasks of one runtime, on one thread
/// or several).
#[derive(Clone)]
pub struct Devices {
    calls_to: Sender<Call>,
    call: Duration,
    calls: Arc<[AtomicU64]>,
    served: Arc<Mutex<Served>>,
}

impl Devices {
    /// `count` devices each running at most `concurrency` calls of `call` at once.
    pub fn new(count: usize, concurrency: usize, call: Duration) -> Self {
        let (calls_to, calls_from) = channel();
        let served = Arc::new(Mutex::new(Served::default()));
        let server = Server {
            call,
            concurrency,
            active: vec![0; count],
            queues: (0..count).map(|_| VecDeque::new()).collect(),
            running: BinaryHeap::new(),
            seq: 0,
            served: served.clone(),
        };
        if let Err(e) = std::thread::Builder::new()
            .name("devices".into())
            .spawn(move || server.run(calls_from))
        {
            eprintln!("lockbench: cannot start the device thread ({e}); calls will fail");
        }
        Devices {
            calls_to,
            call,
            calls: (0..count).map(|_| AtomicU64::new(0)).collect(),
            served,
        }
    }

    /// One call on device `backend`: wait for a slot on the device, then for the call to end.
    /// A device whose calls take no time (the throughput workload) answers at once, without a
    /// trip to the device thread, so the engine under test is the bottleneck.
    pub async fn call(&self, backend: usize) {
        if self.call.is_zero() {
            if let Some(count) = self.calls.get(backend) {
                count.fetch_add(1, Ordering::Relaxed);
            }
            return;
        }
        let (done, finished) = oneshot::channel();
        let asked = self.calls_to.send(Call {
            device: backend,
            done,
        });
        if asked.is_err() || finished.await.is_err() {
            // No device thread: fall back to tokio's (coarser) timer, without the slot limit.
            tokio::time::sleep(self.call).await;
        }
        if let Some(count) = self.calls.get(backend) {
            count.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Mean time one call really took on the device (how faithful the simulation is).
    pub fn mean_call(&self) -> Duration {
        let served = self.served.lock().unwrap_or_else(|p| p.into_inner());
        served.busy.div_f64(served.calls.max(1) as f64)
    }

    /// Calls made so far, per device.
    pub fn calls(&self) -> Vec<u64> {
        self.calls
            .iter()
            .map(|count| count.load(Ordering::Relaxed))
            .collect()
    }
}
