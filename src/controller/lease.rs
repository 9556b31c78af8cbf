//! Leader election with a `coordination.k8s.io/v1` Lease, and the fence that keeps a deposed
//! leader from writing.
//!
//! Every change of the Lease is a compare-and-swap: a replace carrying the `resourceVersion` last
//! seen, so of two controllers that race for it exactly one wins and the other gets 409 Conflict.
//! A standby watches the Lease and takes it over only once it has seen the same version for a
//! whole lease duration (or at once when the holder released it or it does not exist).
//!
//! Time is only ever measured on the local monotonic clock; `renewTime` in the object is for
//! people, never compared with another machine's clock, so wall-clock offsets between machines
//! do not matter. The timeline that fences a leader whose renewals stop succeeding:
//!
//! ```text
//!  leader:  sends renewal R (t0) ─ succeeds ─ ... no write starts after t0 + renew deadline;
//!           a write in flight is abandoned after the write timeout (half the margin)
//!  standby: first sees R at t1 ≥ t0 ─ takes over no sooner than t1 + lease duration
//!  safe as long as t0 + renew deadline + write timeout < t0 + lease duration on both clocks:
//!  the clocks' rates may differ by up to (duration − deadline) / 2 per lease duration
//!  (2.5 s in 15 s with the defaults), far beyond any NTP-disciplined clock.
//! ```
//!
//! What timing cannot cover is a write the API server accepted before the leader's deadline but
//! applied after it (held up inside the server longer than the write timeout). Updates and
//! deletes carry preconditions (resourceVersion, uid) and fail rather than overwrite; creates are
//! named after their Node or Namespace, so the worst case is two objects with one subnet or
//! netid, which the new leader reports as a conflict (`/status`, metrics) — never silently.

use std::sync::Mutex;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, PostParams};
use kube::runtime::watcher;
use tokio::sync::watch;
use tokio::time::Instant;
use tracing::{info, warn};

use super::config::LeaseTiming;
use super::objects::FIELD_MANAGER;
use super::status::Status;

/// The write gate: open while this controller holds the Lease and its last successful renewal
/// is younger than the renew deadline. Every write asks it first.
#[derive(Debug)]
pub struct Fence {
    renew_deadline: Duration,
    /// Until when writes may start; None: not the leader.
    until: Mutex<Option<Instant>>,
    held: watch::Sender<bool>,
}

/// Why a write was not sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("not the leader: the lease was lost or its renewal is overdue")]
pub struct NotLeader;

impl Fence {
    pub fn new(renew_deadline: Duration) -> Fence {
        Fence {
            renew_deadline,
            until: Mutex::new(None),
            held: watch::channel(false).0,
        }
    }

    /// Writes may start until `renew_deadline` after `sent`, the moment the successful
    /// acquisition or renewal was sent (not when its answer came: that would count the
    /// request's own latency twice in the leader's favour).
    pub fn renewed(&self, sent: Instant) {
        let until = sent + self.renew_deadline;
        *self.until.lock().unwrap_or_else(|e| e.into_inner()) = Some(until);
        self.held.send_replace(true);
    }

    /// Closes the gate at once (lost, released, or shutting down).
    pub fn revoke(&self) {
        *self.until.lock().unwrap_or_else(|e| e.into_inner()) = None;
        self.held.send_replace(false);
    }

    /// Ok when a write may start now.
    pub fn check(&self) -> Result<(), NotLeader> {
        match *self.until.lock().unwrap_or_else(|e| e.into_inner()) {
            Some(until) if Instant::now() < until => Ok(()),
            _ => Err(NotLeader),
        }
    }

    /// When the gate closes unless renewed.
    fn until(&self) -> Option<Instant> {
        *self.until.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Resolves once the gate is closed by [`Fence::revoke`] (a deadline passing is noticed
    /// by [`Elector::hold`], which then revokes).
    pub async fn revoked(&self) {
        let mut held = self.held.subscribe();
        let _ = held.wait_for(|held| !*held).await;
    }
}

/// What a standby does next, given the Lease as last seen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Next {
    /// No Lease: create it.
    Create,
    /// Replace the version seen (it expired, was released, or is ours from an earlier run).
    TakeOver,
    /// Look again then, unless the Lease changes first.
    WaitUntil(Instant),
}

/// A standby's memory of the Lease: which version it saw, and since when (its own clock).
#[derive(Debug, Default)]
pub struct Observer {
    seen: Option<(String, Instant)>,
}

impl Observer {
    /// Decides what to do about `lease` at `now`. A holder's own `leaseDurationSeconds` is
    /// honoured when longer than ours (a controller configured with a longer lease is not
    /// deposed early by one with a shorter).
    pub fn next(&mut self, lease: Option<&Lease>, me: &str, ours: Duration, now: Instant) -> Next {
        let Some(lease) = lease else {
            self.seen = None;
            return Next::Create;
        };
        let spec = lease.spec.clone().unwrap_or_default();
        let holder = spec.holder_identity.as_deref().unwrap_or("");
        if holder.is_empty() || holder == me {
            return Next::TakeOver;
        }
        let version = lease.metadata.resource_version.clone().unwrap_or_default();
        let since = match &self.seen {
            Some((seen, since)) if *seen == version => *since,
            _ => {
                self.seen = Some((version, now));
                now
            }
        };
        let theirs = Duration::from_secs(
            u64::try_from(spec.lease_duration_seconds.unwrap_or(0)).unwrap_or(0),
        );
        let expires = since + ours.max(theirs);
        if now >= expires {
            Next::TakeOver
        } else {
            Next::WaitUntil(expires)
        }
    }
}

/// Takes, keeps and gives back the Lease.
#[derive(Clone)]
pub struct Elector {
    api: Api<Lease>,
    name: String,
    identity: String,
    timing: LeaseTiming,
}

/// The Lease as this controller last wrote it.
#[derive(Debug, Clone)]
pub struct Held {
    lease: Lease,
}

impl Held {
    pub fn transitions(&self) -> i32 {
        self.lease
            .spec
            .as_ref()
            .and_then(|s| s.lease_transitions)
            .unwrap_or(0)
    }
}

#[derive(Debug, thiserror::Error)]
pub enum LeaseError {
    #[error("lease {0}: {1}")]
    Api(String, #[source] kube::Error),
    #[error("lease {0}: no answer within {1:?}")]
    Timeout(String, Duration),
}

impl LeaseError {
    fn is_conflict(&self) -> bool {
        matches!(self, LeaseError::Api(_, kube::Error::Api(s)) if s.is_conflict() || s.is_already_exists())
    }
}

impl Elector {
    pub fn new(
        client: kube::Client,
        namespace: &str,
        name: &str,
        identity: &str,
        timing: LeaseTiming,
    ) -> Elector {
        Elector {
            api: Api::namespaced(client, namespace),
            name: name.to_string(),
            identity: identity.to_string(),
            timing,
        }
    }

    fn place(&self) -> String {
        format!("{}/{}", self.api.namespace().unwrap_or(""), self.name)
    }

    /// Waits (as a standby) until this controller holds the Lease; opens `fence` on success.
    /// `status` is told who holds it meanwhile.
    pub async fn acquire(&self, fence: &Fence, status: &Status) -> Held {
        let selector = format!("metadata.name={}", self.name);
        let config = watcher::Config::default().fields(&selector);
        let mut events = std::pin::pin!(watcher::watcher(self.api.clone(), config));
        let mut observer = Observer::default();
        // The Lease as last seen; None until the first listing is complete.
        let mut seen: Option<Option<Lease>> = None;
        let mut listing: Option<Lease> = None;
        let mut wake = Instant::now() + self.timing.retry_period;
        loop {
            tokio::select! {
                event = events.next() => match event {
                    Some(Ok(watcher::Event::Init)) => listing = None,
                    Some(Ok(watcher::Event::InitApply(lease))) => listing = Some(lease),
                    Some(Ok(watcher::Event::InitDone)) => seen = Some(listing.take()),
                    Some(Ok(watcher::Event::Apply(lease))) => seen = Some(Some(lease)),
                    Some(Ok(watcher::Event::Delete(_))) => seen = Some(None),
                    Some(Err(err)) => {
                        warn!(lease = %self.place(), "watching the lease: {err}");
                        tokio::time::sleep(self.timing.retry_period).await;
                    }
                    // A watcher restarts itself and never ends.
                    None => tokio::time::sleep(self.timing.retry_period).await,
                },
                () = tokio::time::sleep_until(wake) => {}
            }
            let Some(lease) = &seen else { continue };
            status.set_holder(current_holder(lease.as_ref()));
            let now = Instant::now();
            let attempt =
                match observer.next(lease.as_ref(), &self.identity, self.timing.duration, now) {
                    Next::WaitUntil(then) => {
                        wake = then;
                        continue;
                    }
                    Next::Create => self.create().await,
                    Next::TakeOver => match lease {
                        Some(lease) => self.take_over(lease).await,
                        None => continue,
                    },
                };
            match attempt {
                Ok(held) => {
                    fence.renewed(now);
                    status.set_holder(Some(self.identity.clone()));
                    info!(lease = %self.place(), identity = %self.identity, transitions = held.transitions(), "became the leader");
                    return held;
                }
                Err(err) => {
                    if !err.is_conflict() {
                        warn!("taking the lease: {err}");
                    }
                    // Someone else was faster, or the view is stale: read it afresh.
                    wake = Instant::now() + self.timing.retry_period;
                    let read = tokio::time::timeout(
                        self.timing.retry_period,
                        self.api.get_opt(&self.name),
                    );
                    if let Ok(Ok(fresh)) = read.await {
                        seen = Some(fresh);
                    }
                }
            }
        }
    }

    async fn create(&self) -> Result<Held, LeaseError> {
        let lease = Lease {
            metadata: ObjectMeta {
                name: Some(self.name.clone()),
                ..ObjectMeta::default()
            },
            spec: Some(LeaseSpec {
                holder_identity: Some(self.identity.clone()),
                lease_duration_seconds: Some(self.timing.duration_seconds()),
                acquire_time: Some(micro_now()),
                renew_time: Some(micro_now()),
                lease_transitions: Some(0),
                ..LeaseSpec::default()
            }),
        };
        let created = self.timed(self.api.create(&post_params(), &lease)).await?;
        Ok(Held { lease: created })
    }

    /// Replaces the version `seen` with this controller as holder (one more transition when
    /// the holder changes).
    async fn take_over(&self, seen: &Lease) -> Result<Held, LeaseError> {
        let mut lease = seen.clone();
        let spec = lease.spec.get_or_insert_with(LeaseSpec::default);
        let previous = spec.holder_identity.clone().unwrap_or_default();
        if previous != self.identity {
            spec.lease_transitions = Some(spec.lease_transitions.unwrap_or(0).saturating_add(1));
        }
        spec.holder_identity = Some(self.identity.clone());
        spec.lease_duration_seconds = Some(self.timing.duration_seconds());
        spec.acquire_time = Some(micro_now());
        spec.renew_time = Some(micro_now());
        let replaced = self
            .timed(self.api.replace(&self.name, &post_params(), &lease))
            .await?;
        if !previous.is_empty() && previous != self.identity {
            info!(lease = %self.place(), from = %previous, "took the lease over");
        }
        Ok(Held { lease: replaced })
    }

    /// Renews every retry period until a renewal conflicts (someone else holds it) or none
    /// succeeded within the renew deadline; then closes the fence and returns.
    pub async fn hold(&self, held: &mut Held, fence: &Fence) {
        loop {
            let Some(until) = fence.until() else { return };
            tokio::select! {
                () = tokio::time::sleep(self.timing.retry_period) => {}
                () = tokio::time::sleep_until(until) => {
                    warn!(lease = %self.place(), "no renewal succeeded within the renew deadline: stepping down");
                    fence.revoke();
                    return;
                }
                () = fence.revoked() => return,
            }
            let sent = Instant::now();
            match self.renew(held).await {
                Ok(renewed) => {
                    *held = renewed;
                    fence.renewed(sent);
                }
                Err(err) if err.is_conflict() => {
                    warn!(lease = %self.place(), "the lease changed under us ({err}): stepping down");
                    fence.revoke();
                    return;
                }
                Err(err) => warn!(lease = %self.place(), "renewing: {err}; retrying"),
            }
        }
    }

    async fn renew(&self, held: &Held) -> Result<Held, LeaseError> {
        let mut lease = held.lease.clone();
        let spec = lease.spec.get_or_insert_with(LeaseSpec::default);
        spec.renew_time = Some(micro_now());
        let timeout = self.timing.retry_period.min(self.timing.write_timeout());
        let replaced = tokio::time::timeout(
            timeout,
            self.api.replace(&self.name, &post_params(), &lease),
        )
        .await
        .map_err(|_| LeaseError::Timeout(self.place(), timeout))?
        .map_err(|e| LeaseError::Api(self.place(), e))?;
        Ok(Held { lease: replaced })
    }

    /// Gives the Lease back (holder cleared, as client-go releases) so that a standby takes
    /// over at once instead of after a lease duration. Call only once nothing writes any more.
    pub async fn release(&self, held: &Held) {
        let mut lease = held.lease.clone();
        let spec = lease.spec.get_or_insert_with(LeaseSpec::default);
        spec.holder_identity = None;
        spec.lease_duration_seconds = Some(1);
        spec.renew_time = Some(micro_now());
        match self
            .timed(self.api.replace(&self.name, &post_params(), &lease))
            .await
        {
            Ok(_) => info!(lease = %self.place(), "released the lease"),
            Err(err) => {
                warn!(lease = %self.place(), "releasing the lease: {err} (a standby takes over when it expires)")
            }
        }
    }

    async fn timed<T>(
        &self,
        request: impl std::future::Future<Output = Result<T, kube::Error>>,
    ) -> Result<T, LeaseError> {
        let timeout = self.timing.write_timeout();
        tokio::time::timeout(timeout, request)
            .await
            .map_err(|_| LeaseError::Timeout(self.place(), timeout))?
            .map_err(|e| LeaseError::Api(self.place(), e))
    }
}

fn current_holder(lease: Option<&Lease>) -> Option<String> {
    lease?
        .spec
        .as_ref()?
        .holder_identity
        .clone()
        .filter(|h| !h.is_empty())
}

fn micro_now() -> MicroTime {
    MicroTime(Timestamp::now())
}

fn post_params() -> PostParams {
    PostParams {
        field_manager: Some(FIELD_MANAGER.to_string()),
        ..PostParams::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lease(holder: Option<&str>, version: &str, seconds: i32) -> Lease {
        Lease {
            metadata: ObjectMeta {
                resource_version: Some(version.into()),
                ..ObjectMeta::default()
            },
            spec: Some(LeaseSpec {
                holder_identity: holder.map(str::to_string),
                lease_duration_seconds: Some(seconds),
                ..LeaseSpec::default()
            }),
        }
    }

    const LD: Duration = Duration::from_secs(15);

    #[tokio::test(start_paused = true)]
    async fn a_standby_takes_over_only_after_a_whole_duration_without_change() {
        let mut observer = Observer::default();
        let t0 = Instant::now();
        let theirs = lease(Some("a"), "1", 15);
        assert_eq!(
            observer.next(Some(&theirs), "b", LD, t0),
            Next::WaitUntil(t0 + LD)
        );
        // Seen again later: still counted from when this version was first seen.
        let t1 = t0 + Duration::from_secs(10);
        assert_eq!(
            observer.next(Some(&theirs), "b", LD, t1),
            Next::WaitUntil(t0 + LD)
        );
        // A renewal (new version) starts the count again.
        let renewed = lease(Some("a"), "2", 15);
        assert_eq!(
            observer.next(Some(&renewed), "b", LD, t1),
            Next::WaitUntil(t1 + LD)
        );
        assert_eq!(
            observer.next(Some(&renewed), "b", LD, t1 + LD),
            Next::TakeOver
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_released_missing_or_own_lease_is_taken_at_once_and_a_longer_one_is_honoured() {
        let mut observer = Observer::default();
        let now = Instant::now();
        assert_eq!(observer.next(None, "b", LD, now), Next::Create);
        assert_eq!(
            observer.next(Some(&lease(None, "3", 1)), "b", LD, now),
            Next::TakeOver
        );
        assert_eq!(
            observer.next(Some(&lease(Some(""), "3", 1)), "b", LD, now),
            Next::TakeOver
        );
        assert_eq!(
            observer.next(Some(&lease(Some("b"), "3", 15)), "b", LD, now),
            Next::TakeOver
        );
        let longer = lease(Some("a"), "4", 60);
        assert_eq!(
            observer.next(Some(&longer), "b", LD, now),
            Next::WaitUntil(now + Duration::from_secs(60))
        );
    }

    #[tokio::test(start_paused = true)]
    async fn the_fence_closes_at_the_renew_deadline_counted_from_the_send() {
        let fence = Fence::new(Duration::from_secs(10));
        assert_eq!(fence.check(), Err(NotLeader));
        let sent = Instant::now();
        tokio::time::advance(Duration::from_secs(1)).await;
        fence.renewed(sent);
        assert_eq!(fence.check(), Ok(()));
        tokio::time::advance(Duration::from_millis(8_999)).await;
        assert_eq!(fence.check(), Ok(()));
        tokio::time::advance(Duration::from_millis(1)).await;
        assert_eq!(fence.check(), Err(NotLeader));
        fence.renewed(Instant::now());
        fence.revoke();
        assert_eq!(fence.check(), Err(NotLeader));
        fence.revoked().await;
    }
}
