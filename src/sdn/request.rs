//! What the node's handles and background tasks ask of the writer, and what it answers: one
//! typed seam. Every request carries its own reply channel of the answer's type, so nothing
//! answers with "some output" the asker must sort out.
//!
//! Edits of the desired state that wait together become one batch (one bundle, one journal
//! sync); the other requests run alone.

use std::collections::BTreeMap;
use std::net::Ipv4Addr;
use std::time::Instant;

use tokio::sync::{mpsc, oneshot};

use super::core::ovsdb::Bandwidth;
use super::core::{Core, NetPolSummary, SetupOutcome, TakeBack};
use super::error::Error;
use super::policy::networkpolicy::model::{Labels, Namespace, NetPol, PodMeta, RemotePod};
use super::state::{EgressState, LocalMulticast, NodeState, Pod, PortIntent};
use super::types::{HostSubnet, Service, SetupRequest};
use crate::value::{Cidr, IfName, SandboxId, Vnid};

/// Where an answer goes.
pub type Reply<T> = oneshot::Sender<Result<T, Error>>;

/// A change of the desired state (`core/ops.rs` has what each does).
pub enum Edit {
    PodAdd(Pod, Reply<()>),
    /// Answers false when the node knows no pod with this sandbox id.
    PodUpdate {
        sandbox: SandboxId,
        vnid: Vnid,
        reply: Reply<bool>,
    },
    PodAdopt(Pod, Reply<()>),
    /// The pod's flows go, and its port `veth` becomes one OVSDB must not hold.
    PodDel {
        ip: Ipv4Addr,
        veth: Option<IfName>,
        reply: Reply<()>,
    },
    /// What OVSDB must hold for pods' ports (answers the intent replaced, if any).
    Ports(PortEdit, Reply<Option<PortIntent>>),
    /// A pod add whose port OVSDB did not take, taken back (`Core::take_back`; answers whether
    /// it was).
    TakeBack {
        take_back: TakeBack,
        port_may_exist: bool,
        reply: Reply<bool>,
    },
    /// Pods' flows to the ports OVSDB's cache shows their interfaces on now.
    FollowPorts(crate::ovsdb::Client, Reply<()>),
    HostSubnetAdd(HostSubnet, Reply<()>),
    HostSubnetDel {
        host_ip: Ipv4Addr,
        subnet: Cidr,
        reply: Reply<()>,
    },
    ServiceAdd(Service, Reply<()>),
    ServiceDel(Ipv4Addr, Reply<()>),
    MulticastLocal {
        vnid: Vnid,
        multicast: Option<LocalMulticast>,
        reply: Reply<()>,
    },
    MulticastVxlan(Vec<Ipv4Addr>, Reply<()>),
    /// Answers the seed's input error when the policy cannot be honoured as given.
    EgressSet {
        vnid: Vnid,
        egress: Option<EgressState>,
        reply: Reply<Option<String>>,
    },
    EgressDnsChanged(BTreeMap<String, Vec<Ipv4Addr>>, Reply<()>),
    /// The NetworkPolicy mode's inputs (`core/netpol.rs`).
    PodAddWithMeta {
        pod: Pod,
        meta: Option<PodMeta>,
        reply: Reply<()>,
    },
    PodLabels {
        sandbox: SandboxId,
        labels: Labels,
        reply: Reply<()>,
    },
    NamespaceSet(Namespace, Reply<()>),
    NamespaceDel(String, Reply<()>),
    RemotePodSet(RemotePod, Reply<()>),
    RemotePodDel(Ipv4Addr, Reply<()>),
    NetPolApply(Box<NetPol>, Reply<()>),
    NetPolDel {
        namespace: String,
        name: String,
        reply: Reply<()>,
    },
}

/// An edit of the OVSDB part of the desired state (`Core::pod_bandwidth` and the next two).
pub enum PortEdit {
    Bandwidth {
        veth: IfName,
        bandwidth: Bandwidth,
        port_exists: bool,
    },
    Restore {
        veth: IfName,
        set: PortIntent,
        back: Option<PortIntent>,
    },
    ForgetRemoved(Vec<IfName>),
}

impl PortEdit {
    pub fn apply(self, core: &mut Core) -> Result<Option<PortIntent>, Error> {
        match self {
            PortEdit::Bandwidth {
                veth,
                bandwidth,
                port_exists,
            } => core.pod_bandwidth(veth, bandwidth, port_exists),
            PortEdit::Restore { veth, set, back } => {
                core.restore_port_intent(veth, set, back).map(|()| None)
            }
            PortEdit::ForgetRemoved(gone) => core.forget_removed_ports(&gone).map(|()| None),
        }
    }
}

/// A look at the desired state (between batches: only what is on the switch and on disk).
pub enum Read {
    State(Reply<NodeState>),
    PodBySandbox(SandboxId, Reply<Option<Pod>>),
    /// Whether a pod add with this namespace and labels would be refused (asked before its
    /// port is made, so that a refused pod changes nothing).
    CheckPodMeta(Pod, Option<PodMeta>, Reply<()>),
    NetPols(Reply<Vec<NetPolSummary>>),
    /// Every pod (the counter poll's labels and addresses).
    Pods(Reply<Vec<Pod>>),
}

/// What setup did, and the pods it dropped (whose ports go too).
#[derive(Debug)]
pub struct SetupDone {
    pub outcome: SetupOutcome,
    pub dropped: Vec<Pod>,
}

pub enum Request {
    Edit(Edit),
    Read(Read),
    /// Install `setup` (building or rebuilding the table) in one bundle.
    Setup(SetupRequest, Reply<SetupDone>),
    /// Make the switch's table equal to the desired one; `force` re-installs it whole.
    Resync {
        force: bool,
        reply: Reply<()>,
    },
    /// The same as a resync without force, after the switch reported foreign changes (`seen`
    /// says which); a repair that changes anything is recorded as drift.
    RepairDrift {
        seen: String,
        reply: Reply<()>,
    },
    /// High availability: this daemon just became master; adopt the state the previous active
    /// daemon replicated and reconcile the switch with it.
    TakeOver {
        generation: u64,
        reply: Reply<()>,
    },
    /// Stop after answering (what is queued behind it fails with `Error::Shutdown`).
    Shutdown(Reply<()>),
}

/// A request and when it arrived (for the latency histogram).
pub struct Envelope {
    pub request: Request,
    pub started: Instant,
}

impl Envelope {
    pub fn new(request: Request) -> Envelope {
        Envelope {
            request,
            started: Instant::now(),
        }
    }
}

impl Edit {
    /// The pod port an edit may give a port step (`core::PortStep`): a batch holds at most one
    /// edit per port, so that each step answers its own edit.
    pub fn port(&self) -> Option<&IfName> {
        match self {
            Edit::PodAdd(pod, _) | Edit::PodAddWithMeta { pod, .. } => pod.veth.as_ref(),
            Edit::PodDel { veth, .. } => veth.as_ref(),
            Edit::Ports(PortEdit::Bandwidth { veth, .. }, _) => Some(veth),
            _ => None,
        }
    }

    /// Answers the edit with `error` instead of doing it.
    pub fn refuse(self, error: Error) {
        match self {
            Edit::PodUpdate { reply, .. } => drop(reply.send(Err(error))),
            Edit::TakeBack { reply, .. } => drop(reply.send(Err(error))),
            Edit::EgressSet { reply, .. } => drop(reply.send(Err(error))),
            Edit::Ports(_, reply) => drop(reply.send(Err(error))),
            Edit::PodAdd(_, reply)
            | Edit::PodAdopt(_, reply)
            | Edit::PodDel { reply, .. }
            | Edit::FollowPorts(_, reply)
            | Edit::HostSubnetAdd(_, reply)
            | Edit::HostSubnetDel { reply, .. }
            | Edit::ServiceAdd(_, reply)
            | Edit::ServiceDel(_, reply)
            | Edit::MulticastLocal { reply, .. }
            | Edit::MulticastVxlan(_, reply)
            | Edit::EgressDnsChanged(_, reply)
            | Edit::PodAddWithMeta { reply, .. }
            | Edit::PodLabels { reply, .. }
            | Edit::NamespaceSet(_, reply)
            | Edit::NamespaceDel(_, reply)
            | Edit::RemotePodSet(_, reply)
            | Edit::RemotePodDel(_, reply)
            | Edit::NetPolApply(_, reply)
            | Edit::NetPolDel { reply, .. } => drop(reply.send(Err(error))),
        }
    }
}

impl Read {
    pub fn refuse(self, error: Error) {
        match self {
            Read::State(reply) => drop(reply.send(Err(error))),
            Read::PodBySandbox(_, reply) => drop(reply.send(Err(error))),
            Read::CheckPodMeta(_, _, reply) => drop(reply.send(Err(error))),
            Read::NetPols(reply) => drop(reply.send(Err(error))),
            Read::Pods(reply) => drop(reply.send(Err(error))),
        }
    }
}

/// Sends a request made around a fresh reply channel; the receiver of the answer, or None
/// when the writer has stopped.
pub async fn send<T>(
    requests: &mpsc::Sender<Envelope>,
    make: impl FnOnce(Reply<T>) -> Request,
) -> Option<oneshot::Receiver<Result<T, Error>>> {
    let (reply, answer) = oneshot::channel();
    requests.send(Envelope::new(make(reply))).await.ok()?;
    Some(answer)
}

/// Sends a request and waits for its answer.
pub async fn call<T>(
    requests: &mpsc::Sender<Envelope>,
    make: impl FnOnce(Reply<T>) -> Request,
) -> Result<T, Error> {
    let answer = send(requests, make).await.ok_or(Error::Shutdown)?;
    answer.await.map_err(|_| Error::Shutdown)?
}

/// [`send`] from a task that must not keep the writer alive: None when it has stopped.
pub async fn send_weak<T>(
    requests: &mpsc::WeakSender<Envelope>,
    make: impl FnOnce(Reply<T>) -> Request,
) -> Option<oneshot::Receiver<Result<T, Error>>> {
    let requests = requests.upgrade()?;
    send(&requests, make).await
}
