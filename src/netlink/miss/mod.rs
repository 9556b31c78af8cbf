//! The neighbour-miss loop: the kernel asks userspace (RTNLGRP_NEIGH) where an overlay IP or a
//! MAC lives, and a resolver answers with a neighbour or FDB entry that this loop installs.
//!
//! Two tasks joined by a bounded queue: a reader that owns the multicast socket and keeps only
//! misses of one link, and a handler that resolves and installs. The kernel drops notifications
//! when the socket's receive buffer is full and reports it as ENOBUFS; the reader then counts an
//! overrun and the handler resynchronises from the kernel's tables (unresolved neighbour
//! entries, neighbours whose MAC has no FDB entry) instead of dying. A full queue is handled the
//! same way.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr};
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::BytesMut;
use netlink_packet_core::{NetlinkBuffer, NetlinkMessage, NetlinkPayload};
use netlink_packet_route::RouteNetlinkMessage;
use netlink_sys::{AsyncSocketExt, TokioSocket};
use nix::errno::Errno;
use tokio::sync::{mpsc, Notify};
use tokio::task::JoinHandle;

use super::error::{Error, Result};
use super::handle::{open_socket, Handle};
use super::neigh::{neighbour_fields, NeighEntry, NudState};
use super::types::MacAddr;

/// The multicast group of neighbour notifications and misses.
const RTNLGRP_NEIGH: u32 = rtnetlink::MulticastGroup::Neigh as u32;
/// Large enough for any netlink datagram (at most 32 KiB since Linux 4.9).
const RECV_BUFFER: usize = 64 * 1024;
/// netlink messages in one datagram are 4-byte aligned.
const NLMSG_ALIGN: usize = 4;
const NLMSG_HEADER_LEN: usize = 16;
/// The seed waits a second after a receive error before trying again.
const RECV_ERROR_PAUSE: Duration = Duration::from_secs(1);
const RESYNC_RETRY_PAUSE: Duration = Duration::from_millis(500);

/// What the kernel could not resolve on the VXLAN device.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Miss {
    /// Which MAC has this overlay IP? (NDA_DST only.)
    L3(Ipv4Addr),
    /// Which VTEP has this MAC? (NDA_LLADDR only.)
    L2(MacAddr),
}

impl fmt::Display for Miss {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Miss::L3(ip) => write!(f, "L3 miss for {ip}"),
            Miss::L2(mac) => write!(f, "L2 miss for {mac}"),
        }
    }
}

/// The entry a resolver wants installed for a miss.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Answer {
    /// `ip` is at `mac` (a neighbour entry, NUD_REACHABLE).
    Neighbour { ip: Ipv4Addr, mac: MacAddr },
    /// Frames for `mac` go to the VTEP `vtep` (an FDB entry, NUD_REACHABLE).
    Fdb { mac: MacAddr, vtep: Ipv4Addr },
}

/// Tuning of the miss loop.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MissOptions {
    /// Misses that may wait between the socket reader and the handler; more are dropped (and
    /// recovered by a resync).
    pub queue: usize,
    /// SO_RCVBUF of the multicast socket; the kernel's default when `None`. The kernel doubles
    /// the value and clamps it between its minimum and `net.core.rmem_max`.
    pub rcvbuf: Option<usize>,
}

impl Default for MissOptions {
    fn default() -> MissOptions {
        MissOptions {
            queue: 1024,
            rcvbuf: None,
        }
    }
}

/// What the loop has done so far.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct MissStats {
    /// Misses for our link received from the kernel.
    pub seen: u64,
    /// Misses (received or found by a resync) answered with an installed entry.
    pub answered: u64,
    /// Misses the resolver had no answer for.
    pub unknown: u64,
    /// Answers the kernel refused to install (or a resolver that panicked).
    pub failed: u64,
    /// Receive buffer overruns (ENOBUFS): notifications the kernel dropped.
    pub overruns: u64,
    /// Misses dropped because the queue to the handler was full.
    pub queue_full: u64,
    /// Resynchronisations from the kernel's tables.
    pub resyncs: u64,
    /// Misses a resync found in the kernel's tables.
    pub recovered: u64,
    /// Receive errors other than overruns.
    pub receive_errors: u64,
}

#[derive(Default)]
struct Counters {
    seen: AtomicU64,
    answered: AtomicU64,
    unknown: AtomicU64,
    failed: AtomicU64,
    overruns: AtomicU64,
    queue_full: AtomicU64,
    resyncs: AtomicU64,
    recovered: AtomicU64,
    receive_errors: AtomicU64,
}

fn bump(counter: &AtomicU64) {
    counter.fetch_add(1, Ordering::Relaxed);
}

impl Counters {
    fn snapshot(&self) -> MissStats {
        let load = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
        MissStats {
            seen: load(&self.seen),
            answered: load(&self.answered),
            unknown: load(&self.unknown),
            failed: load(&self.failed),
            overruns: load(&self.overruns),
            queue_full: load(&self.queue_full),
            resyncs: load(&self.resyncs),
            recovered: load(&self.recovered),
            receive_errors: load(&self.receive_errors),
        }
    }
}

struct Shared {
    counters: Counters,
    /// Wakes the handler to resynchronise; a pending wake-up is kept until taken, and several
    /// requests before it is taken make one resync.
    resync: Notify,
}

/// A running miss loop; dropping it stops both tasks.
pub struct MissLoop {
    shared: Arc<Shared>,
    reader: JoinHandle<()>,
    handler: JoinHandle<()>,
    link_index: u32,
}

impl MissLoop {
    /// Subscribes to RTNLGRP_NEIGH in `handle`'s namespace and answers the misses of link
    /// `link_index` with `resolver`, installing its answers through `handle`.
    pub fn spawn<R>(
        handle: &Handle,
        link_index: u32,
        resolver: R,
        options: MissOptions,
    ) -> Result<MissLoop>
    where
        R: Fn(&Miss) -> Option<Answer> + Send + Sync + 'static,
    {
        let runtime = tokio::runtime::Handle::try_current().map_err(|_| Error::NoRuntime)?;
        let socket = open_socket(handle.netns(), "neighbour miss listener", |socket| {
            socket.bind_auto()?;
            socket.add_membership(RTNLGRP_NEIGH)?;
            if let Some(size) = options.rcvbuf {
                socket.set_rx_buf_sz(i32::try_from(size).unwrap_or(i32::MAX))?;
            }
            Ok(())
        })?;
        let shared = Arc::new(Shared {
            counters: Counters::default(),
            resync: Notify::new(),
        });
        let (queue_tx, queue_rx) = mpsc::channel(options.queue.max(1));
        let reader = runtime.spawn(read_misses(socket, link_index, queue_tx, shared.clone()));
        let handler = runtime.spawn(answer_misses(
            handle.clone(),
            link_index,
            queue_rx,
            resolver,
            shared.clone(),
        ));
        Ok(MissLoop {
            shared,
            reader,
            handler,
            link_index,
        })
    }

    pub fn stats(&self) -> MissStats {
        self.shared.counters.snapshot()
    }

    pub fn link_index(&self) -> u32 {
        self.link_index
    }

    /// True while both tasks run (they only end when the loop is dropped).
    pub fn is_running(&self) -> bool {
        !self.reader.is_finished() && !self.handler.is_finished()
    }

    /// Asks for a resync from the kernel's tables (e.g. after the set of known hosts changed).
    pub fn request_resync(&self) {
        self.shared.resync.notify_one();
    }
}

impl Drop for MissLoop {
    fn drop(&mut self) {
        self.reader.abort();
        self.handler.abort();
    }
}

impl fmt::Debug for MissLoop {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MissLoop")
            .field("link_index", &self.link_index)
            .field("stats", &self.stats())
            .finish()
    }
}

async fn read_misses(
    socket: TokioSocket,
    link_index: u32,
    queue: mpsc::Sender<Miss>,
    shared: Arc<Shared>,
) {
    let counters = &shared.counters;
    let mut buffer = BytesMut::with_capacity(RECV_BUFFER);
    loop {
        buffer.clear();
        buffer.reserve(RECV_BUFFER);
        match socket.recv_from(&mut buffer).await {
            Ok(_) => {
                for miss in misses_in_datagram(&buffer, link_index) {
                    bump(&counters.seen);
                    match queue.try_send(miss) {
                        Ok(()) => {}
                        Err(mpsc::error::TrySendError::Full(miss)) => {
                            bump(&counters.queue_full);
                            tracing::debug!(%miss, "miss queue full: dropped, a resync will recover it");
                            shared.resync.notify_one();
                        }
                        Err(mpsc::error::TrySendError::Closed(_)) => return,
                    }
                }
            }
            Err(err) if err.raw_os_error() == Some(Errno::ENOBUFS as i32) => {
                bump(&counters.overruns);
                tracing::warn!(
                    link_index,
                    overruns = counters.overruns.load(Ordering::Relaxed),
                    "neighbour notifications overran the socket buffer (ENOBUFS); \
                     resynchronising from the kernel's tables"
                );
                shared.resync.notify_one();
            }
            Err(err) => {
                bump(&counters.receive_errors);
                tracing::error!(
                    link_index,
                    "receiving neighbour notifications failed: {err}"
                );
                tokio::time::sleep(RECV_ERROR_PAUSE).await;
            }
        }
        if queue.is_closed() {
            return;
        }
    }
}

/// The misses of `link_index` among the messages of one datagram. A malformed message ends the
/// datagram (its length cannot be trusted to find the next one) but never the loop.
fn misses_in_datagram(datagram: &[u8], link_index: u32) -> Vec<Miss> {
    let mut misses = Vec::new();
    let mut rest = datagram;
    while rest.len() >= NLMSG_HEADER_LEN {
        let Ok(buffer) = NetlinkBuffer::new_checked(rest) else {
            tracing::debug!("malformed netlink header in a neighbour notification");
            break;
        };
        let length = buffer.length() as usize;
        if length < NLMSG_HEADER_LEN || length > rest.len() {
            break;
        }
        match NetlinkMessage::<RouteNetlinkMessage>::deserialize(&rest[..length]) {
            Ok(message) => misses.extend(classify(&message, link_index)),
            Err(err) => tracing::debug!("undecodable neighbour notification: {err}"),
        }
        let advance = length.div_ceil(NLMSG_ALIGN) * NLMSG_ALIGN;
        rest = rest.get(advance..).unwrap_or_default();
    }
    misses
}

/// The seed's `processNeighMsg` filter: an RTM_GETNEIGH or RTM_NEWNEIGH for our link in a
/// resolving state; then NDA_DST alone is an L3 miss and NDA_LLADDR alone an L2 miss.
fn classify(message: &NetlinkMessage<RouteNetlinkMessage>, link_index: u32) -> Option<Miss> {
    let NetlinkPayload::InnerMessage(inner) = &message.payload else {
        return None;
    };
    let neighbour = match inner {
        RouteNetlinkMessage::GetNeighbour(neighbour)
        | RouteNetlinkMessage::NewNeighbour(neighbour) => neighbour,
        _ => return None,
    };
    if neighbour.header.ifindex != link_index {
        return None;
    }
    if !NudState::from(neighbour.header.state).is_resolving() {
        return None;
    }
    match neighbour_fields(neighbour) {
        (Some(IpAddr::V4(ip)), None) => Some(Miss::L3(ip)),
        (None, Some(mac)) => Some(Miss::L2(mac)),
        // IPv6 neighbours, and entries that already have both halves, are not misses.
        _ => None,
    }
}

async fn answer_misses<R>(
    handle: Handle,
    link_index: u32,
    mut queue: mpsc::Receiver<Miss>,
    resolver: R,
    shared: Arc<Shared>,
) where
    R: Fn(&Miss) -> Option<Answer> + Send + Sync + 'static,
{
    loop {
        tokio::select! {
            biased;
            () = shared.resync.notified() => {
                resync(&handle, link_index, &resolver, &shared).await;
            }
            miss = queue.recv() => match miss {
                Some(miss) => answer(&handle, link_index, &resolver, &miss, &shared.counters).await,
                None => return,
            },
        }
    }
}

async fn answer<R>(handle: &Handle, link_index: u32, resolver: &R, miss: &Miss, counters: &Counters)
where
    R: Fn(&Miss) -> Option<Answer>,
{
    // The resolver is the caller's code: a panic in it must not end the loop.
    let answer = match std::panic::catch_unwind(AssertUnwindSafe(|| resolver(miss))) {
        Ok(answer) => answer,
        Err(_) => {
            bump(&counters.failed);
            tracing::error!(%miss, "the miss resolver panicked");
            return;
        }
    };
    let Some(answer) = answer else {
        bump(&counters.unknown);
        tracing::debug!(%miss, "no known host answers");
        return;
    };
    match install(handle, link_index, &answer).await {
        Ok(()) => {
            bump(&counters.answered);
            tracing::debug!(%miss, ?answer, "answered");
        }
        Err(err) => {
            bump(&counters.failed);
            tracing::warn!(%miss, "answering failed: {err}");
        }
    }
}

async fn install(handle: &Handle, link_index: u32, answer: &Answer) -> Result<()> {
    match *answer {
        Answer::Neighbour { ip, mac } => handle.add_l3(link_index, ip, mac).await,
        Answer::Fdb { mac, vtep } => handle.add_l2(link_index, mac, vtep).await,
    }
}

async fn resync<R>(handle: &Handle, link_index: u32, resolver: &R, shared: &Shared)
where
    R: Fn(&Miss) -> Option<Answer>,
{
    let counters = &shared.counters;
    bump(&counters.resyncs);
    let misses = match pending_misses(handle, link_index).await {
        Ok(misses) => misses,
        Err(err) => {
            tracing::warn!(link_index, "resync failed, trying again: {err}");
            tokio::time::sleep(RESYNC_RETRY_PAUSE).await;
            shared.resync.notify_one();
            return;
        }
    };
    tracing::info!(
        link_index,
        pending = misses.len(),
        "resynchronised from the kernel's tables"
    );
    for miss in misses {
        bump(&counters.recovered);
        answer(handle, link_index, resolver, &miss, counters).await;
    }
}

/// The misses the kernel's tables still show: neighbours without a MAC that are unresolved or
/// failed (L3), and MACs of neighbour entries that have no FDB entry (L2).
async fn pending_misses(handle: &Handle, link_index: u32) -> Result<Vec<Miss>> {
    let neighbours = handle.list_neigh(link_index).await?;
    let fdb = handle.list_fdb(link_index).await?;
    Ok(misses_from_tables(
        &neighbours,
        fdb.iter().map(|entry| entry.mac),
    ))
}

fn misses_from_tables(
    neighbours: &[NeighEntry],
    fdb_macs: impl IntoIterator<Item = MacAddr>,
) -> Vec<Miss> {
    let known: std::collections::HashSet<MacAddr> = fdb_macs.into_iter().collect();
    let unanswered = NudState(NudState::RESOLVING.0 | NudState::FAILED.0);
    let mut misses = Vec::new();
    let mut wanted_macs = std::collections::BTreeSet::new();
    for neighbour in neighbours {
        match neighbour.mac {
            None if neighbour.state.intersects(unanswered) => misses.push(Miss::L3(neighbour.ip)),
            None => {}
            Some(mac) if !known.contains(&mac) => {
                wanted_macs.insert(mac);
            }
            Some(_) => {}
        }
    }
    misses.extend(wanted_macs.into_iter().map(Miss::L2));
    misses
}

#[cfg(test)]
mod tests;
