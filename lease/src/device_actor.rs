//! The device actor: one per device in this process, owning the device's tenure — the Lease client,
//! the Lease while it is held or parked between two in-process holders, the hand-over count, the
//! number of requests waiting for the in-process lock and the current holder. Every Lease write of
//! the device (acquire, release, abandon) runs inside this actor, one at a time and in mailbox
//! order, so a release can never clear a Lease that a later holder acquired, whatever happens to
//! the callers meanwhile. (The in-process wait queue itself is the lock coordinator's `device`
//! resource actor, so a device lock can be taken in one Lock together with other resources.)
//!
//! A refusal (another replica holds the Lease) is shared: a request granted in process within
//! `busy_for` of it is answered with the same refusal without an API call, so the Cinders that
//! wait for one device held elsewhere cost the API one read per `busy_for`, not one each. The
//! callers retry after `jitter(short_delay)`, longer than `busy_for`, so a retry reads the Lease.
//!
//! Messages: [`Pending`] / [`Withdrawn`] (a request starts / gives up waiting in process), [`Take`]
//! (granted in process: the parked Lease, or a fresh acquisition), [`EndHold`] (hand the Lease over
//! or release it), [`Abandon`], [`ViewSlot`]. A [`DeviceDirectory`] actor maps device ids to their
//! actors; a device actor that stays idle (nobody holds, waits for or inherits its Lease, and its
//! release is done) for the idle grace tells the directory ([`Idle`]), which forgets it unless its
//! address was handed out meanwhile, so the directory holds the devices in use, not every device
//! ever locked. The grace keeps the Lease client, and with it the Lease as last written, across
//! the passes that lock one device in quick succession: the acquire that follows a release within
//! the grace is one PUT instead of a GET and a PUT.

use crate::error::LeaseError;
use crate::held_lease::{HeldLease, LostSignal};
use crate::lease_lock::LeaseLock;
use actix::prelude::*;
use cinder_actors::Priority;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::oneshot;

/// Who holds a device in this process.
#[derive(Clone, Debug)]
pub(crate) struct InProcessHolder {
    pub(crate) priority: Priority,
    pub(crate) since: Instant,
    pub(crate) lost: LostSignal,
}

/// The tenure of one device.
pub(crate) struct DeviceActor {
    lease: Arc<LeaseLock>,
    parked: Option<HeldLease>,
    handovers: u32,
    max_handovers: u32,
    pending: usize,
    holder: Option<InProcessHolder>,
    /// Requests counted in so far ([`Pending`] messages): the directory compares it with the
    /// addresses it handed out.
    requests: u64,
    /// How long the actor stays idle before the directory may forget it.
    idle_grace: Duration,
    /// How long a refusal answers the requests granted after it.
    busy_for: Duration,
    /// The last refusal: until when it stands and the holder it named.
    busy: Option<(Instant, String)>,
    directory: Addr<DeviceDirectory>,
}

impl Actor for DeviceActor {
    type Context = Context<Self>;
}

impl DeviceActor {
    /// Whether nobody holds, waits for or inherits the Lease.
    fn is_idle(&self) -> bool {
        self.pending == 0 && self.holder.is_none() && self.parked.is_none()
    }

    /// Tells the directory when nobody held, waited for or inherited the Lease during a whole idle
    /// grace (no request counted in since it fell idle).
    fn report_if_idle(&mut self, ctx: &mut Context<Self>) {
        if !self.is_idle() {
            return;
        }
        let requests = self.requests;
        ctx.run_later(self.idle_grace, move |act, _| {
            if act.is_idle() && act.requests == requests {
                act.directory.do_send(Idle {
                    device: act.lease.device_id().to_owned(),
                    requests,
                });
            }
        });
    }

    /// A parked Lease that nobody is going to inherit (no pending request, no holder) is released.
    fn release_orphan(&mut self, ctx: &mut Context<Self>) {
        if self.pending == 0 && self.holder.is_none() {
            self.handovers = 0;
            match self.parked.take() {
                Some(held) => {
                    ctx.wait(
                        release(held)
                            .into_actor(self)
                            .map(|(), act, ctx| act.report_if_idle(ctx)),
                    );
                }
                None => self.report_if_idle(ctx),
            }
        }
    }

    /// The end of a holder's tenure: park the Lease for a pending request (hand-over) or release it.
    fn end_hold(
        &mut self,
        held: HeldLease,
        done: Option<oneshot::Sender<()>>,
        ctx: &mut Context<Self>,
    ) {
        self.holder = None;
        if self.pending > 0 && self.handovers < self.max_handovers && !held.is_lost() {
            self.handovers += 1;
            self.parked = Some(held);
            if let Some(done) = done {
                let _ = done.send(());
            }
            return;
        }
        self.handovers = 0;
        ctx.wait(
            async move {
                release(held).await;
                if let Some(done) = done {
                    let _ = done.send(());
                }
            }
            .into_actor(self)
            .map(|(), act, ctx| act.report_if_idle(ctx)),
        );
    }
}

async fn release(held: HeldLease) {
    let name = held.lock().name().to_owned();
    if let Err(e) = held.release().await {
        tracing::warn!(lease = %name, error = %e, "releasing a device lease failed; it will expire");
    }
}

/// A request starts waiting for the in-process lock.
#[derive(Message)]
#[rtype(result = "()")]
pub(crate) struct Pending;

impl Handler<Pending> for DeviceActor {
    type Result = ();
    fn handle(&mut self, _msg: Pending, _ctx: &mut Context<Self>) {
        self.pending += 1;
        self.requests += 1;
    }
}

/// A waiting request gave up (cancelled, or its in-process lock was refused).
#[derive(Message)]
#[rtype(result = "()")]
pub(crate) struct Withdrawn;

impl Handler<Withdrawn> for DeviceActor {
    type Result = ();
    fn handle(&mut self, _msg: Withdrawn, ctx: &mut Context<Self>) {
        self.pending = self.pending.saturating_sub(1);
        self.release_orphan(ctx);
    }
}

/// A waiting request was granted the in-process lock: it becomes the holder and gets the parked
/// Lease, or a fresh acquisition. A caller gone before the answer leaves the Lease to the actor.
#[derive(Message)]
#[rtype(result = "()")]
pub(crate) struct Take {
    pub(crate) priority: Priority,
    pub(crate) reply: oneshot::Sender<Result<HeldLease, LeaseError>>,
}

impl Handler<Take> for DeviceActor {
    type Result = ();
    fn handle(&mut self, msg: Take, ctx: &mut Context<Self>) {
        self.pending = self.pending.saturating_sub(1);
        self.holder = Some(InProcessHolder {
            priority: msg.priority,
            since: Instant::now(),
            lost: LostSignal::never(),
        });
        // A lost Lease is not handed over (dropping it writes nothing); acquire afresh.
        let parked = self.parked.take().filter(|h| !h.is_lost());
        if let Some(held) = parked {
            self.answer_take(Ok(held.handed_over()), msg.reply, ctx);
            return;
        }
        if let Some(holder) = self.refusal_standing() {
            let refused = LeaseError::Held {
                lease: self.lease.name().to_owned(),
                holder,
            };
            self.answer_take(Err(refused), msg.reply, ctx);
            return;
        }
        let lease = self.lease.clone();
        ctx.wait(
            HeldLease::acquire(lease)
                .into_actor(self)
                .map(move |acquired, act, ctx| act.answer_take(acquired, msg.reply, ctx)),
        );
    }
}

impl DeviceActor {
    /// The holder named by a refusal that still stands.
    fn refusal_standing(&self) -> Option<String> {
        self.busy
            .as_ref()
            .filter(|(until, _)| Instant::now() < *until)
            .map(|(_, holder)| holder.clone())
    }

    fn answer_take(
        &mut self,
        acquired: Result<HeldLease, LeaseError>,
        reply: oneshot::Sender<Result<HeldLease, LeaseError>>,
        ctx: &mut Context<Self>,
    ) {
        match &acquired {
            Ok(held) => {
                if let Some(h) = self.holder.as_mut() {
                    h.lost = held.lost_signal();
                }
            }
            Err(e) => {
                self.holder = None;
                // A refusal read from the API starts the window; one answered from it does not
                // extend it.
                if let LeaseError::Held { holder, .. } = e
                    && self.refusal_standing().is_none()
                {
                    self.busy = Some((Instant::now() + self.busy_for, holder.clone()));
                }
            }
        }
        match reply.send(acquired) {
            // A refusal leaves the device without a holder.
            Ok(()) => self.report_if_idle(ctx),
            // The caller went away: its tenure ends here.
            Err(Ok(held)) => self.end_hold(held, None, ctx),
            Err(Err(_)) => self.release_orphan(ctx),
        }
    }
}

/// The holder is done: hand the Lease over to a pending request or release it (`done` is told
/// when that is finished).
#[derive(Message)]
#[rtype(result = "()")]
pub(crate) struct EndHold {
    pub(crate) held: HeldLease,
    pub(crate) done: Option<oneshot::Sender<()>>,
}

impl Handler<EndHold> for DeviceActor {
    type Result = ();
    fn handle(&mut self, msg: EndHold, ctx: &mut Context<Self>) {
        self.end_hold(msg.held, msg.done, ctx);
    }
}

/// The holder stops renewing without releasing (what a crash leaves behind).
#[derive(Message)]
#[rtype(result = "()")]
pub(crate) struct Abandon {
    pub(crate) held: HeldLease,
    pub(crate) done: oneshot::Sender<()>,
}

impl Handler<Abandon> for DeviceActor {
    type Result = ();
    fn handle(&mut self, msg: Abandon, ctx: &mut Context<Self>) {
        self.holder = None;
        self.handovers = 0;
        let Abandon { held, done } = msg;
        ctx.wait(
            async move {
                held.abandon().await;
                let _ = done.send(());
            }
            .into_actor(self)
            .map(|(), act, ctx| act.report_if_idle(ctx)),
        );
    }
}

/// A copy of one device's tenure for inspection.
pub(crate) struct SlotView {
    pub(crate) device: String,
    pub(crate) lease: Arc<LeaseLock>,
    pub(crate) pending: usize,
    pub(crate) holder: Option<InProcessHolder>,
    pub(crate) parked: bool,
    pub(crate) handovers: u32,
}

/// Report the tenure.
#[derive(Message)]
#[rtype(result = "SlotView")]
pub(crate) struct ViewSlot;

impl Handler<ViewSlot> for DeviceActor {
    type Result = MessageResult<ViewSlot>;
    fn handle(&mut self, _msg: ViewSlot, _ctx: &mut Context<Self>) -> Self::Result {
        MessageResult(SlotView {
            device: self.lease.device_id().to_owned(),
            lease: self.lease.clone(),
            pending: self.pending,
            holder: self.holder.clone(),
            parked: self.parked.is_some(),
            handovers: self.handovers,
        })
    }
}

/// A device actor and how many times its address was handed out.
struct DeviceEntry {
    addr: Addr<DeviceActor>,
    handed: u64,
}

/// Maps device ids to their actors, starting one (with its one Lease client) on first use and
/// forgetting it when it has stayed idle for the idle grace.
pub(crate) struct DeviceDirectory {
    devices: HashMap<String, DeviceEntry>,
    new_lease: Box<dyn Fn(&str) -> LeaseLock + Send>,
    max_handovers: u32,
    idle_grace: Duration,
    busy_for: Duration,
}

impl DeviceDirectory {
    /// Device actors whose refusals stand for `busy_for` (see the module's first lines).
    pub(crate) fn new(
        new_lease: Box<dyn Fn(&str) -> LeaseLock + Send>,
        max_handovers: u32,
        idle_grace: Duration,
        busy_for: Duration,
    ) -> Self {
        DeviceDirectory {
            devices: HashMap::new(),
            new_lease,
            max_handovers,
            idle_grace,
            busy_for,
        }
    }
}

impl Actor for DeviceDirectory {
    type Context = Context<Self>;
}

/// The actor of a device.
#[derive(Message)]
#[rtype(result = "Addr<DeviceActor>")]
pub(crate) struct Device(pub(crate) String);

impl Handler<Device> for DeviceDirectory {
    type Result = MessageResult<Device>;
    fn handle(&mut self, msg: Device, ctx: &mut Context<Self>) -> Self::Result {
        if let Some(entry) = self.devices.get_mut(&msg.0) {
            entry.handed += 1;
            return MessageResult(entry.addr.clone());
        }
        let actor = DeviceActor {
            lease: Arc::new((self.new_lease)(&msg.0)),
            parked: None,
            handovers: 0,
            max_handovers: self.max_handovers,
            pending: 0,
            holder: None,
            requests: 0,
            idle_grace: self.idle_grace,
            busy_for: self.busy_for,
            busy: None,
            directory: ctx.address(),
        };
        let addr = actor.start();
        self.devices.insert(
            msg.0,
            DeviceEntry {
                addr: addr.clone(),
                handed: 1,
            },
        );
        MessageResult(addr)
    }
}

/// The device actor of `device` stayed idle for its grace after `requests` requests. Every request takes the
/// address from the directory and counts itself in at once, so when the directory handed the
/// address out exactly `requests` times nobody else has it: the directory forgets the actor
/// (which stops with its last address). A lookup that came first keeps it.
#[derive(Message)]
#[rtype(result = "()")]
pub(crate) struct Idle {
    device: String,
    requests: u64,
}

impl Handler<Idle> for DeviceDirectory {
    type Result = ();
    fn handle(&mut self, msg: Idle, _ctx: &mut Context<Self>) {
        if self
            .devices
            .get(&msg.device)
            .is_some_and(|e| e.handed == msg.requests)
        {
            self.devices.remove(&msg.device);
        }
    }
}

/// Every device actor.
#[derive(Message)]
#[rtype(result = "Vec<Addr<DeviceActor>>")]
pub(crate) struct AllDevices;

impl Handler<AllDevices> for DeviceDirectory {
    type Result = MessageResult<AllDevices>;
    fn handle(&mut self, _msg: AllDevices, _ctx: &mut Context<Self>) -> Self::Result {
        MessageResult(self.devices.values().map(|e| e.addr.clone()).collect())
    }
}
