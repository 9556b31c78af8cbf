//! Issue 14: the reachability framework (tests/harness/src/reachability.rs) validated on the
//! modes that exist without NetworkPolicy, so that its tables can be trusted when they judge
//! the policies: in multitenant mode with x, y, z on different VNIDs the matrix is exactly
//! block-diagonal, in subnet mode everything connects, and a wrong expectation fails with the
//! upstream-style tables.

use std::time::Instant;

use ofnode_harness::cluster::{Cluster, ClusterOptions, Control, Mode};
use ofnode_harness::reachability::{Model, Probe};

fn start(mode: Mode) -> Cluster {
    Cluster::start(ClusterOptions {
        nodes: 2,
        mode,
        control: Control::from_env(env!("CARGO_BIN_EXE_ofnode")),
        echo: false,
    })
    .unwrap()
}

fn tenant(namespace: &str) -> u32 {
    match namespace {
        "x" => 11,
        "y" => 12,
        _ => 13,
    }
}

#[test]
fn multitenant_matrix_is_block_diagonal() {
    let cluster = start(Mode::Multitenant);
    let model = Model::create(&cluster, tenant).unwrap();
    assert_eq!(model.servers(), 9);
    // The pods are spread: both nodes hold pods of every namespace.
    for namespace in ["x", "y", "z"] {
        let nodes: Vec<usize> = model
            .pods
            .iter()
            .filter(|p| p.namespace == namespace)
            .map(|p| p.node())
            .collect();
        assert!(
            nodes.contains(&0) && nodes.contains(&1),
            "{namespace}: {nodes:?}"
        );
    }
    let same_namespace = model.expect(|from, to| from.namespace == to.namespace);
    assert_eq!(same_namespace.count(), 27);
    let started = Instant::now();
    let result = model.check_all(&same_namespace);
    println!("4 x 81 probes in {:?}", started.elapsed());
    if let Err(tables) = result {
        panic!("{tables}\n{}", cluster.diagnostics());
    }

    // The framework can fail: all-connected is wrong here, by exactly the 54 cross-tenant pairs,
    // and the report has upstream's tables.
    let wrong = model
        .check(&[(Probe::TCP80, &model.all_connected())])
        .expect_err("cross-tenant probes must not connect");
    assert!(wrong.contains("tcp/80: 54 of 81 pairs wrong"), "{wrong}");
    assert!(
        wrong.contains("expected:\n-\tx/a\tx/b\tx/c\ty/a"),
        "{wrong}"
    );
    assert!(wrong.contains("observed:"), "{wrong}");
    assert!(wrong.contains("comparison:"), "{wrong}");
    assert!(wrong.contains("x/a\t.\t.\t.\tX\tX\tX\tX\tX\tX"), "{wrong}");
}

#[test]
fn subnet_matrix_is_all_connected() {
    let cluster = start(Mode::Subnet);
    let model = Model::create(&cluster, |_| 0).unwrap();
    let started = Instant::now();
    let result = model.check_all(&model.all_connected());
    println!("4 x 81 probes in {:?}", started.elapsed());
    if let Err(tables) = result {
        panic!("{tables}\n{}", cluster.diagnostics());
    }
}
