//! Issue 7: multitenant isolation and egress policy, shown with real packets. Nodes are set up
//! with `--mode multitenant`; a pod's VNID is its tenant.
//!
//! `OFNODE_E2E_CONTROL=seed` runs the same checks against the seed's flows (no ofnode).

use std::net::Ipv4Addr;

use ofnode_harness::cluster::{reachability, Cluster, ClusterOptions, Control, Endpoint, Mode};

fn start(nodes: usize) -> Cluster {
    Cluster::start(ClusterOptions {
        nodes,
        mode: Mode::Multitenant,
        control: Control::from_env(env!("CARGO_BIN_EXE_ofnode")),
        echo: false,
    })
    .unwrap()
}

/// Pings every case at once and fails listing every case whose outcome was not the expected one.
fn assert_reachability(cluster: &Cluster, cases: &[(&str, &dyn Endpoint, Ipv4Addr, bool)]) {
    let pairs: Vec<(&dyn Endpoint, Ipv4Addr)> =
        cases.iter().map(|(_, from, to, _)| (*from, *to)).collect();
    let results = reachability(&pairs);
    let wrong: Vec<String> = cases
        .iter()
        .zip(results)
        .filter_map(|((name, from, to, expected), result)| {
            let reached = result.unwrap();
            (reached != *expected).then(|| {
                format!(
                    "{name}: {} -> {to} {} (expected {})",
                    from.ip(),
                    if reached { "reached" } else { "blocked" },
                    if *expected { "reached" } else { "blocked" }
                )
            })
        })
        .collect();
    assert!(
        wrong.is_empty(),
        "{}\n{}",
        wrong.join("\n"),
        cluster.diagnostics()
    );
}

#[test]
fn tenants_are_isolated_and_vnid_0_reaches_everyone() {
    let cluster = start(2);
    let a10 = cluster.add_pod(0, 10).unwrap();
    let a10_peer = cluster.add_pod(0, 10).unwrap();
    let b11 = cluster.add_pod(0, 11).unwrap();
    let global = cluster.add_pod(0, 0).unwrap();
    let c10 = cluster.add_pod(1, 10).unwrap();
    let d11 = cluster.add_pod(1, 11).unwrap();
    let global_remote = cluster.add_pod(1, 0).unwrap();

    assert_reachability(
        &cluster,
        &[
            ("same VNID, same node", &a10, a10_peer.ip, true),
            ("same VNID, other node", &a10, c10.ip, true),
            ("same VNID, other node (11)", &d11, b11.ip, true),
            ("different VNID, same node", &a10, b11.ip, false),
            (
                "different VNID, same node (reverse)",
                &b11,
                a10_peer.ip,
                false,
            ),
            ("different VNID, other node", &a10, d11.ip, false),
            ("different VNID, other node (reverse)", &d11, a10.ip, false),
            ("VNID 0 -> VNID 10, same node", &global, a10.ip, true),
            ("VNID 0 -> VNID 11, other node", &global, d11.ip, true),
            (
                "VNID 0 -> VNID 0, other node",
                &global,
                global_remote.ip,
                true,
            ),
            (
                "VNID 10 -> VNID 0, other node",
                &c10,
                global_remote.ip,
                true,
            ),
            (
                "VNID 11 -> VNID 0, other node",
                &b11,
                global_remote.ip,
                true,
            ),
            (
                "VNID 10 -> its gateway",
                &a10,
                cluster.node(0).gateway,
                true,
            ),
        ],
    );
}

#[test]
fn egress_deny_cidr_blocks_one_tenant_only() {
    let cluster = start(1);
    let external = cluster.add_external_host(0).unwrap();
    let denied = cluster.add_pod(0, 20).unwrap();
    let other = cluster.add_pod(0, 21).unwrap();

    // Without a policy both tenants reach the host behind tun0: the path works.
    assert_reachability(
        &cluster,
        &[
            ("no policy, tenant 20", &denied, external.ip, true),
            ("no policy, tenant 21", &other, external.ip, true),
        ],
    );

    cluster
        .egress_deny(20, "tenant-a", "198.51.100.0/24")
        .unwrap();
    assert_reachability(
        &cluster,
        &[
            (
                "Deny 198.51.100.0/24, tenant 20",
                &denied,
                external.ip,
                false,
            ),
            ("other tenant unaffected", &other, external.ip, true),
            (
                "denied tenant still reaches its gateway",
                &denied,
                cluster.node(0).gateway,
                true,
            ),
        ],
    );

    cluster.egress_clear(20, "tenant-a").unwrap();
    assert_reachability(
        &cluster,
        &[("policy removed, tenant 20", &denied, external.ip, true)],
    );
}
