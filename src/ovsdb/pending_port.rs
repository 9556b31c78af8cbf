//! Adding a port without waiting for ovs-vswitchd to apply it.
//!
//! `add_port` returns the OpenFlow port ovs-vswitchd assigned, so it waits for ovs-vswitchd's
//! reconfiguration — most of the cost of adding a pod. `add_port_pending` instead chooses the
//! number itself (`ofport_request`: the lowest one free on the bridge, as ovs-vswitchd would
//! pick), commits the port, and returns at once; the caller can install flows for that number
//! while ovs-vswitchd catches up, and learns the outcome from [`PendingPort::applied`].
//! `choose_ofport` is the choice alone, for a caller that installs the flows before it adds
//! the port: the number stays reserved until the port's row is in the cache.

use std::collections::HashSet;
use std::sync::{Mutex, MutexGuard};

use tokio::sync::oneshot;

use super::client::Client;
use super::error::Result;
use super::monitor::Cache;
use super::ops::{
    check_interface, interface_row, plan_add_ports, validate_port_spec, PortSpec,
    MAX_OFPORT_REQUEST,
};
use super::types::{Datum, Row};

/// Numbers chosen for ports not applied yet, per bridge: two concurrent adds must not pick
/// the same number before either shows in the cache.
pub(super) type Reservations = Mutex<HashSet<(String, u16)>>;

/// An OpenFlow port number chosen for a port: reserved (no other choice on its bridge takes
/// it) until dropped, when ofnode chose it; the number the port has already, otherwise.
#[derive(Debug)]
pub struct PortNumber {
    client: Client,
    ofport: u16,
    reservation: Option<(String, u16)>,
}

impl PortNumber {
    pub fn ofport(&self) -> u16 {
        self.ofport
    }
}

impl Drop for PortNumber {
    fn drop(&mut self) {
        if let Some(reserved) = self.reservation.take() {
            lock(self.client.reservations()).remove(&reserved);
        }
    }
}

/// A port committed to the database; ovs-vswitchd may not have applied it yet.
#[derive(Debug)]
pub struct PendingPort {
    name: String,
    number: PortNumber,
    /// The configuration ovs-vswitchd has applied the port in; `None` when it already had.
    next_cfg: Option<i64>,
}

impl PendingPort {
    /// The OpenFlow port the port has (or asked for, until ovs-vswitchd has applied it).
    pub fn ofport(&self) -> u16 {
        self.number.ofport
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// Waits until ovs-vswitchd has applied the port, and checks it got the chosen number:
    /// `Error::OfportMismatch` (another port held it) or `Error::Interface` (ovs-vswitchd could
    /// not open the device) otherwise.
    pub async fn applied(self) -> Result<u16> {
        let client = &self.number.client;
        if let Some(next_cfg) = self.next_cfg {
            client.wait_for_cfg(next_cfg).await?;
        }
        let ofport = self.ofport();
        client.with_cache(|cache| check_interface(cache, &self.name, Some(ofport)))
    }
}

/// The lock's data even if a holder panicked: every update here is a single set or queue
/// operation, never left half done.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

/// Port adds waiting for the next transaction. ovs-vswitchd reconfigures once per transaction,
/// and each reconfiguration costs about as much for one port as for hundreds, so concurrent
/// adds share one transaction (200 ports here: 0.15 s in one, 8.5 s in one each).
#[derive(Debug, Default)]
pub(super) struct PortQueue {
    waiting: Vec<WaitingPort>,
    /// A task is sending the waiting ports; it stops when none are left.
    draining: bool,
}

type WaitingPort = (PortSpec, oneshot::Sender<Result<PendingPort>>);

/// One transaction stays well below ovsdb-server's and ovs-vswitchd's message limits.
const MAX_PORTS_PER_TRANSACTION: usize = 256;

impl Client {
    /// The OpenFlow number `spec`'s port will have once added: the one it has when it is on
    /// the bridge and applied as the spec asks, else `spec.ofport_request`, else the lowest
    /// number free on the bridge, reserved until the returned value is dropped (drop it once
    /// the port, asking for that number, is in the database). Fails without a session (the
    /// cache may be stale).
    pub fn choose_ofport(&self, spec: &PortSpec) -> Result<PortNumber> {
        validate_port_spec(spec)?;
        if !self.connected() {
            return Err(self.disconnected());
        }
        if let Some(ofport) = self.with_cache(|cache| applied_port(cache, spec)) {
            return Ok(self.number(ofport, None));
        }
        self.prepare_number(spec)
    }

    /// Adds a port (`--may-exist`, like [`Client::add_port`]) without waiting for ovs-vswitchd.
    /// A port that is already applied with the spec's columns comes back as it is; otherwise
    /// the port gets `spec.ofport_request`, or the lowest number free on the bridge. Concurrent
    /// calls share one transaction.
    pub async fn add_port_pending(&self, spec: &PortSpec) -> Result<PendingPort> {
        validate_port_spec(spec)?;
        if let Some(ofport) = self.with_cache(|cache| applied_port(cache, spec)) {
            return Ok(self.pending(spec, self.number(ofport, None)));
        }
        let (reply, answer) = oneshot::channel();
        let start_draining = {
            let mut queue = lock(self.port_queue());
            queue.waiting.push((spec.clone(), reply));
            !std::mem::replace(&mut queue.draining, true)
        };
        if start_draining {
            tokio::spawn(self.clone().drain_port_queue());
        }
        answer.await.map_err(|_| super::Error::Disconnected {
            reason: "the port queue stopped before answering".into(),
        })?
    }

    async fn drain_port_queue(self) {
        loop {
            let batch: Vec<WaitingPort> = {
                let mut queue = lock(self.port_queue());
                if queue.waiting.is_empty() {
                    queue.draining = false;
                    return;
                }
                let take = queue.waiting.len().min(MAX_PORTS_PER_TRANSACTION);
                queue.waiting.drain(..take).collect()
            };
            self.add_waiting_ports(batch).await;
        }
    }

    /// One transaction for the whole batch; if it fails, each port on its own, so that one bad
    /// port does not fail the others and gets its own error.
    async fn add_waiting_ports(&self, batch: Vec<WaitingPort>) {
        let prepared: Vec<Result<Prepared>> = batch
            .iter()
            .map(|(spec, _)| self.prepare_port(spec))
            .collect();
        let ready: Vec<&Prepared> = prepared.iter().filter_map(|p| p.as_ref().ok()).collect();
        let together = self.commit_ports(&ready).await;
        for ((_, reply), prepared) in batch.into_iter().zip(prepared) {
            let outcome = match (prepared, &together) {
                (Err(e), _) => Err(e),
                (Ok(p), Ok(next_cfg)) => Ok(p.into_pending(*next_cfg)),
                // Again alone: the error then is this port's own (or the same, for one port).
                (Ok(p), Err(_)) => self.add_prepared_alone(p).await,
            };
            // The caller may have gone; its reservation goes with the dropped PendingPort.
            let _ = reply.send(outcome);
        }
    }

    async fn add_prepared_alone(&self, prepared: Prepared) -> Result<PendingPort> {
        let next_cfg = self.commit_ports(&[&prepared]).await?;
        Ok(prepared.into_pending(next_cfg))
    }

    /// One transaction adding `ports`; the `next_cfg` ovs-vswitchd applies them in.
    async fn commit_ports(&self, ports: &[&Prepared]) -> Result<Option<i64>> {
        if ports.is_empty() {
            return Ok(None);
        }
        let rows: Vec<(PortSpec, Row)> = ports
            .iter()
            .map(|p| (p.spec.clone(), interface_row(&p.spec)))
            .collect();
        self.execute_bumping(true, |cache| plan_add_ports(cache, &rows).map(Some))
            .await
    }

    /// The spec's number: the one it asks for, or one ofnode chooses and reserves.
    fn prepare_number(&self, spec: &PortSpec) -> Result<PortNumber> {
        Ok(match spec.ofport_request {
            Some(requested) => self.number(requested, None),
            None => {
                let ofport = self.reserve_free_ofport(&spec.bridge)?;
                // From here the reservation is released on every path, by PortNumber's drop.
                self.number(ofport, Some((spec.bridge.clone(), ofport)))
            }
        })
    }

    /// The spec with its OpenFlow number (reserved when ofnode chose it).
    fn prepare_port(&self, spec: &PortSpec) -> Result<Prepared> {
        let number = self.prepare_number(spec)?;
        let spec = PortSpec {
            ofport_request: Some(number.ofport),
            ..spec.clone()
        };
        let pending = self.pending(&spec, number);
        Ok(Prepared { spec, pending })
    }

    fn number(&self, ofport: u16, reservation: Option<(String, u16)>) -> PortNumber {
        PortNumber {
            client: self.clone(),
            ofport,
            reservation,
        }
    }

    fn pending(&self, spec: &PortSpec, number: PortNumber) -> PendingPort {
        PendingPort {
            name: spec.name.clone(),
            number,
            next_cfg: None,
        }
    }

    fn reserve_free_ofport(&self, bridge: &str) -> Result<u16> {
        let mut reserved = lock(self.reservations());
        let taken = self.with_cache(|cache| ofports_on_bridge(cache, bridge));
        let free = (1..=MAX_OFPORT_REQUEST)
            .find(|n| !taken.contains(n) && !reserved.contains(&(bridge.to_string(), *n)))
            .ok_or_else(|| {
                super::Error::Invalid(format!("bridge {bridge} has no free OpenFlow port"))
            })?;
        reserved.insert((bridge.to_string(), free));
        Ok(free)
    }
}

/// A port ready for the transaction: the spec asks for its number.
struct Prepared {
    spec: PortSpec,
    pending: PendingPort,
}

impl Prepared {
    fn into_pending(self, next_cfg: Option<i64>) -> PendingPort {
        let mut pending = self.pending;
        pending.next_cfg = next_cfg;
        pending
    }
}

/// The OpenFlow port of `spec`'s interface when it is on the bridge, applied, and has the
/// columns the spec asks for (nothing to change).
fn applied_port(cache: &Cache, spec: &PortSpec) -> Option<u16> {
    let (port_uuid, _) = cache.find("Port", &spec.name)?;
    if cache.bridge_of_port(port_uuid) != Some(spec.bridge.as_str()) {
        return None;
    }
    let (_, iface) = cache.find("Interface", &spec.name)?;
    let ofport = u16::try_from(iface.get("ofport")?.as_i64()?).ok()?;
    let wanted = interface_row(spec);
    let same = ["type", "options"]
        .iter()
        .all(|column| iface.get(*column) == wanted.get(*column));
    let request_ok = spec.ofport_request.is_none_or(|r| r == ofport);
    (ofport > 0 && same && request_ok).then_some(ofport)
}

/// Every OpenFlow port number assigned or requested on `bridge`.
fn ofports_on_bridge(cache: &Cache, bridge: &str) -> HashSet<u16> {
    let Some((_, bridge_row)) = cache.find("Bridge", bridge) else {
        return HashSet::new();
    };
    let ports = bridge_row.get("ports").map(Datum::uuids);
    ports
        .into_iter()
        .flatten()
        .filter_map(|port| cache.row("Port", port))
        .filter_map(|port| port.get("interfaces").map(Datum::uuids))
        .flatten()
        .filter_map(|iface| cache.row("Interface", iface))
        .flat_map(|iface| {
            ["ofport", "ofport_request"]
                .into_iter()
                .filter_map(|column| iface.get(column).and_then(Datum::as_i64))
        })
        .filter_map(|n| u16::try_from(n).ok())
        .collect()
}
