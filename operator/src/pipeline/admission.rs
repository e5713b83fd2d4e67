//! Which passes may run: at most `--max-concurrent-reconciles` at once, in the order they asked.
//! The registry actor ([`super::Pipelines`]) owns the one [`Admission`]; a pass that asks while
//! every slot is taken waits its turn. The Cinder controller itself runs without a limit of its
//! own: kube-runtime's runner, once at its limit, keeps the due reconciles in a hash set and takes
//! them in hash order, so under a sustained backlog the same objects are taken first every time
//! and others wait indefinitely. Here the first to ask is the first to run.

use futures::channel::oneshot;
use std::collections::VecDeque;

/// The pass slots and the passes waiting for one.
#[derive(Debug)]
pub struct Admission {
    /// The most passes at once (0: no limit).
    limit: usize,
    running: usize,
    waiting: VecDeque<oneshot::Sender<()>>,
}

impl Admission {
    /// At most `limit` passes at once; 0 admits every pass at once.
    pub fn new(limit: usize) -> Self {
        Admission {
            limit,
            running: 0,
            waiting: VecDeque::new(),
        }
    }

    /// Asks for a slot: the receiver completes once the pass may run (at once when a slot is
    /// free). The caller gives the slot back with [`Admission::release`] when its pass ends;
    /// a caller that stops waiting (its receiver dropped) is skipped.
    pub fn ask(&mut self) -> oneshot::Receiver<()> {
        let (granted, wait) = oneshot::channel();
        if self.limit == 0 || self.running < self.limit {
            self.running += 1;
            let _ = granted.send(());
        } else {
            self.waiting.push_back(granted);
        }
        wait
    }

    /// Gives a slot back; the longest-waiting pass that still waits gets it.
    pub fn release(&mut self) {
        self.running = self.running.saturating_sub(1);
        while let Some(next) = self.waiting.pop_front() {
            if next.send(()).is_ok() {
                self.running += 1;
                return;
            }
        }
    }

    /// Passes running.
    pub fn running(&self) -> usize {
        self.running
    }

    /// Passes waiting for a slot.
    pub fn waiting(&self) -> usize {
        self.waiting.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn granted(r: &mut oneshot::Receiver<()>) -> bool {
        matches!(r.try_recv(), Ok(Some(())))
    }

    #[test]
    fn at_most_the_limit_run_and_the_rest_go_in_arrival_order() {
        let mut a = Admission::new(2);
        let mut asks: Vec<_> = (0..5).map(|_| a.ask()).collect();
        let first: Vec<bool> = asks.iter_mut().map(granted).collect();
        assert_eq!(first, [true, true, false, false, false]);
        assert_eq!((a.running(), a.waiting()), (2, 3));
        a.release();
        assert!(granted(&mut asks[2]), "the longest waiting goes first");
        assert!(!granted(&mut asks[3]) && !granted(&mut asks[4]));
        a.release();
        assert!(granted(&mut asks[3]));
        assert_eq!((a.running(), a.waiting()), (2, 1));
    }

    #[test]
    fn a_caller_that_stopped_waiting_is_skipped() {
        let mut a = Admission::new(1);
        let _running = a.ask();
        let gone = a.ask();
        let mut next = a.ask();
        drop(gone);
        a.release();
        assert!(granted(&mut next));
        assert_eq!((a.running(), a.waiting()), (1, 0));
        a.release();
        assert_eq!(a.running(), 0);
    }

    #[test]
    fn no_limit_admits_everyone() {
        let mut a = Admission::new(0);
        let mut asks: Vec<_> = (0..100).map(|_| a.ask()).collect();
        assert!(asks.iter_mut().all(granted));
        assert_eq!(a.waiting(), 0);
    }
}
