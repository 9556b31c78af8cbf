//! The VXLAN device's entries through ofnode's rtnetlink vs the seed's way's analogue (`ip` /
//! `bridge` exec per entry), in two namespaces joined by a veth underlay:
//! (i) static programming of 250 remote hosts (FDB entry + gateway neighbour + subnet route
//! each) — one `VxlanManager::set_hosts` against 750 execs of `bridge fdb append` /
//! `ip neigh replace` / `ip route replace`;
//! (ii) in miss mode, a kernel L3 miss → the neighbour entry ofnode installs: median and p99
//! over 50 misses, each a fresh address of a known subnet, the table polled over netlink.
//!
//! Run: `cargo bench --bench netlink` (as root).

use std::net::{Ipv4Addr, UdpSocket};
use std::process::Command;
use std::time::{Duration, Instant};

use ofnode::netlink::{
    Handle, Ipv4Net, KnownHost, MacAddr, MissOptions, VxlanAttrs, VxlanManager,
    VxlanManagerOptions, VxlanMode, REPAIR_INTERVAL,
};
use ofnode_harness::{Netns, Veth};

const HOSTS: usize = 250;
const OFNODE_ROUNDS: usize = 10;
const EXEC_ROUNDS: usize = 3;
const MISSES: usize = 50;
const DEV: &str = "ofnbench";

fn main() {
    // `cargo bench` passes `--bench`; a filter argument that is not ours means "not me".
    if std::env::args()
        .skip(1)
        .any(|arg| !arg.starts_with('-') && !"netlink".contains(&arg))
    {
        return;
    }
    let a = Netns::new("ofnba").expect("namespace (run as root)");
    let b = Netns::new("ofnbb").expect("namespace");
    let veth = Veth::new("ula", &a, "ulb", &b).expect("veth underlay");
    a.exec_ok(&["ip", "addr", "add", "192.0.2.1/24", "dev", "ula"])
        .expect("underlay address");
    b.exec_ok(&["ip", "addr", "add", "192.0.2.2/24", "dev", "ulb"])
        .expect("underlay address");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime");
    {
        // Handles and miss loops spawn their tasks on the current runtime.
        let _context = runtime.enter();
        static_programming(&runtime, &a);
        miss_latency(&runtime, &b);
    }
    drop(runtime);
    drop(veth);
    drop((a, b));
}

/// Host `i`: underlay 198.51.100.(i+1), subnet 10.130.0.0/23 + i, MAC 0a:00:00:00:HH:LL.
fn host(i: usize) -> KnownHost {
    let octets = (i * 2).to_be_bytes();
    let (high, low) = (octets[octets.len() - 2], octets[octets.len() - 1]);
    KnownHost {
        host_ip: Ipv4Addr::new(
            198,
            51,
            100,
            u8::try_from(i + 1).expect("at most 254 hosts"),
        ),
        subnet: Ipv4Net::new(Ipv4Addr::new(10, 130 + high, low, 0), 23).expect("subnet"),
        vtep_mac: MacAddr([0x0a, 0, 0, 0, (i >> 8) as u8, i as u8]),
    }
}

fn manager(
    runtime: &tokio::runtime::Runtime,
    ns: &Netns,
    underlay: &str,
    vtep: Ipv4Addr,
    mode: VxlanMode,
) -> (Handle, VxlanManager) {
    let handle = Handle::in_netns(ns.path()).expect("netlink handle in the namespace");
    let vtep_index = runtime
        .block_on(handle.link_index(underlay))
        .expect("underlay link");
    let options = VxlanManagerOptions {
        attrs: VxlanAttrs {
            vtep_index: Some(vtep_index),
            vtep_addr: Some(vtep),
            port: Some(4789),
            ..VxlanAttrs::new(DEV, 42)
        },
        address: Ipv4Net::new(Ipv4Addr::new(10, 128, 0, 1), 14).expect("address"),
        mode,
        miss: MissOptions::default(),
        // No background repair during the measurement.
        repair_interval: REPAIR_INTERVAL * 100,
    };
    let manager = runtime
        .block_on(VxlanManager::start(&handle, options))
        .expect("VXLAN device");
    (handle, manager)
}

fn static_programming(runtime: &tokio::runtime::Runtime, ns: &Netns) {
    let (_handle, manager) = manager(
        runtime,
        ns,
        "ula",
        Ipv4Addr::new(192, 0, 2, 1),
        VxlanMode::Static,
    );
    let hosts: Vec<KnownHost> = (0..HOSTS).map(host).collect();
    let mut ofnode = Vec::new();
    let mut exec = Vec::new();
    for round in 0..OFNODE_ROUNDS.max(EXEC_ROUNDS) {
        if round < EXEC_ROUNDS {
            let t = Instant::now();
            program_by_exec(ns, &hosts);
            exec.push(t.elapsed());
            check_programmed(ns);
            // ofnode owns every entry of that shape on its device: this removes them all.
            runtime
                .block_on(manager.set_hosts(Vec::new()))
                .expect("clear");
        }
        if round < OFNODE_ROUNDS {
            let t = Instant::now();
            runtime
                .block_on(manager.set_hosts(hosts.iter().copied()))
                .expect("program 250 hosts");
            ofnode.push(t.elapsed());
            check_programmed(ns);
            runtime
                .block_on(manager.set_hosts(Vec::new()))
                .expect("clear");
        }
    }
    let (ours, theirs) = (median(&mut ofnode), median(&mut exec));
    println!(
        "netlink static programming of {HOSTS} hosts (FDB + neighbour + route each): ofnode median {:.1} ms (min {:.1}, max {:.1}; {} rounds), ip/bridge exec median {:.0} ms ({} rounds, {} execs each), ratio {:.0} x",
        ms(ours),
        ms(ofnode[0]),
        ms(ofnode[ofnode.len() - 1]),
        ofnode.len(),
        ms(theirs),
        exec.len(),
        HOSTS * 3,
        ms(theirs) / ms(ours),
    );
    runtime.block_on(manager.destroy()).expect("destroy");
}

/// What a Go program that shells out would do: one exec per entry, replace semantics.
fn program_by_exec(ns: &Netns, hosts: &[KnownHost]) {
    let ip = |args: &[&str]| {
        let status = Command::new("ip")
            .args(["-n", ns.name()])
            .args(args)
            .status()
            .expect("ip runs");
        assert!(status.success(), "ip {args:?} failed");
    };
    for host in hosts {
        let (mac, dst) = (host.vtep_mac.to_string(), host.host_ip.to_string());
        let (gateway, subnet) = (host.gateway().to_string(), host.subnet.to_string());
        let status = Command::new("bridge")
            .args(["-n", ns.name(), "fdb", "append", &mac, "dev", DEV])
            .args(["dst", &dst, "self", "permanent"])
            .status()
            .expect("bridge runs");
        assert!(status.success(), "bridge fdb append {mac} failed");
        ip(&[
            "neigh",
            "replace",
            &gateway,
            "lladdr",
            &mac,
            "dev",
            DEV,
            "nud",
            "permanent",
        ]);
        ip(&[
            "route", "replace", &subnet, "via", &gateway, "dev", DEV, "onlink",
        ]);
    }
}

/// Every host's route is there (the cheapest complete check).
fn check_programmed(ns: &Netns) {
    let routes = ns
        .exec_ok(&["ip", "-4", "route", "show", "dev", DEV])
        .expect("ip route");
    let count = routes.lines().filter(|line| line.contains(" via ")).count();
    assert_eq!(count, HOSTS, "{routes}");
}

fn miss_latency(runtime: &tokio::runtime::Runtime, ns: &Netns) {
    let (handle, manager) = manager(
        runtime,
        ns,
        "ulb",
        Ipv4Addr::new(192, 0, 2, 2),
        VxlanMode::Miss,
    );
    let remote = host(1);
    runtime
        .block_on(manager.set_hosts([remote]))
        .expect("known host");
    let index = manager.device().index();
    // A socket opened inside the namespace stays there: each datagram to a fresh address of
    // the remote subnet starts a neighbour resolution, which the kernel reports as an L3 miss.
    let socket = ns
        .run_in(|| UdpSocket::bind((Ipv4Addr::UNSPECIFIED, 0)))
        .expect("thread in the namespace")
        .expect("UDP socket");
    let base = u32::from(remote.subnet.network());
    let mut latencies = Vec::new();
    for i in 0..MISSES {
        let target = Ipv4Addr::from(base + 10 + u32::try_from(i).expect("small"));
        let start = Instant::now();
        let _ = socket.send_to(b"miss", (target, 9));
        loop {
            let neighbours = runtime
                .block_on(handle.list_neigh(index))
                .expect("neighbour dump");
            let answered = neighbours
                .iter()
                .any(|n| n.ip == target && n.mac == Some(remote.vtep_mac));
            if answered {
                latencies.push(start.elapsed());
                break;
            }
            assert!(
                start.elapsed() < Duration::from_secs(5),
                "no answer for {target}: {:?}",
                manager.status().misses
            );
        }
    }
    let stats = manager.status().misses;
    latencies.sort_unstable();
    let p99 = latencies[(latencies.len() * 99).div_ceil(100) - 1];
    println!(
        "netlink L3 miss -> neighbour entry installed ({MISSES} misses, polled by netlink dump): median {:.3} ms, p99 {:.3} ms, max {:.3} ms (misses seen {}, answered {})",
        ms(latencies[latencies.len() / 2]),
        ms(p99),
        ms(latencies[latencies.len() - 1]),
        stats.seen,
        stats.answered,
    );
    runtime.block_on(manager.destroy()).expect("destroy");
}

fn median(samples: &mut [Duration]) -> Duration {
    samples.sort_unstable();
    samples[samples.len() / 2]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}
