//! Simulated storage devices: one per backend, each accepting at most N concurrent calls
//! (a semaphore), each call taking a fixed time. Counts calls per device so the physical
//! limit of a run can be computed from what was really asked.

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Semaphore;

/// The devices of one run (cheap to clone; single-threaded runtime).
#[derive(Clone)]
pub struct Devices {
    permits: Rc<Vec<Arc<Semaphore>>>,
    call: Duration,
    calls: Rc<RefCell<Vec<u64>>>,
}

impl Devices {
    pub fn new(count: usize, concurrency: usize, call: Duration) -> Self {
        Devices {
            permits: Rc::new(
                (0..count)
                    .map(|_| Arc::new(Semaphore::new(concurrency)))
                    .collect(),
            ),
            call,
            calls: Rc::new(RefCell::new(vec![0; count])),
        }
    }

    /// One device call on backend `backend`: wait for a slot, then take `call` time.
    pub async fn call(&self, backend: usize) {
        let Some(permits) = self.permits.get(backend) else {
            return;
        };
        // The semaphore is never closed, so acquire cannot fail.
        let _slot = permits.acquire().await;
        tokio::time::sleep(self.call).await;
        if let Some(count) = self.calls.borrow_mut().get_mut(backend) {
            *count += 1;
        }
    }

    /// Calls made so far, per device.
    pub fn calls(&self) -> Vec<u64> {
        self.calls.borrow().clone()
    }
}
