//! What the leader knows, and what it decides to write: the Nodes and Namespaces, the
//! HostSubnets and NetNamespaces as the API server holds them, and the allocations of writes
//! still in flight. Sans-IO: events in, writes out.
//!
//! The objects the API server holds are the truth: every subnet and netid any of them carries
//! is taken (whoever made it, whatever else is wrong with it), and a value is handed out only
//! when no object and no write in flight holds it. A value comes free only when the watch shows
//! its object deleted, so it is never reused while in use.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::fmt;
use std::net::Ipv4Addr;

use serde::Serialize;

use super::config::Settings;
use super::netids::{self, Netids};
use super::objects::{allocated_by, HostSubnet, NetNamespace, ALLOCATED_BY};
use super::subnets::{last_address, SubnetSpace};
use crate::sdn::Mode;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::value::Cidr;

/// What an allocation belongs to: a Node (its HostSubnet) or a Namespace (its NetNamespace).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(tag = "kind", content = "name")]
pub enum Key {
    Node(String),
    Namespace(String),
}

impl fmt::Display for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Key::Node(name) => write!(f, "node {name}"),
            Key::Namespace(name) => write!(f, "namespace {name}"),
        }
    }
}

/// A write the leader sends. Updates replace the version read (resourceVersion inside) and
/// deletes carry uid and resourceVersion preconditions: a stale decision fails, never overwrites.
#[derive(Debug, Clone, PartialEq)]
pub enum Write {
    CreateHostSubnet(HostSubnet),
    ReplaceHostSubnet(HostSubnet),
    DeleteHostSubnet(Precondition),
    CreateNetNamespace(NetNamespace),
    ReplaceNetNamespace(NetNamespace),
    DeleteNetNamespace(Precondition),
}

/// Which object a delete may remove.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Precondition {
    pub name: String,
    pub uid: Option<String>,
    pub resource_version: Option<String>,
}

impl Write {
    pub fn verb(&self) -> &'static str {
        match self {
            Write::CreateHostSubnet(_) | Write::CreateNetNamespace(_) => "create",
            Write::ReplaceHostSubnet(_) | Write::ReplaceNetNamespace(_) => "update",
            Write::DeleteHostSubnet(_) | Write::DeleteNetNamespace(_) => "delete",
        }
    }
}

/// What a write came back with: the object written (create, update), or nothing (delete).
#[derive(Debug)]
pub enum Written {
    HostSubnet(HostSubnet),
    NetNamespace(NetNamespace),
    Deleted,
}

/// How a write ended (one at a time, never stored in bulk, like [`Decision`]).
#[derive(Debug)]
#[allow(clippy::large_enum_variant)]
pub enum Outcome {
    Written(Written),
    /// The API server answered no (or the fence stopped it): nothing was applied.
    Refused,
    /// No answer: it may be applied until `until`.
    Unknown {
        until: std::time::Instant,
    },
}

/// The outcome of deciding about one key. (Made and consumed one at a time, never stored in
/// bulk: the size of a `Write` inline costs nothing.)
#[derive(Debug, Clone, PartialEq)]
#[allow(clippy::large_enum_variant)]
pub enum Decision {
    Nothing,
    Write(Write),
    /// Nothing can be written yet, and why (shown in the status until it changes).
    Wait(String),
}

/// One thing that is wrong with the objects the API server holds.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct Conflict {
    pub kind: &'static str,
    pub names: Vec<String>,
    pub problem: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Reserved {
    Nothing,
    Subnet(Cidr),
    Netid(u32),
}

/// The leader's state.
#[derive(Debug)]
pub struct Ledger {
    identity: String,
    mode: Mode,
    service_network: Cidr,
    global: BTreeSet<String>,
    nodes: BTreeMap<String, Option<Ipv4Addr>>,
    namespaces: BTreeSet<String>,
    host_subnets: BTreeMap<String, HostSubnet>,
    net_namespaces: BTreeMap<String, NetNamespace>,
    space: SubnetSpace,
    netids: Netids,
    in_flight: BTreeMap<Key, Reserved>,
    /// Uids the watch showed deleted while writes were in flight: a create's answer about one
    /// of them must not bring it back.
    deleted: HashSet<String>,
    waiting: BTreeMap<Key, String>,
    /// Writes that got no answer, and until when they may still be applied.
    doubtful: BTreeMap<Key, std::time::Instant>,
}

impl Ledger {
    pub fn new(settings: &Settings) -> Ledger {
        Ledger {
            identity: settings.identity.clone(),
            mode: settings.mode,
            service_network: settings.service_network,
            global: settings.global_namespaces.iter().cloned().collect(),
            nodes: BTreeMap::new(),
            namespaces: BTreeSet::new(),
            host_subnets: BTreeMap::new(),
            net_namespaces: BTreeMap::new(),
            space: SubnetSpace::new(settings.cluster_network, settings.subnet_len),
            netids: Netids::default(),
            in_flight: BTreeMap::new(),
            deleted: HashSet::new(),
            waiting: BTreeMap::new(),
            doubtful: BTreeMap::new(),
        }
    }

    /// Whether namespaces get NetNamespaces in this mode (not in subnet mode, as openshift-sdn).
    pub fn allocates_netids(&self) -> bool {
        self.mode != Mode::Subnet
    }

    /// Once everything was listed: hand out values after the highest in use (the previous
    /// leader's sequence goes on).
    pub fn resume(&mut self) {
        self.space.resume_after_highest();
        self.netids.resume_after_highest();
    }

    // ---- what the watches show ----

    pub fn set_node(&mut self, name: &str, ip: Option<Ipv4Addr>) {
        self.nodes.insert(name.to_string(), ip);
    }

    pub fn remove_node(&mut self, name: &str) {
        self.nodes.remove(name);
    }

    pub fn set_namespace(&mut self, name: &str) {
        self.namespaces.insert(name.to_string());
    }

    pub fn remove_namespace(&mut self, name: &str) {
        self.namespaces.remove(name);
    }

    pub fn set_host_subnet(&mut self, object: HostSubnet) {
        let name = object.metadata.name.clone().unwrap_or_default();
        self.settle(Key::Node(name.clone()));
        if let Some(old) = self.host_subnets.remove(&name) {
            self.uncover(&old);
        }
        if let Ok(subnet) = object.subnet.parse::<Cidr>() {
            self.space.cover(subnet);
        }
        self.host_subnets.insert(name, object);
    }

    pub fn remove_host_subnet(&mut self, name: &str) {
        self.settle(Key::Node(name.to_string()));
        if let Some(old) = self.host_subnets.remove(name) {
            self.uncover(&old);
            self.remember_deleted(old.metadata.uid);
        }
    }

    fn uncover(&mut self, object: &HostSubnet) {
        if let Ok(subnet) = object.subnet.parse::<Cidr>() {
            self.space.uncover(subnet);
        }
    }

    pub fn set_net_namespace(&mut self, object: NetNamespace) {
        let name = object.metadata.name.clone().unwrap_or_default();
        self.settle(Key::Namespace(name.clone()));
        if let Some(old) = self.net_namespaces.remove(&name) {
            self.release_netid(old.netid);
        }
        if let Ok(netid) = u32::try_from(object.netid) {
            self.netids.hold(netid);
        }
        self.net_namespaces.insert(name, object);
    }

    pub fn remove_net_namespace(&mut self, name: &str) {
        self.settle(Key::Namespace(name.to_string()));
        if let Some(old) = self.net_namespaces.remove(name) {
            self.release_netid(old.netid);
            self.remember_deleted(old.metadata.uid);
        }
    }

    fn release_netid(&mut self, netid: i64) {
        if let Ok(netid) = u32::try_from(netid) {
            self.netids.release(netid);
        }
    }

    fn remember_deleted(&mut self, uid: Option<String>) {
        if let (Some(uid), false) = (uid, self.in_flight.is_empty()) {
            self.deleted.insert(uid);
        }
    }

    /// Names of the HostSubnets / NetNamespaces / Nodes / Namespaces known now (a relist
    /// removes those it no longer has).
    pub fn host_subnet_names(&self) -> Vec<String> {
        self.host_subnets.keys().cloned().collect()
    }

    pub fn net_namespace_names(&self) -> Vec<String> {
        self.net_namespaces.keys().cloned().collect()
    }

    pub fn node_names(&self) -> Vec<String> {
        self.nodes.keys().cloned().collect()
    }

    pub fn namespace_names(&self) -> Vec<String> {
        self.namespaces.iter().cloned().collect()
    }

    /// Every key there is something about.
    pub fn keys(&self) -> BTreeSet<Key> {
        let nodes = self.nodes.keys().chain(self.host_subnets.keys());
        let mut keys: BTreeSet<Key> = nodes.cloned().map(Key::Node).collect();
        if self.allocates_netids() {
            let namespaces = self.namespaces.iter().chain(self.net_namespaces.keys());
            keys.extend(namespaces.cloned().map(Key::Namespace));
        }
        keys
    }

    /// The keys waiting for something (a free subnet, an address): worth another look when
    /// something was freed.
    pub fn waiting_keys(&self) -> Vec<Key> {
        self.waiting.keys().cloned().collect()
    }

    // ---- deciding ----

    /// What to write for `key` now. A write that allocates reserves its value until
    /// [`Ledger::finish`] is told how it went; no second write for a key is decided meanwhile.
    pub fn decide(&mut self, key: &Key) -> Decision {
        if self.in_flight.contains_key(key) {
            return Decision::Nothing;
        }
        let (decision, reserved) = match key {
            Key::Node(name) => self.decide_node(name),
            Key::Namespace(name) if self.allocates_netids() => self.decide_namespace(name),
            Key::Namespace(_) => (Decision::Nothing, Reserved::Nothing),
        };
        match &decision {
            Decision::Wait(why) => {
                self.waiting.insert(key.clone(), why.clone());
            }
            Decision::Write(_) => {
                self.waiting.remove(key);
                self.in_flight.insert(key.clone(), reserved);
            }
            Decision::Nothing => {
                self.waiting.remove(key);
            }
        }
        decision
    }

    fn decide_node(&mut self, name: &str) -> (Decision, Reserved) {
        let nothing = (Decision::Nothing, Reserved::Nothing);
        let node = self.nodes.get(name).copied();
        let Some(existing) = self.host_subnets.get(name) else {
            let Some(ip) = node else { return nothing };
            return self.allocate_subnet(name, ip);
        };
        let ours = allocated_by(&existing.metadata).is_some();
        let Some(ip) = node else {
            // Its Node is gone: remove what we made; someone else's is theirs to remove.
            return match ours {
                true => (
                    Decision::Write(Write::DeleteHostSubnet(precondition(&existing.metadata))),
                    Reserved::Nothing,
                ),
                false => nothing,
            };
        };
        let new_ip = ip
            .filter(|ip| self.node_ip_problem(*ip).is_none())
            .map(|ip| ip.to_string())
            .filter(|ip| *ip != existing.host_ip);
        if ours && new_ip.is_none() {
            return nothing;
        }
        // Adopt someone else's (so that it goes with its Node) and follow the Node's address.
        let mut object = existing.clone();
        if !ours {
            adopt(&mut object.metadata, &self.identity);
        }
        if let Some(ip) = new_ip {
            object.host_ip = ip;
        }
        (
            Decision::Write(Write::ReplaceHostSubnet(object)),
            Reserved::Nothing,
        )
    }

    fn allocate_subnet(&mut self, name: &str, ip: Option<Ipv4Addr>) -> (Decision, Reserved) {
        let Some(ip) = ip else {
            return wait("has no InternalIP address yet (its HostSubnet needs one)".into());
        };
        if let Some(problem) = self.node_ip_problem(ip) {
            return wait(problem);
        }
        let Some(subnet) = self.space.next_free() else {
            return wait(format!(
                "cannot get a subnet: cluster network {} has {} /{} subnets and all are taken \
                 (a wider --cluster-network or a shorter --host-subnet-length holds more nodes)",
                self.space.network(),
                self.space.capacity(),
                self.space.subnet_len()
            ));
        };
        self.space.cover(subnet);
        let object =
            HostSubnet::allocated(name, &ip.to_string(), &subnet.to_string(), &self.identity);
        (
            Decision::Write(Write::CreateHostSubnet(object)),
            Reserved::Subnet(subnet),
        )
    }

    /// Why a node's InternalIP cannot be a tunnel endpoint (openshift-sdn's node IP check).
    fn node_ip_problem(&self, ip: Ipv4Addr) -> Option<String> {
        let inside = |what: &str, network: Cidr| {
            network
                .contains(ip)
                .then(|| format!("its InternalIP {ip} lies in the {what} network {network}"))
        };
        inside("cluster", self.space.network()).or_else(|| inside("service", self.service_network))
    }

    fn decide_namespace(&mut self, name: &str) -> (Decision, Reserved) {
        let nothing = (Decision::Nothing, Reserved::Nothing);
        let exists = self.namespaces.contains(name);
        let Some(existing) = self.net_namespaces.get(name) else {
            if !exists {
                return nothing;
            }
            return self.allocate_netid(name);
        };
        match (exists, allocated_by(&existing.metadata).is_some()) {
            (false, true) => (
                Decision::Write(Write::DeleteNetNamespace(precondition(&existing.metadata))),
                Reserved::Nothing,
            ),
            (true, false) => {
                let mut object = existing.clone();
                adopt(&mut object.metadata, &self.identity);
                (
                    Decision::Write(Write::ReplaceNetNamespace(object)),
                    Reserved::Nothing,
                )
            }
            _ => nothing,
        }
    }

    fn allocate_netid(&mut self, name: &str) -> (Decision, Reserved) {
        let (netid, reserved) = if self.mode == Mode::Multitenant && self.global.contains(name) {
            (netids::GLOBAL, Reserved::Nothing)
        } else {
            let Some(netid) = self.netids.next_free() else {
                return wait(format!(
                    "cannot get a netid: all of {} to {} are held",
                    netids::FIRST,
                    netids::LAST
                ));
            };
            self.netids.hold(netid);
            (netid, Reserved::Netid(netid))
        };
        let object = NetNamespace::allocated(name, netid, &self.identity);
        (Decision::Write(Write::CreateNetNamespace(object)), reserved)
    }

    /// A write for `key` ended. Written: its reservation goes and what it wrote is known at
    /// once (unless the watch already showed it gone). Refused: the value is free again.
    /// Unknown (no answer; the API server may still apply it): the key stays in flight, its
    /// value reserved, until the watch shows its object or `until` passes
    /// ([`Ledger::expire_doubts`]); a value that may be in use is never given to another.
    pub fn finish(&mut self, key: &Key, outcome: Outcome) {
        let written = match outcome {
            Outcome::Unknown { until } => {
                if self.in_flight.contains_key(key) {
                    self.doubtful.entry(key.clone()).or_insert(until);
                }
                return;
            }
            Outcome::Refused => None,
            Outcome::Written(written) => Some(written),
        };
        // Judged before the release, which forgets the deletions seen meanwhile.
        let news = written.filter(|written| match written {
            Written::HostSubnet(o) => {
                self.fresh(&o.metadata, |l, n| l.host_subnets.contains_key(n))
            }
            Written::NetNamespace(o) => {
                self.fresh(&o.metadata, |l, n| l.net_namespaces.contains_key(n))
            }
            Written::Deleted => false,
        });
        self.release(key);
        match news {
            Some(Written::HostSubnet(object)) => self.set_host_subnet(object),
            Some(Written::NetNamespace(object)) => self.set_net_namespace(object),
            _ => {}
        }
    }

    /// True while `key`'s write got no answer and the watch has not shown its object.
    pub fn in_doubt(&self, key: &Key) -> bool {
        self.doubtful.contains_key(key)
    }

    /// Ends `key`'s write: its reserved value is free (or held by the object now known).
    fn release(&mut self, key: &Key) {
        self.doubtful.remove(key);
        match self.in_flight.remove(key) {
            Some(Reserved::Subnet(subnet)) => self.space.uncover(subnet),
            Some(Reserved::Netid(netid)) => self.netids.release(netid),
            Some(Reserved::Nothing) | None => {}
        }
        if self.in_flight.is_empty() {
            self.deleted.clear();
        }
    }

    /// The watch showed `key`'s object (created, changed or deleted): a write in doubt about
    /// it is settled.
    fn settle(&mut self, key: Key) {
        if self.doubtful.contains_key(&key) {
            self.release(&key);
        }
    }

    /// Writes in doubt whose time is up at `now` are taken as not applied; their keys are
    /// worth deciding again.
    pub fn expire_doubts(&mut self, now: std::time::Instant) -> Vec<Key> {
        let due: Vec<Key> = self
            .doubtful
            .iter()
            .filter(|(_, until)| **until <= now)
            .map(|(key, _)| key.clone())
            .collect();
        for key in &due {
            self.release(key);
        }
        due
    }

    /// True when a written object is news: the watch has shown neither it nor its deletion.
    fn fresh(&self, meta: &ObjectMeta, known: impl Fn(&Ledger, &str) -> bool) -> bool {
        let name = meta.name.as_deref().unwrap_or("");
        let gone = meta
            .uid
            .as_ref()
            .is_some_and(|uid| self.deleted.contains(uid));
        !gone && !known(self, name)
    }

    // ---- what the status shows ----

    pub fn summary(&self) -> Summary {
        let unallocated = |kind: fn(&Key) -> bool| self.waiting.keys().filter(|k| kind(k)).count();
        Summary {
            nodes: self.nodes.len(),
            namespaces: self.namespaces.len(),
            host_subnets: self.host_subnets.len(),
            net_namespaces: self.net_namespaces.len(),
            subnets_used: self.space.used(),
            subnets_total: self.space.capacity(),
            netids_allocated: self.netids.allocated(),
            nodes_waiting: unallocated(|k| matches!(k, Key::Node(_))),
            namespaces_waiting: unallocated(|k| matches!(k, Key::Namespace(_))),
            waiting: self
                .waiting
                .iter()
                .map(|(key, why)| Waiting {
                    key: key.clone(),
                    reason: why.clone(),
                })
                .collect(),
            conflicts: self.conflicts(),
            foreign: self.foreign(),
            writes_in_flight: self.in_flight.len(),
        }
    }

    /// What is wrong with the objects held: overlapping or misplaced subnets, netids the nodes
    /// of this mode cannot program.
    pub fn conflicts(&self) -> Vec<Conflict> {
        let mut found = self.subnet_conflicts();
        found.extend(self.netid_conflicts());
        found.sort();
        found
    }

    fn subnet_conflicts(&self) -> Vec<Conflict> {
        let conflict = |names: Vec<String>, problem: String| Conflict {
            kind: "HostSubnet",
            names,
            problem,
        };
        let mut found = Vec::new();
        let mut spans = Vec::new();
        for (name, object) in &self.host_subnets {
            match object.subnet.parse::<Cidr>() {
                Ok(subnet) if !self.space.holds(subnet) => found.push(conflict(
                    vec![name.clone()],
                    format!(
                        "subnet {subnet} lies outside the cluster network {}",
                        self.space.network()
                    ),
                )),
                Ok(subnet) => {
                    spans.push((u32::from(subnet.addr()), last_address(subnet), name, subnet))
                }
                Err(err) => found.push(conflict(vec![name.clone()], err.to_string())),
            }
            if object.host_ip.parse::<Ipv4Addr>().is_err() {
                found.push(conflict(
                    vec![name.clone()],
                    format!("hostIP {:?} is not an IPv4 address", object.host_ip),
                ));
            }
        }
        spans.sort();
        let mut widest: Option<(u32, &String, Cidr)> = None;
        for (start, end, name, subnet) in spans {
            match widest {
                Some((reach, other, theirs)) if start <= reach => {
                    // Named in name order, each with its subnet, whichever starts first.
                    let mut pair = [(other, theirs), (name, subnet)];
                    pair.sort();
                    let [(a, a_subnet), (b, b_subnet)] = pair;
                    found.push(conflict(
                        vec![a.clone(), b.clone()],
                        format!("subnets {a_subnet} ({a}) and {b_subnet} ({b}) overlap"),
                    ));
                    if end > reach {
                        widest = Some((end, name, subnet));
                    }
                }
                _ => widest = Some((end, name, subnet)),
            }
        }
        found
    }

    fn netid_conflicts(&self) -> Vec<Conflict> {
        if !self.allocates_netids() {
            return Vec::new();
        }
        let conflict = |names: Vec<String>, problem: String| Conflict {
            kind: "NetNamespace",
            names,
            problem,
        };
        let mut found = Vec::new();
        let mut by_netid: BTreeMap<i64, Vec<String>> = BTreeMap::new();
        for (name, object) in &self.net_namespaces {
            let netid = object.netid;
            by_netid.entry(netid).or_default().push(name.clone());
            if !(0..=i64::from(netids::LAST)).contains(&netid) {
                found.push(conflict(
                    vec![name.clone()],
                    format!("netid {netid} is not a 24-bit VNID"),
                ));
            } else if (1..i64::from(netids::FIRST)).contains(&netid) {
                found.push(conflict(
                    vec![name.clone()],
                    format!("netid {netid} is reserved (1 to 9)"),
                ));
            } else if netid == 0 && self.mode == Mode::NetworkPolicy {
                found.push(conflict(
                    vec![name.clone()],
                    "netid 0 (global): nodes in networkpolicy mode refuse it; delete the \
                     NetNamespace and the controller allocates a new netid"
                        .into(),
                ));
            }
        }
        if self.mode == Mode::NetworkPolicy {
            for (netid, names) in by_netid.into_iter().filter(|(_, names)| names.len() > 1) {
                found.push(conflict(
                    names,
                    format!("netid {netid} is shared: nodes in networkpolicy mode need one per namespace"),
                ));
            }
        }
        found
    }

    /// Objects kept though their Node or Namespace is gone: not ours to remove.
    fn foreign(&self) -> Vec<Key> {
        let subnets = self
            .host_subnets
            .iter()
            .filter(|(name, object)| {
                !self.nodes.contains_key(*name) && allocated_by(&object.metadata).is_none()
            })
            .map(|(name, _)| Key::Node(name.clone()));
        let netnamespaces = self
            .net_namespaces
            .iter()
            .filter(|(name, object)| {
                self.allocates_netids()
                    && !self.namespaces.contains(*name)
                    && allocated_by(&object.metadata).is_none()
            })
            .map(|(name, _)| Key::Namespace(name.clone()));
        subnets.chain(netnamespaces).collect()
    }
}

/// The state's numbers and lists for `/status`.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Summary {
    pub nodes: usize,
    pub namespaces: usize,
    pub host_subnets: usize,
    pub net_namespaces: usize,
    pub subnets_used: usize,
    pub subnets_total: usize,
    pub netids_allocated: usize,
    pub nodes_waiting: usize,
    pub namespaces_waiting: usize,
    pub waiting: Vec<Waiting>,
    pub conflicts: Vec<Conflict>,
    /// HostSubnets / NetNamespaces someone else made whose Node / Namespace does not exist.
    pub foreign: Vec<Key>,
    pub writes_in_flight: usize,
}

/// A Node or Namespace with no allocation yet, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Waiting {
    #[serde(flatten)]
    pub key: Key,
    pub reason: String,
}

fn wait(why: String) -> (Decision, Reserved) {
    (Decision::Wait(why), Reserved::Nothing)
}

fn adopt(meta: &mut ObjectMeta, identity: &str) {
    meta.annotations
        .get_or_insert_with(Default::default)
        .insert(ALLOCATED_BY.to_string(), identity.to_string());
    meta.managed_fields = None;
}

fn precondition(meta: &ObjectMeta) -> Precondition {
    Precondition {
        name: meta.name.clone().unwrap_or_default(),
        uid: meta.uid.clone(),
        resource_version: meta.resource_version.clone(),
    }
}

#[cfg(test)]
mod tests;
