//! Fixtures of the netlink tests: namespaces joined by a veth underlay, the kernel's own view
//! of links and tables through `ip -j` / `bridge -j` (the oracle), and a way to run code inside
//! a namespace.
#![allow(dead_code)]

use std::net::Ipv4Addr;

use ofnode::netlink::{Handle, MacAddr, VxlanAttrs};
use ofnode_harness::{Netns, Veth};
use serde_json::Value;

/// The VXLAN device name every test uses (each namespace has its own).
pub const VX: &str = "ofnvx";
/// The underlay veth end in every namespace.
pub const UNDERLAY_A: &str = "ula";
pub const UNDERLAY_B: &str = "ulb";
pub const VNI: u32 = 42;
pub const PORT: u16 = 4789;

/// A namespace made by the test (the harness registers it with its reaper, so even a killed test
/// run has it deleted by the next run).
pub struct Node {
    pub ns: Netns,
    pub underlay: &'static str,
    pub underlay_ip: Ipv4Addr,
}

impl Node {
    fn new(underlay: &'static str, underlay_ip: Ipv4Addr) -> Node {
        let ns = Netns::new("ofnl").expect("create namespace");
        Node {
            ns,
            underlay,
            underlay_ip,
        }
    }

    pub fn handle(&self) -> Handle {
        Handle::in_netns(self.ns.path()).expect("netlink handle in namespace")
    }

    pub fn sh(&self, argv: &[&str]) -> String {
        self.ns
            .exec_ok(argv)
            .unwrap_or_else(|err| panic!("{argv:?} in {}: {err}", self.ns.name()))
    }

    /// `ip -j ARGS` inside the namespace, parsed.
    pub fn ip_json(&self, args: &[&str]) -> Value {
        let mut argv = vec!["ip", "-j"];
        argv.extend_from_slice(args);
        parse_json(&self.sh(&argv))
    }

    /// `bridge -j fdb show dev DEV` inside the namespace.
    pub fn fdb_json(&self, dev: &str) -> Vec<Value> {
        as_array(parse_json(
            &self.sh(&["bridge", "-j", "fdb", "show", "dev", dev]),
        ))
    }

    /// `ip -j -4 neigh show dev DEV` inside the namespace.
    pub fn neigh_json(&self, dev: &str) -> Vec<Value> {
        as_array(self.ip_json(&["-4", "neigh", "show", "dev", dev]))
    }

    /// `ip -j -d link show DEV`: the first (only) link object.
    pub fn link_json(&self, dev: &str) -> Value {
        as_array(self.ip_json(&["-d", "link", "show", dev]))
            .into_iter()
            .next()
            .unwrap_or_else(|| panic!("no link {dev}"))
    }

    pub fn link_exists(&self, dev: &str) -> bool {
        self.ns.exec_status(&["ip", "link", "show", dev])
    }

    pub fn ifindex(&self, dev: &str) -> u32 {
        self.link_json(dev)["ifindex"].as_u64().expect("ifindex") as u32
    }

    pub fn mac(&self, dev: &str) -> MacAddr {
        self.link_json(dev)["address"]
            .as_str()
            .expect("address")
            .parse()
            .expect("MAC")
    }

    /// The desired attributes of this node's VXLAN device, as the daemon would give them.
    pub fn vxlan_attrs(&self) -> VxlanAttrs {
        VxlanAttrs {
            vtep_index: Some(self.ifindex(self.underlay)),
            vtep_addr: Some(self.underlay_ip),
            port: Some(PORT),
            ..VxlanAttrs::new(VX, VNI)
        }
    }

    /// Runs `work` on a thread inside this namespace (for sockets the test opens itself).
    pub fn run_inside<T: Send>(&self, work: impl FnOnce() -> T + Send) -> T {
        let path = self.ns.path();
        std::thread::scope(|scope| {
            scope
                .spawn(move || {
                    let file = std::fs::File::open(&path).expect("open netns");
                    nix::sched::setns(&file, nix::sched::CloneFlags::CLONE_NEWNET).expect("setns");
                    work()
                })
                .join()
                .expect("namespace thread")
        })
    }
}

/// Two namespaces joined by a veth: `a` has 192.0.2.1/24 on `ula`, `b` 192.0.2.2/24 on `ulb`.
pub struct Underlay {
    // Field order is drop order: the veth goes before its namespaces.
    _veth: Veth,
    pub a: Node,
    pub b: Node,
}

pub const IP_A: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 1);
pub const IP_B: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 2);

impl Underlay {
    pub fn new() -> Underlay {
        let a = Node::new(UNDERLAY_A, IP_A);
        let b = Node::new(UNDERLAY_B, IP_B);
        let veth = Veth::new(UNDERLAY_A, &a.ns, UNDERLAY_B, &b.ns).expect("veth underlay");
        a.sh(&["ip", "addr", "add", "192.0.2.1/24", "dev", UNDERLAY_A]);
        b.sh(&["ip", "addr", "add", "192.0.2.2/24", "dev", UNDERLAY_B]);
        Underlay { _veth: veth, a, b }
    }
}

/// One namespace whose underlay device (one end of a veth pair kept inside it: this kernel has
/// no dummy driver) holds 192.0.2.1/24, for device-only tests.
pub fn single_node() -> Node {
    let node = Node::new(UNDERLAY_A, IP_A);
    node.sh(&[
        "ip", "link", "add", UNDERLAY_A, "type", "veth", "peer", "name", "ulz",
    ]);
    node.sh(&["ip", "link", "set", UNDERLAY_A, "up"]);
    node.sh(&["ip", "addr", "add", "192.0.2.1/24", "dev", UNDERLAY_A]);
    node
}

fn parse_json(text: &str) -> Value {
    if text.trim().is_empty() {
        return Value::Array(vec![]);
    }
    serde_json::from_str(text).unwrap_or_else(|err| panic!("bad JSON {text:?}: {err}"))
}

fn as_array(value: Value) -> Vec<Value> {
    match value {
        Value::Array(items) => items,
        other => panic!("expected a JSON array, got {other}"),
    }
}

/// The `lladdr` of the neighbour entry for `ip`, if any.
pub fn lladdr_of(neighbours: &[Value], ip: Ipv4Addr) -> Option<String> {
    neighbours
        .iter()
        .find(|entry| entry["dst"].as_str() == Some(&ip.to_string()))
        .and_then(|entry| entry["lladdr"].as_str().map(str::to_string))
}

/// The FDB entry for `mac`, if any.
pub fn fdb_entry(fdb: &[Value], mac: MacAddr) -> Option<Value> {
    fdb.iter()
        .find(|entry| entry["mac"].as_str() == Some(&mac.to_string()))
        .cloned()
}

/// Runs blocking work (a command) without stalling the runtime's other tasks (the miss loop).
pub fn blocking<T>(work: impl FnOnce() -> T) -> T {
    tokio::task::block_in_place(work)
}
