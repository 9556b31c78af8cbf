use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

use proptest::prelude::*;

use super::*;
use crate::controller::config::LeaseTiming;

fn settings(mode: Mode, network: &str, len: u8) -> Settings {
    Settings {
        cluster_network: network.parse().unwrap(),
        subnet_len: len,
        service_network: "172.30.0.0/16".parse().unwrap(),
        mode,
        global_namespaces: if mode == Mode::Multitenant {
            vec!["default".into()]
        } else {
            Vec::new()
        },
        identity: "ctl-a".into(),
        lease: LeaseTiming {
            duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
        },
        lease_namespace: "ofnode".into(),
        lease_name: "ofnode-controller".into(),
        status_address: "127.0.0.1:0".parse().unwrap(),
    }
}

fn ledger(mode: Mode) -> Ledger {
    Ledger::new(&settings(mode, "10.128.0.0/14", 23))
}

fn node(name: &str) -> Key {
    Key::Node(name.into())
}

fn namespace(name: &str) -> Key {
    Key::Namespace(name.into())
}

fn ip(last: u8) -> Option<Ipv4Addr> {
    Some(Ipv4Addr::new(192, 0, 2, last))
}

/// The object a create decided, as the API server would answer (with a uid).
fn created(decision: Decision) -> Written {
    match decision {
        Decision::Write(Write::CreateHostSubnet(mut object)) => {
            object.metadata.uid = Some(format!("uid-{}", object.host));
            Written::HostSubnet(object)
        }
        Decision::Write(Write::CreateNetNamespace(mut object)) => {
            object.metadata.uid = Some(format!("uid-{}", object.netname));
            Written::NetNamespace(object)
        }
        other => panic!("not a create: {other:?}"),
    }
}

fn foreign_subnet(name: &str, subnet: &str) -> HostSubnet {
    let mut object = HostSubnet::allocated(name, "192.0.2.99", subnet, "x");
    object.metadata.annotations = None;
    object
}

#[test]
fn every_node_gets_its_own_subnet_with_its_internal_ip() {
    let mut l = ledger(Mode::Subnet);
    l.set_node("node-0", ip(11));
    l.set_node("node-1", ip(12));
    // Both decided before either answer came: the first one's subnet is reserved.
    let first = l.decide(&node("node-0"));
    let second = l.decide(&node("node-1"));
    let Decision::Write(Write::CreateHostSubnet(a)) = &first else {
        panic!("{first:?}")
    };
    let Decision::Write(Write::CreateHostSubnet(b)) = &second else {
        panic!("{second:?}")
    };
    assert_eq!(
        (a.subnet.as_str(), a.host_ip.as_str()),
        ("10.128.0.0/23", "192.0.2.11")
    );
    assert_eq!(
        (b.subnet.as_str(), b.host_ip.as_str()),
        ("10.128.2.0/23", "192.0.2.12")
    );
    assert_eq!(allocated_by(&a.metadata), Some("ctl-a"));
    // Nothing more for a key whose write is in flight.
    assert_eq!(l.decide(&node("node-0")), Decision::Nothing);
    l.finish(&node("node-0"), Outcome::Written(created(first)));
    l.finish(&node("node-1"), Outcome::Written(created(second)));
    assert_eq!(l.decide(&node("node-0")), Decision::Nothing);
    assert_eq!(l.summary().subnets_used, 2);
}

#[test]
fn a_node_without_a_usable_address_waits_and_says_why() {
    let mut l = ledger(Mode::Subnet);
    l.set_node("node-0", None);
    let Decision::Wait(why) = l.decide(&node("node-0")) else {
        panic!()
    };
    assert!(why.contains("no InternalIP"), "{why}");
    l.set_node("node-0", Some(Ipv4Addr::new(10, 128, 7, 1)));
    let Decision::Wait(why) = l.decide(&node("node-0")) else {
        panic!()
    };
    assert_eq!(
        why,
        "its InternalIP 10.128.7.1 lies in the cluster network 10.128.0.0/14"
    );
    assert_eq!(l.summary().nodes_waiting, 1);
    l.set_node("node-0", ip(11));
    assert!(matches!(l.decide(&node("node-0")), Decision::Write(_)));
    assert_eq!(l.summary().nodes_waiting, 0);
}

#[test]
fn a_network_too_small_for_the_nodes_is_reported_and_a_freed_subnet_is_used_after_its_deletion_is_seen(
) {
    let mut l = Ledger::new(&settings(Mode::Subnet, "10.128.0.0/22", 23));
    for (i, name) in ["node-0", "node-1", "node-2"].iter().enumerate() {
        l.set_node(name, ip(11 + i as u8));
    }
    for name in ["node-0", "node-1"] {
        let d = l.decide(&node(name));
        l.finish(&node(name), Outcome::Written(created(d)));
    }
    let Decision::Wait(why) = l.decide(&node("node-2")) else {
        panic!()
    };
    assert_eq!(
        why,
        "cannot get a subnet: cluster network 10.128.0.0/22 has 2 /23 subnets and all are taken \
         (a wider --cluster-network or a shorter --host-subnet-length holds more nodes)"
    );
    assert_eq!(l.summary().waiting[0].key, node("node-2"));
    // node-0 goes: its HostSubnet is deleted, but its subnet is taken until the watch shows it gone.
    l.remove_node("node-0");
    let Decision::Write(Write::DeleteHostSubnet(pre)) = l.decide(&node("node-0")) else {
        panic!()
    };
    assert_eq!(pre.uid.as_deref(), Some("uid-node-0"));
    l.finish(&node("node-0"), Outcome::Written(Written::Deleted));
    assert!(matches!(l.decide(&node("node-2")), Decision::Wait(_)));
    l.remove_host_subnet("node-0");
    assert_eq!(l.decide(&node("node-0")), Decision::Nothing);
    let Decision::Write(Write::CreateHostSubnet(third)) = l.decide(&node("node-2")) else {
        panic!()
    };
    assert_eq!(third.subnet, "10.128.0.0/23");
}

#[test]
fn someone_elses_subnets_are_never_duplicated_overlaps_are_reported_and_theirs_are_kept() {
    let mut l = ledger(Mode::Subnet);
    l.set_host_subnet(foreign_subnet("f5", "10.128.0.0/23"));
    l.set_host_subnet(foreign_subnet("f5-wide", "10.128.0.0/22"));
    l.set_host_subnet(foreign_subnet("elsewhere", "10.200.0.0/23"));
    l.resume();
    l.set_node("node-0", ip(11));
    let Decision::Write(Write::CreateHostSubnet(object)) = l.decide(&node("node-0")) else {
        panic!()
    };
    assert_eq!(object.subnet, "10.128.4.0/23");
    let conflicts = l.conflicts();
    assert_eq!(conflicts.len(), 2, "{conflicts:?}");
    assert_eq!(conflicts[0].names, ["elsewhere"]);
    assert!(conflicts[0].problem.contains("outside the cluster network"));
    assert_eq!(conflicts[1].names, ["f5", "f5-wide"]);
    assert_eq!(
        conflicts[1].problem,
        "subnets 10.128.0.0/23 (f5) and 10.128.0.0/22 (f5-wide) overlap"
    );
    // Not ours and no Node of that name: kept, listed as foreign.
    assert_eq!(l.decide(&node("f5")), Decision::Nothing);
    assert_eq!(l.summary().foreign.len(), 3);
}

#[test]
fn a_hostsubnet_of_an_existing_node_is_adopted_and_follows_the_nodes_address() {
    let mut l = ledger(Mode::Subnet);
    let mut theirs = foreign_subnet("node-0", "10.128.8.0/23");
    theirs.metadata.resource_version = Some("7".into());
    l.set_host_subnet(theirs);
    l.set_node("node-0", ip(11));
    let Decision::Write(Write::ReplaceHostSubnet(adopted)) = l.decide(&node("node-0")) else {
        panic!()
    };
    assert_eq!(allocated_by(&adopted.metadata), Some("ctl-a"));
    assert_eq!(adopted.host_ip, "192.0.2.11");
    assert_eq!(adopted.subnet, "10.128.8.0/23");
    assert_eq!(adopted.metadata.resource_version.as_deref(), Some("7"));
    l.finish(&node("node-0"), Outcome::Refused);
    l.set_host_subnet(adopted);
    assert_eq!(l.decide(&node("node-0")), Decision::Nothing);
}

#[test]
fn default_is_global_in_multitenant_mode_only_and_subnet_mode_has_no_netids() {
    let mut multitenant = ledger(Mode::Multitenant);
    let mut networkpolicy = ledger(Mode::NetworkPolicy);
    for l in [&mut multitenant, &mut networkpolicy] {
        l.set_namespace("default");
        l.set_namespace("tenant-a");
    }
    let netid = |l: &mut Ledger, name: &str| match l.decide(&namespace(name)) {
        Decision::Write(Write::CreateNetNamespace(object)) => object.netid,
        other => panic!("{other:?}"),
    };
    assert_eq!(netid(&mut multitenant, "default"), 0);
    assert_eq!(netid(&mut multitenant, "tenant-a"), 10);
    assert_eq!(netid(&mut networkpolicy, "default"), 10);
    assert_eq!(netid(&mut networkpolicy, "tenant-a"), 11);
    let mut subnet = ledger(Mode::Subnet);
    subnet.set_namespace("tenant-a");
    assert_eq!(subnet.decide(&namespace("tenant-a")), Decision::Nothing);
    assert!(subnet.keys().iter().all(|k| matches!(k, Key::Node(_))));
}

#[test]
fn a_netid_is_held_until_its_netnamespace_is_seen_deleted() {
    let mut l = ledger(Mode::NetworkPolicy);
    l.set_namespace("a");
    let d = l.decide(&namespace("a"));
    l.finish(&namespace("a"), Outcome::Written(created(d)));
    l.remove_namespace("a");
    let Decision::Write(Write::DeleteNetNamespace(_)) = l.decide(&namespace("a")) else {
        panic!()
    };
    l.finish(&namespace("a"), Outcome::Written(Written::Deleted));
    assert_eq!(
        l.netids.holders(10),
        1,
        "held until the watch shows it gone"
    );
    l.remove_net_namespace("a");
    assert_eq!(l.netids.holders(10), 0);
}

#[test]
fn a_create_answered_after_its_deletion_was_seen_does_not_come_back() {
    let mut l = ledger(Mode::Subnet);
    l.set_node("node-0", ip(11));
    let decision = l.decide(&node("node-0"));
    let Written::HostSubnet(object) = created(decision) else {
        panic!()
    };
    // The watch shows it created and deleted before the create's answer is processed.
    l.set_host_subnet(object.clone());
    l.remove_host_subnet("node-0");
    l.finish(
        &node("node-0"),
        Outcome::Written(Written::HostSubnet(object)),
    );
    assert!(l.host_subnet_names().is_empty());
    assert_eq!(l.summary().subnets_used, 0);
}

#[test]
fn netids_that_nodes_of_networkpolicy_mode_refuse_are_reported() {
    let mut l = ledger(Mode::NetworkPolicy);
    let netns = |name: &str, netid: u32| {
        let mut object = NetNamespace::allocated(name, netid, "x");
        object.metadata.annotations = None;
        object
    };
    for (name, netid) in [("default", 0), ("a", 12), ("b", 12), ("c", 5)] {
        l.set_namespace(name);
        l.set_net_namespace(netns(name, netid));
    }
    let problems: Vec<String> = l
        .conflicts()
        .into_iter()
        .map(|c| format!("{:?}: {}", c.names, c.problem))
        .collect();
    assert_eq!(problems.len(), 3, "{problems:?}");
    assert!(problems
        .iter()
        .any(|p| p.starts_with("[\"default\"]: netid 0 (global)")));
    assert!(problems
        .iter()
        .any(|p| p.starts_with("[\"a\", \"b\"]: netid 12 is shared")));
    assert!(problems
        .iter()
        .any(|p| p.starts_with("[\"c\"]: netid 5 is reserved")));
    // The same objects in multitenant mode: 0 is global, sharing is joining; 5 stays reserved.
    let mut mt = ledger(Mode::Multitenant);
    for (name, netid) in [("default", 0), ("a", 12), ("b", 12), ("c", 5)] {
        mt.set_namespace(name);
        mt.set_net_namespace(netns(name, netid));
    }
    assert_eq!(mt.conflicts().len(), 1);
}

#[test]
fn a_rebuilt_ledger_goes_on_after_the_highest_values() {
    let mut l = ledger(Mode::NetworkPolicy);
    l.set_host_subnet(HostSubnet::allocated(
        "node-0",
        "192.0.2.11",
        "10.128.6.0/23",
        "ctl-old",
    ));
    l.set_net_namespace(NetNamespace::allocated("a", 41, "ctl-old"));
    l.set_node("node-0", ip(11));
    l.set_node("node-1", ip(12));
    l.set_namespace("a");
    l.set_namespace("b");
    l.resume();
    assert_eq!(l.decide(&node("node-0")), Decision::Nothing);
    assert_eq!(l.decide(&namespace("a")), Decision::Nothing);
    let Decision::Write(Write::CreateHostSubnet(s)) = l.decide(&node("node-1")) else {
        panic!()
    };
    assert_eq!(s.subnet, "10.128.8.0/23");
    let Decision::Write(Write::CreateNetNamespace(n)) = l.decide(&namespace("b")) else {
        panic!()
    };
    assert_eq!(n.netid, 42);
}

// ---- a simulated API server: whatever the order of answers and watch events, nothing is
// ---- ever duplicated, and everything converges ----

#[derive(Debug, Clone)]
enum Op {
    AddNode(u8),
    RemoveNode(u8),
    AddNamespace(u8),
    RemoveNamespace(u8),
    /// Deliver the oldest pending watch event.
    Deliver,
    /// End the oldest write in flight: 0 and 1 the API server answers (applied when it can),
    /// 2 it refuses, 3 it applies but the answer is lost, 4 neither.
    Answer(u8),
    /// Time passes: every event older than a write's doubt arrives, then the doubts expire.
    Expire,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (0u8..12).prop_map(Op::AddNode),
        (0u8..12).prop_map(Op::RemoveNode),
        (0u8..12).prop_map(Op::AddNamespace),
        (0u8..12).prop_map(Op::RemoveNamespace),
        Just(Op::Deliver),
        Just(Op::Deliver),
        (0u8..5).prop_map(Op::Answer),
        Just(Op::Answer(0)),
        Just(Op::Expire),
    ]
}

enum Event {
    Subnet(String, Option<HostSubnet>),
    Netns(String, Option<NetNamespace>),
}

#[derive(Default)]
struct Server {
    subnets: BTreeMap<String, HostSubnet>,
    netns: BTreeMap<String, NetNamespace>,
    events: VecDeque<Event>,
    uid: u64,
}

impl Server {
    fn apply(&mut self, write: &Write) -> Option<Written> {
        self.uid += 1;
        let uid = Some(format!("u{}", self.uid));
        match write.clone() {
            Write::CreateHostSubnet(mut o) => {
                let name = o.metadata.name.clone().unwrap();
                if self.subnets.contains_key(&name) {
                    return None;
                }
                o.metadata.uid = uid;
                self.subnets.insert(name.clone(), o.clone());
                self.events.push_back(Event::Subnet(name, Some(o.clone())));
                Some(Written::HostSubnet(o))
            }
            Write::CreateNetNamespace(mut o) => {
                let name = o.metadata.name.clone().unwrap();
                if self.netns.contains_key(&name) {
                    return None;
                }
                o.metadata.uid = uid;
                self.netns.insert(name.clone(), o.clone());
                self.events.push_back(Event::Netns(name, Some(o.clone())));
                Some(Written::NetNamespace(o))
            }
            Write::DeleteHostSubnet(p) => {
                let current = self.subnets.get(&p.name)?;
                (current.metadata.uid == p.uid).then_some(())?;
                self.subnets.remove(&p.name);
                self.events.push_back(Event::Subnet(p.name, None));
                Some(Written::Deleted)
            }
            Write::DeleteNetNamespace(p) => {
                let current = self.netns.get(&p.name)?;
                (current.metadata.uid == p.uid).then_some(())?;
                self.netns.remove(&p.name);
                self.events.push_back(Event::Netns(p.name, None));
                Some(Written::Deleted)
            }
            Write::ReplaceHostSubnet(_) | Write::ReplaceNetNamespace(_) => None,
        }
    }

    fn assert_unique(&self) {
        let mut subnets: Vec<Cidr> = self
            .subnets
            .values()
            .map(|o| o.subnet.parse().unwrap())
            .collect();
        subnets.sort();
        for pair in subnets.windows(2) {
            assert!(!pair[0].overlaps(&pair[1]), "{subnets:?}");
        }
        let mut netids: Vec<i64> = self
            .netns
            .values()
            .map(|o| o.netid)
            .filter(|n| *n != 0)
            .collect();
        netids.sort();
        let before = netids.len();
        netids.dedup();
        assert_eq!(before, netids.len(), "a netid given twice");
    }
}

fn decide_all(l: &mut Ledger, in_flight: &mut VecDeque<(Key, Write)>) {
    for key in l.keys() {
        if let Decision::Write(w) = l.decide(&key) {
            in_flight.push_back((key, w));
        }
    }
}

/// The API server's answer: what it wrote, or a refusal.
fn answered(written: Option<Written>) -> Outcome {
    written.map_or(Outcome::Refused, Outcome::Written)
}

fn deliver(l: &mut Ledger, event: Event) {
    match event {
        Event::Subnet(_, Some(o)) => l.set_host_subnet(o),
        Event::Subnet(name, None) => l.remove_host_subnet(&name),
        Event::Netns(_, Some(o)) => l.set_net_namespace(o),
        Event::Netns(name, None) => l.remove_net_namespace(&name),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn no_value_is_ever_given_twice_and_everything_converges(ops in prop::collection::vec(op(), 1..120)) {
        // A small network (8 subnets) so that exhaustion and reuse happen.
        let mut l = Ledger::new(&settings(Mode::NetworkPolicy, "10.128.0.0/20", 23));
        let mut server = Server::default();
        let mut in_flight: VecDeque<(Key, Write)> = VecDeque::new();
        let later = std::time::Instant::now() + Duration::from_secs(60);
        for op in ops {
            match op {
                Op::AddNode(i) => l.set_node(&format!("n{i}"), ip(10 + i)),
                Op::RemoveNode(i) => l.remove_node(&format!("n{i}")),
                Op::AddNamespace(i) => l.set_namespace(&format!("s{i}")),
                Op::RemoveNamespace(i) => l.remove_namespace(&format!("s{i}")),
                Op::Deliver => {
                    if let Some(event) = server.events.pop_front() {
                        deliver(&mut l, event);
                    }
                }
                Op::Answer(how) => {
                    if let Some((key, write)) = in_flight.pop_front() {
                        let outcome = match how {
                            0 | 1 => answered(server.apply(&write)),
                            2 => Outcome::Refused,
                            3 => {
                                server.apply(&write);
                                Outcome::Unknown { until: later }
                            }
                            _ => Outcome::Unknown { until: later },
                        };
                        l.finish(&key, outcome);
                    }
                }
                Op::Expire => {
                    while let Some(event) = server.events.pop_front() {
                        deliver(&mut l, event);
                    }
                    l.expire_doubts(later);
                }
            }
            server.assert_unique();
            decide_all(&mut l, &mut in_flight);
        }
        // Everything answered and delivered: every node (up to 8) and namespace has one.
        for _ in 0..100 {
            while let Some((key, write)) = in_flight.pop_front() {
                let outcome = answered(server.apply(&write));
                l.finish(&key, outcome);
            }
            while let Some(event) = server.events.pop_front() {
                deliver(&mut l, event);
            }
            l.expire_doubts(later);
            server.assert_unique();
            decide_all(&mut l, &mut in_flight);
            if in_flight.is_empty() && server.events.is_empty() {
                break;
            }
        }
        prop_assert!(in_flight.is_empty());
        prop_assert_eq!(l.summary().writes_in_flight, 0);
        let nodes = l.node_names();
        let with_subnet = nodes.iter().filter(|n| server.subnets.contains_key(*n)).count();
        prop_assert_eq!(with_subnet, nodes.len().min(8));
        prop_assert!(server.subnets.keys().all(|n| nodes.contains(n)));
        let namespaces = l.namespace_names();
        prop_assert_eq!(server.netns.keys().cloned().collect::<Vec<_>>(), namespaces);
    }
}
