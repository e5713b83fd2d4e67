//! `LeaseLock`: the reference per-device Kubernetes Lease lock (coordination.k8s.io/v1), written
//! with `kube::Api<Lease>`: create if absent, take over when expired, re-acquire by the holder,
//! every update a PUT carrying the object's resourceVersion (a 409 means someone else got there
//! first), renewal by the holder only, release by the holder clearing `holderIdentity`.

use crate::error::LeaseError;
use crate::holder_identity::HolderIdentity;
use crate::lease_name::lease_name;
use crate::metrics::{DeviceLockMetrics, LeaseVerb};
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::Api;
use kube::api::PostParams;
use std::time::Duration;
use tokio::sync::watch;

/// Default `leaseDurationSeconds`.
pub const DEFAULT_LEASE_DURATION: Duration = Duration::from_secs(15);

/// The default pause (jittered) before a write refused with a 409 (an acquisition from the
/// remembered copy, a renewal, a release) reads the Lease again: a refused write does not turn
/// into a burst of requests to one Lease.
pub const CONFLICT_BACKOFF: Duration = Duration::from_secs(1);

/// Duration and renew period of device Leases.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeaseSettings {
    /// `leaseDurationSeconds`: whole seconds, at least 1. Default 15 s.
    pub duration: Duration,
    /// How often the holder renews; `None` means a third of the duration. Must be shorter than the
    /// duration (rejected at construction otherwise).
    pub renew_period: Option<Duration>,
}

impl Default for LeaseSettings {
    fn default() -> Self {
        Self {
            duration: DEFAULT_LEASE_DURATION,
            renew_period: None,
        }
    }
}

impl LeaseSettings {
    /// Settings with the given duration and the default renew period (a third of it).
    pub fn with_duration(duration: Duration) -> Self {
        Self {
            duration,
            renew_period: None,
        }
    }

    /// Checks the settings; returns `(leaseDurationSeconds, renew period)`.
    pub fn validate(&self) -> Result<(i32, Duration), LeaseError> {
        let secs = self.duration.as_secs();
        if self.duration.subsec_nanos() != 0 || secs == 0 || secs > i32::MAX as u64 {
            return Err(LeaseError::InvalidSettings(format!(
                "lease duration must be a whole number of seconds >= 1, got {:?}",
                self.duration
            )));
        }
        let renew = self.renew_period.unwrap_or(self.duration / 3);
        if renew.is_zero() || renew >= self.duration {
            return Err(LeaseError::InvalidSettings(format!(
                "renew period {renew:?} must be positive and shorter than the lease duration {:?}",
                self.duration
            )));
        }
        // secs <= i32::MAX was checked above.
        Ok((secs as i32, renew))
    }
}

/// A Lease as last seen by this process (for the admin endpoint).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct ObservedLease {
    /// Lease name.
    pub name: String,
    /// `holderIdentity` (none when released).
    pub holder: Option<String>,
    /// `renewTime`, RFC 3339.
    pub renew_time: Option<String>,
    /// `acquireTime`, RFC 3339.
    pub acquire_time: Option<String>,
    /// `leaseDurationSeconds`.
    pub lease_duration_seconds: Option<i32>,
    /// `leaseTransitions`.
    pub lease_transitions: Option<i32>,
    /// When this process saw it, RFC 3339.
    pub observed_at: String,
}

/// How an acquisition succeeded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Acquired {
    /// The Lease did not exist and was created with this process as holder.
    Created,
    /// This process already held it; renewTime moved forward.
    Reacquired,
    /// The Lease existed without a holder (released).
    Free,
    /// Another holder's Lease had expired and was taken over (`leaseTransitions` + 1).
    TakenOver {
        /// The holder whose Lease expired.
        previous_holder: String,
    },
}

/// What a release did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Released {
    /// This process was the holder; `holderIdentity` is now cleared.
    Released,
    /// Someone else (or nobody) holds the Lease: nothing was changed.
    NotHolder {
        /// The actual holder, if any.
        holder: Option<String>,
    },
    /// The Lease does not exist: nothing was changed.
    Missing,
}

/// The result of an update attempted as holder.
enum AsHolder {
    Updated,
    NotHolder(Option<String>),
    Missing,
}

/// A per-device Lease lock for one holder identity.
#[derive(Debug)]
pub struct LeaseLock {
    api: Api<Lease>,
    name: String,
    device_id: String,
    identity: HolderIdentity,
    duration_seconds: i32,
    duration: Duration,
    renew_period: Duration,
    /// Whether the Lease belongs to a device (annotated with the device id on create).
    for_device: bool,
    /// The pause (jittered) before a write refused with a 409 is decided again from a fresh read.
    conflict_backoff: Duration,
    metrics: Option<DeviceLockMetrics>,
    /// The Lease as last seen by this process (any read or write), published for inspection (each
    /// API call's answer replaces the snapshot whole).
    observed: watch::Sender<Option<ObservedLease>>,
    /// The Lease as this holder last wrote it (acquired, renewed or released), or last read it free
    /// after a refused write, published the same way (saves a GET on acquire, renew and release; a
    /// stale copy only costs a 409 and one GET, thanks to resourceVersion).
    last_written: watch::Sender<Option<Lease>>,
}

impl LeaseLock {
    /// A lock on the Lease of `device_id` in `namespace`. Rejects a duration that is not a whole
    /// number of seconds and a renew period not shorter than the duration.
    pub fn new(
        client: kube::Client,
        namespace: &str,
        device_id: &str,
        identity: HolderIdentity,
        settings: &LeaseSettings,
    ) -> Result<Self, LeaseError> {
        let validated = settings.validate()?;
        Ok(Self::with_validated(
            client, namespace, device_id, identity, validated,
        ))
    }

    /// [`LeaseLock::new`] with settings already checked by [`LeaseSettings::validate`].
    pub(crate) fn with_validated(
        client: kube::Client,
        namespace: &str,
        device_id: &str,
        identity: HolderIdentity,
        (duration_seconds, renew_period): (i32, Duration),
    ) -> Self {
        Self {
            api: Api::namespaced(client, namespace),
            name: lease_name(device_id),
            device_id: device_id.to_owned(),
            identity,
            duration_seconds,
            duration: Duration::from_secs(duration_seconds.unsigned_abs().into()),
            renew_period,
            for_device: true,
            conflict_backoff: CONFLICT_BACKOFF,
            metrics: None,
            observed: watch::Sender::new(None),
            last_written: watch::Sender::new(None),
        }
    }

    /// A lock on the Lease called exactly `name` in `namespace` (no `cinder-device-` prefix, no
    /// device annotation), e.g. the leader-election Lease. `device_id()` then returns the name.
    /// Rejects a name that is not a valid Lease name (DNS subdomain) and invalid settings.
    pub fn with_name(
        client: kube::Client,
        namespace: &str,
        name: &str,
        identity: HolderIdentity,
        settings: &LeaseSettings,
    ) -> Result<Self, LeaseError> {
        if !is_dns_subdomain(name) {
            return Err(LeaseError::InvalidSettings(format!(
                "{name:?} is not a valid Lease name (lowercase DNS subdomain, at most 253 characters)"
            )));
        }
        let mut lock = Self::new(client, namespace, name, identity, settings)?;
        lock.name = name.to_owned();
        lock.for_device = false;
        Ok(lock)
    }

    /// Pauses `jitter(backoff)` (instead of [`CONFLICT_BACKOFF`]) before deciding again after a
    /// write refused with a 409.
    pub fn with_conflict_backoff(mut self, backoff: Duration) -> Self {
        self.conflict_backoff = backoff;
        self
    }

    /// Counts API calls, takeovers into `metrics`.
    pub fn with_metrics(mut self, metrics: DeviceLockMetrics) -> Self {
        self.metrics = Some(metrics);
        self
    }

    /// The metrics this lock counts into, if any.
    pub fn metrics(&self) -> Option<&DeviceLockMetrics> {
        self.metrics.as_ref()
    }

    /// The Lease name (derived from the device id, or given to [`LeaseLock::with_name`]).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The device id.
    pub fn device_id(&self) -> &str {
        &self.device_id
    }

    /// This lock's holder identity.
    pub fn identity(&self) -> &HolderIdentity {
        &self.identity
    }

    /// `leaseDurationSeconds` as a duration.
    pub fn duration(&self) -> Duration {
        self.duration
    }

    /// The renew period.
    pub fn renew_period(&self) -> Duration {
        self.renew_period
    }

    /// Reads the Lease (one GET).
    pub async fn get(&self) -> Result<Option<Lease>, LeaseError> {
        self.count(LeaseVerb::Get);
        let lease = self
            .api
            .get_opt(&self.name)
            .await
            .map_err(|e| self.api_err(e))?;
        self.observe(lease.as_ref());
        Ok(lease)
    }

    /// The Lease as last read or written by this lock (no API call); `None` before the first call
    /// or when it was missing.
    pub fn observed(&self) -> Option<ObservedLease> {
        self.observed.borrow().clone()
    }

    fn observe(&self, lease: Option<&Lease>) {
        let view = lease.map(|l| {
            let spec = l.spec.clone().unwrap_or_default();
            ObservedLease {
                name: self.name.clone(),
                holder: spec.holder_identity.filter(|h| !h.is_empty()),
                renew_time: spec.renew_time.map(|t| t.0.to_string()),
                acquire_time: spec.acquire_time.map(|t| t.0.to_string()),
                lease_duration_seconds: spec.lease_duration_seconds,
                lease_transitions: spec.lease_transitions,
                observed_at: Timestamp::now().to_string(),
            }
        });
        self.observed.send_replace(view);
    }

    /// Acquires the Lease: creates it when absent, re-acquires it when this process holds it, takes
    /// it when free or expired; otherwise `Err(LeaseError::Held)`. Starts from the copy this lock
    /// last wrote when there is one (no GET: an acquire right after this process's release is one
    /// PUT); that copy being stale only costs a 409, then (after `jitter(conflict backoff)`) one
    /// GET and a second decision, because every PUT carries the resourceVersion it was decided on.
    pub async fn acquire(&self) -> Result<Acquired, LeaseError> {
        let mut base = self.remembered();
        loop {
            let from_memory = base.is_some();
            let current = match base.take() {
                Some(lease) => lease,
                None => match self.get().await? {
                    Some(lease) => lease,
                    None => return self.create(Timestamp::now()).await,
                },
            };
            let (desired, outcome) = match decide_acquire(
                current,
                &self.identity,
                Timestamp::now(),
                self.duration_seconds,
            ) {
                Ok(decided) => decided,
                Err(holder) => {
                    return Err(LeaseError::Held {
                        lease: self.name.clone(),
                        holder,
                    });
                }
            };
            match self.replace(&desired).await {
                Ok(written) => {
                    self.remember(Some(written));
                    if matches!(outcome, Acquired::TakenOver { .. })
                        && let Some(m) = &self.metrics
                    {
                        m.takeovers.inc();
                    }
                    return Ok(outcome);
                }
                // The remembered copy was stale: read the Lease and decide again, after the
                // jittered pause.
                Err(e) if from_memory && (is_status(&e, 409) || is_status(&e, 404)) => {
                    self.remember(None);
                    self.pause_after_conflict().await;
                }
                Err(e) if is_status(&e, 409) || is_status(&e, 404) => {
                    return Err(self.held_after_race().await);
                }
                Err(e) => return Err(self.api_err(e)),
            }
        }
    }

    /// Moves renewTime forward. Fails with `NotHolder` / `Missing` when this process is not the
    /// holder (any more).
    pub async fn renew(&self) -> Result<(), LeaseError> {
        let outcome = self
            .update_as_holder(|spec| spec.renew_time = Some(MicroTime(Timestamp::now())))
            .await?;
        match outcome {
            AsHolder::Updated => Ok(()),
            AsHolder::NotHolder(holder) => Err(LeaseError::NotHolder {
                lease: self.name.clone(),
                holder,
            }),
            AsHolder::Missing => Err(LeaseError::Missing {
                lease: self.name.clone(),
            }),
        }
    }

    /// Releases the Lease by clearing `holderIdentity` (the object stays, keeping
    /// `leaseTransitions`). A release by a non-holder or of a missing Lease changes nothing.
    pub async fn release(&self) -> Result<Released, LeaseError> {
        let outcome = self
            .update_as_holder(|spec| spec.holder_identity = None)
            .await?;
        // The released copy stays remembered: the next acquire starts from it.
        Ok(match outcome {
            AsHolder::Updated => Released::Released,
            AsHolder::NotHolder(holder) => Released::NotHolder { holder },
            AsHolder::Missing => Released::Missing,
        })
    }

    async fn create(&self, now: Timestamp) -> Result<Acquired, LeaseError> {
        let lease = Lease {
            metadata: ObjectMeta {
                name: Some(self.name.clone()),
                labels: Some(
                    [(
                        "app.kubernetes.io/managed-by".to_owned(),
                        "cinder-operator".to_owned(),
                    )]
                    .into(),
                ),
                annotations: self.for_device.then(|| {
                    [(
                        "cinder.openstack.c5c3.io/device".to_owned(),
                        self.device_id.clone(),
                    )]
                    .into()
                }),
                ..ObjectMeta::default()
            },
            spec: Some(LeaseSpec {
                holder_identity: Some(self.identity.to_string()),
                lease_duration_seconds: Some(self.duration_seconds),
                acquire_time: Some(MicroTime(now)),
                renew_time: Some(MicroTime(now)),
                lease_transitions: Some(0),
                ..LeaseSpec::default()
            }),
        };
        self.count(LeaseVerb::Create);
        match self.api.create(&PostParams::default(), &lease).await {
            Ok(written) => {
                self.remember(Some(written));
                Ok(Acquired::Created)
            }
            // Someone else created it first: treat as held.
            Err(e) if is_status(&e, 409) => Err(self.held_after_race().await),
            Err(e) => Err(self.api_err(e)),
        }
    }

    /// After losing a race (409 on create or replace): names the winner with one GET. A read that
    /// shows the Lease free (the refused write was the API server's, not a rival's) is kept as the
    /// base of the next acquire, which is then one PUT; a copy naming another holder is not kept,
    /// because that holder may release before its Lease expires and only a read shows it.
    async fn held_after_race(&self) -> LeaseError {
        let holder = match self.get().await {
            Ok(Some(lease)) => {
                let holder = lease
                    .spec
                    .as_ref()
                    .and_then(|s| s.holder_identity.clone())
                    .filter(|h| !h.is_empty());
                if holder.is_none() {
                    self.remember(Some(lease));
                }
                holder
            }
            _ => None,
        };
        LeaseError::Held {
            lease: self.name.clone(),
            holder: holder.unwrap_or_else(|| "another replica (concurrent update)".to_owned()),
        }
    }

    /// Applies `change` to the Lease if this process holds it, PUT with resourceVersion. Starts from
    /// the last written copy when there is one; on a 409 re-reads once, after
    /// `jitter(CONFLICT_BACKOFF)`, and tries again.
    async fn update_as_holder(
        &self,
        change: impl Fn(&mut LeaseSpec),
    ) -> Result<AsHolder, LeaseError> {
        let mut base = self.remembered();
        for attempt in 0..2 {
            let current = match base.take() {
                Some(lease) => lease,
                None => match self.get().await? {
                    Some(lease) => lease,
                    None => {
                        self.remember(None);
                        return Ok(AsHolder::Missing);
                    }
                },
            };
            let mut spec = current.spec.clone().unwrap_or_default();
            let holder = spec.holder_identity.clone().filter(|h| !h.is_empty());
            if holder.as_deref() != Some(self.identity.as_str()) {
                self.remember(None);
                return Ok(AsHolder::NotHolder(holder));
            }
            change(&mut spec);
            let mut desired = current;
            desired.spec = Some(spec);
            match self.replace(&desired).await {
                Ok(written) => {
                    self.remember(Some(written));
                    return Ok(AsHolder::Updated);
                }
                Err(e) if is_status(&e, 404) => {
                    self.remember(None);
                    return Ok(AsHolder::Missing);
                }
                Err(e) if is_status(&e, 409) && attempt == 0 => {
                    // Our copy was stale (or the write was refused): re-read and decide again,
                    // after the jittered pause.
                    self.remember(None);
                    self.pause_after_conflict().await;
                }
                Err(e) if is_status(&e, 409) => {
                    self.remember(None);
                    return Err(self.held_after_race().await);
                }
                Err(e) => return Err(self.api_err(e)),
            }
        }
        Err(self.held_after_race().await)
    }

    async fn pause_after_conflict(&self) {
        tokio::time::sleep(crate::jitter::jitter(self.conflict_backoff)).await;
    }

    async fn replace(&self, lease: &Lease) -> Result<Lease, kube::Error> {
        self.count(LeaseVerb::Replace);
        self.api
            .replace(&self.name, &PostParams::default(), lease)
            .await
    }

    fn remembered(&self) -> Option<Lease> {
        self.last_written.borrow().clone()
    }

    fn remember(&self, lease: Option<Lease>) {
        if lease.is_some() {
            self.observe(lease.as_ref());
        }
        self.last_written.send_replace(lease);
    }

    fn count(&self, verb: LeaseVerb) {
        if let Some(m) = &self.metrics {
            m.count_call(verb);
        }
    }

    fn api_err(&self, source: kube::Error) -> LeaseError {
        LeaseError::Api {
            lease: self.name.clone(),
            source,
        }
    }
}

/// The acquisition `identity` makes of `current` at `now`: the Lease to PUT and how it was
/// acquired (re-acquired by its holder, free, or another holder's expired Lease taken over), or
/// `Err(holder)` when another holder's Lease is still valid.
pub fn decide_acquire(
    mut current: Lease,
    identity: &HolderIdentity,
    now: Timestamp,
    duration_seconds: i32,
) -> Result<(Lease, Acquired), String> {
    let mut spec = current.spec.take().unwrap_or_default();
    let holder = spec.holder_identity.clone().filter(|h| !h.is_empty());
    let outcome = match holder {
        Some(h) if h == identity.as_str() => {
            spec.renew_time = Some(MicroTime(now));
            Acquired::Reacquired
        }
        Some(h) if !is_expired(&spec, now, duration_seconds) => return Err(h),
        previous => {
            spec.holder_identity = Some(identity.to_string());
            spec.acquire_time = Some(MicroTime(now));
            spec.renew_time = Some(MicroTime(now));
            spec.lease_transitions = Some(spec.lease_transitions.unwrap_or(0).saturating_add(1));
            match previous {
                Some(previous_holder) => Acquired::TakenOver { previous_holder },
                None => Acquired::Free,
            }
        }
    };
    spec.lease_duration_seconds = Some(duration_seconds);
    current.spec = Some(spec);
    Ok((current, outcome))
}

/// Whether the Lease's `renewTime + leaseDurationSeconds` (acquireTime when never renewed) has
/// passed at `now`. A Lease without either time is expired; without a duration, `default_secs`.
pub fn is_expired(spec: &LeaseSpec, now: Timestamp, default_secs: i32) -> bool {
    let Some(last) = spec.renew_time.as_ref().or(spec.acquire_time.as_ref()) else {
        return true;
    };
    let secs = spec.lease_duration_seconds.unwrap_or(default_secs);
    now.duration_since(last.0) > SignedDuration::from_secs(i64::from(secs))
}

/// A lowercase RFC 1123 DNS subdomain: dot-separated labels of `[a-z0-9-]`, each starting and
/// ending with an alphanumeric, at most 253 characters in all.
fn is_dns_subdomain(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 253
        && name.split('.').all(|label| {
            !label.is_empty()
                && label
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                && !label.starts_with('-')
                && !label.ends_with('-')
        })
}

fn is_status(e: &kube::Error, code: u16) -> bool {
    matches!(e, kube::Error::Api(status) if status.code == code)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_validation() {
        assert!(LeaseSettings::default().validate().is_ok());
        assert_eq!(
            LeaseSettings::default().validate().unwrap(),
            (15, Duration::from_secs(5))
        );
        let equal = LeaseSettings {
            duration: Duration::from_secs(3),
            renew_period: Some(Duration::from_secs(3)),
        };
        assert!(equal.validate().is_err());
        let fractional = LeaseSettings::with_duration(Duration::from_millis(2500));
        assert!(fractional.validate().is_err());
        assert!(
            LeaseSettings::with_duration(Duration::ZERO)
                .validate()
                .is_err()
        );
    }

    #[test]
    fn lease_names_are_dns_subdomains() {
        assert!(is_dns_subdomain("cinder-operator-leader"));
        assert!(is_dns_subdomain("a.b-c.d0"));
        for bad in ["", "Leader", "-x", "x-", "a..b", "a_b", &"x".repeat(254)] {
            assert!(!is_dns_subdomain(bad), "{bad:?}");
        }
    }

    fn lease_held_by(holder: Option<&str>, renewed_ago: i64, now: Timestamp) -> Lease {
        Lease {
            metadata: ObjectMeta {
                name: Some("l".into()),
                resource_version: Some("7".into()),
                ..ObjectMeta::default()
            },
            spec: Some(LeaseSpec {
                holder_identity: holder.map(str::to_owned),
                renew_time: Some(MicroTime(now - SignedDuration::from_secs(renewed_ago))),
                lease_duration_seconds: Some(10),
                lease_transitions: Some(2),
                ..LeaseSpec::default()
            }),
        }
    }

    #[test]
    fn acquisition_decisions() {
        let now = Timestamp::now();
        let me = HolderIdentity::for_pod("me");
        // Free: taken, one more transition, the resourceVersion it was decided on kept.
        let (lease, how) = decide_acquire(lease_held_by(None, 1, now), &me, now, 15).unwrap();
        assert_eq!(how, Acquired::Free);
        let spec = lease.spec.unwrap();
        assert_eq!(spec.holder_identity.as_deref(), Some(me.as_str()));
        assert_eq!(spec.lease_transitions, Some(3));
        assert_eq!(spec.lease_duration_seconds, Some(15));
        assert_eq!(lease.metadata.resource_version.as_deref(), Some("7"));
        // Held by this process: renewed, no transition.
        let (lease, how) =
            decide_acquire(lease_held_by(Some(me.as_str()), 1, now), &me, now, 15).unwrap();
        assert_eq!(how, Acquired::Reacquired);
        assert_eq!(lease.spec.unwrap().lease_transitions, Some(2));
        // Another holder within its duration: refused, naming it.
        assert_eq!(
            decide_acquire(lease_held_by(Some("other"), 5, now), &me, now, 15).unwrap_err(),
            "other"
        );
        // Another holder past its duration: taken over.
        let (_, how) = decide_acquire(lease_held_by(Some("other"), 11, now), &me, now, 15).unwrap();
        assert_eq!(
            how,
            Acquired::TakenOver {
                previous_holder: "other".into()
            }
        );
    }

    #[test]
    fn expiry_uses_renew_time_and_duration() {
        let now = Timestamp::now();
        let spec = |ago: i64| LeaseSpec {
            renew_time: Some(MicroTime(now - SignedDuration::from_secs(ago))),
            lease_duration_seconds: Some(10),
            ..LeaseSpec::default()
        };
        assert!(!is_expired(&spec(5), now, 15));
        assert!(is_expired(&spec(11), now, 15));
        assert!(is_expired(&LeaseSpec::default(), now, 15));
    }
}
