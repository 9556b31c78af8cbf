//! Issue 28, item 3 (and the controller's half of item 6): `ofnode controller` against a real
//! kube-apiserver with its own service account's credentials (dist/kubernetes/rbac.yaml).
//! Nodes get HostSubnets and Namespaces NetNamespaces, both go with their owner; two
//! controllers at once: exactly one writes, a killed leader is replaced, a paused one is fenced,
//! and under a race of creations nothing is allocated twice.

mod controller_common;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use controller_common::*;
use ofnode::value::Cidr;
use ofnode_harness::kube::ControllerOptions;

const LEADING: Duration = Duration::from_secs(60);
const ALLOCATED: Duration = Duration::from_secs(60);

fn subnets_by_name(
    subnets: &[ofnode::controller::objects::HostSubnet],
) -> BTreeMap<String, (String, String)> {
    subnets
        .iter()
        .map(|s| (name(s), (s.subnet.clone(), s.host_ip.clone())))
        .collect()
}

fn netids_by_name(netns: &[ofnode::controller::objects::NetNamespace]) -> BTreeMap<String, i64> {
    netns.iter().map(|n| (name(n), n.netid)).collect()
}

/// No two HostSubnets share an address; no two NetNamespaces a netid (but the global 0).
fn assert_unique(
    subnets: &[ofnode::controller::objects::HostSubnet],
    netns: &[ofnode::controller::objects::NetNamespace],
) {
    let mut cidrs: Vec<Cidr> = subnets.iter().map(|s| s.subnet.parse().unwrap()).collect();
    cidrs.sort();
    for pair in cidrs.windows(2) {
        assert!(
            !pair[0].overlaps(&pair[1]),
            "{} and {} overlap",
            pair[0],
            pair[1]
        );
    }
    let mut netids: Vec<i64> = netns.iter().map(|n| n.netid).filter(|n| *n != 0).collect();
    let all = netids.len();
    netids.sort();
    netids.dedup();
    assert_eq!(
        all,
        netids.len(),
        "a netid was given twice: {:?}",
        netids_by_name(netns)
    );
}

#[test]
fn nodes_and_namespaces_get_their_allocations_and_lose_them_when_they_go() {
    let setup = Setup::start();
    // Before the controller starts: a node, and someone else's HostSubnet (no node of its name)
    // holding the first subnet.
    setup.admin(|c| async move { create_node(&c, "node-0", Some(node_ip(0))).await });
    setup
        .api
        .admin()
        .apply(
            "apiVersion: network.openshift.io/v1\nkind: HostSubnet\nmetadata: {name: f5-router}\n\
             host: f5-router\nhostIP: 192.0.2.250\nsubnet: 10.128.0.0/23\n---\n\
             apiVersion: network.openshift.io/v1\nkind: HostSubnet\nmetadata: {name: stray}\n\
             host: stray\nhostIP: 192.0.2.251\nsubnet: 10.128.0.0/24\n",
        )
        .unwrap();
    let controller = setup.controller(&ControllerOptions::new("ctl-a", "multitenant"));
    controller.wait_leading(LEADING).unwrap();

    setup.admin(|c| async move {
        create_node(&c, "node-1", Some(node_ip(1))).await;
        create_node(&c, "node-2", None).await;
        for ns in ["tenant-a", "tenant-b"] {
            create_namespace(&c, ns).await;
        }
    });
    let (subnets, netns) = wait_for(&setup, ALLOCATED, "allocations", |subnets, netns| {
        let names: BTreeSet<String> = netns.iter().map(name).collect();
        let ready = subnets.iter().any(|s| name(s) == "node-1")
            && ["default", "kube-system", "tenant-a", "tenant-b"]
                .iter()
                .all(|n| names.contains(*n));
        ready.then_some((subnets, netns))
    });
    let by_name = subnets_by_name(&subnets);
    // Each node's InternalIP; the foreign subnets' addresses are never given again.
    assert_eq!(by_name["node-0"].1, "192.0.2.11");
    assert_eq!(by_name["node-1"].1, "192.0.2.12");
    for node in ["node-0", "node-1"] {
        let subnet: Cidr = by_name[node].0.parse().unwrap();
        assert_eq!(subnet.prefix(), 23);
        assert!(
            !subnet.overlaps(&"10.128.0.0/23".parse().unwrap()),
            "{node}: {subnet}"
        );
    }
    assert!(
        !by_name.contains_key("node-2"),
        "a node without an address got {:?}",
        by_name.get("node-2")
    );
    let netids = netids_by_name(&netns);
    assert_eq!(
        netids["default"], 0,
        "default is global in multitenant mode"
    );
    assert!(netids["tenant-a"] >= 10 && netids["tenant-b"] >= 10);
    // Ours against each other and against f5-router (the stray overlaps it on purpose).
    let checked: Vec<_> = subnets
        .iter()
        .filter(|s| name(*s) != "stray")
        .cloned()
        .collect();
    assert_unique(&checked, &netns);
    for object in subnets.iter().filter(|s| name(*s).starts_with("node-")) {
        assert_eq!(writer(object), "ctl-a");
    }

    // What waits and why, the overlap of the two foreign subnets, and the numbers.
    let status = controller
        .wait_status(ALLOCATED, |s| s["nodes_waiting"] == 1)
        .unwrap();
    assert_eq!(status["waiting"][0]["name"], "node-2", "{status}");
    assert!(
        status["waiting"][0]["reason"]
            .as_str()
            .unwrap()
            .contains("no InternalIP"),
        "{status}"
    );
    let conflicts = status["conflicts"].as_array().unwrap();
    assert_eq!(conflicts.len(), 1, "{status}");
    assert_eq!(
        conflicts[0]["names"],
        serde_json::json!(["f5-router", "stray"])
    );
    assert_eq!(status["foreign"].as_array().unwrap().len(), 2, "{status}");
    let metrics = controller.get("/metrics").unwrap();
    assert!(metrics.contains("ofnode_controller_leader 1"), "{metrics}");
    assert!(
        metrics.contains("ofnode_controller_conflicts 1"),
        "{metrics}"
    );
    assert!(
        metrics.contains("ofnode_controller_nodes_waiting 1"),
        "{metrics}"
    );

    // The node reports its address: its HostSubnet follows.
    setup.admin(|c| async move { set_node_ip(&c, "node-2", node_ip(2)).await });
    wait_for(&setup, ALLOCATED, "node-2's subnet", |subnets, _| {
        subnets
            .iter()
            .find(|s| name(*s) == "node-2")
            .map(|s| assert_eq!(s.host_ip, "192.0.2.13"))
    });

    // A node goes: its HostSubnet goes; someone else's stay.
    setup.admin(|c| async move { delete_node(&c, "node-1").await });
    let subnets = wait_for(&setup, ALLOCATED, "node-1's subnet gone", |subnets, _| {
        (!subnets.iter().any(|s| name(s) == "node-1")).then_some(subnets)
    });
    let names: BTreeSet<String> = subnets.iter().map(name).collect();
    assert!(
        names.contains("f5-router") && names.contains("stray"),
        "{names:?}"
    );

    // A namespace goes: its NetNamespace goes only once the Namespace is really gone (not
    // while Terminating), and its netid is not given to a namespace made meanwhile.
    let tenant_a = netids["tenant-a"];
    setup
        .api
        .admin()
        .run(&["delete", "namespace", "tenant-a", "--wait=false"])
        .unwrap();
    setup.admin(|c| async move { create_namespace(&c, "tenant-c").await });
    let netns = wait_for(&setup, ALLOCATED, "tenant-c", |_, netns| {
        netns.iter().any(|n| name(n) == "tenant-c").then_some(netns)
    });
    let netids = netids_by_name(&netns);
    assert_eq!(
        netids["tenant-a"], tenant_a,
        "kept while the namespace is terminating"
    );
    assert_ne!(netids["tenant-c"], tenant_a);
    setup.api.finalize_namespace("tenant-a").unwrap();
    wait_for(
        &setup,
        ALLOCATED,
        "tenant-a's NetNamespace gone",
        |_, netns| (!netns.iter().any(|n| name(n) == "tenant-a")).then_some(()),
    );
    let status = controller.status().unwrap();
    assert_eq!(status["write_errors"], 0, "{status}");
    assert_eq!(status["leader"], true);
}

#[test]
fn a_cluster_network_too_small_is_reported_and_a_freed_subnet_is_given_again() {
    let setup = Setup::start();
    // The global VNID 0 on `default`, as multitenant mode left it: nodes in networkpolicy mode
    // refuse it, so it is reported (and left alone).
    setup
        .api
        .admin()
        .apply("apiVersion: network.openshift.io/v1\nkind: NetNamespace\nmetadata: {name: default}\nnetname: default\nnetid: 0\n")
        .unwrap();
    let mut options = ControllerOptions::new("ctl-a", "networkpolicy");
    options.cluster_network = "10.128.0.0/22".into();
    let controller = setup.controller(&options);
    controller.wait_leading(LEADING).unwrap();
    setup.admin(|c| async move {
        for i in 0..3 {
            create_node(&c, &format!("node-{i}"), Some(node_ip(i))).await;
        }
    });
    let status = controller
        .wait_status(ALLOCATED, |s| {
            s["host_subnets"] == 2 && s["nodes_waiting"] == 1
        })
        .unwrap();
    let reason = status["waiting"][0]["reason"].as_str().unwrap();
    assert_eq!(
        reason,
        "cannot get a subnet: cluster network 10.128.0.0/22 has 2 /23 subnets and all are taken \
         (a wider --cluster-network or a shorter --host-subnet-length holds more nodes)"
    );
    let conflicts = status["conflicts"].as_array().unwrap();
    assert_eq!(conflicts.len(), 1, "{status}");
    assert!(conflicts[0]["problem"]
        .as_str()
        .unwrap()
        .starts_with("netid 0 (global)"));
    let (subnets, _) = wait_for(&setup, ALLOCATED, "two subnets", |s, n| {
        (s.len() == 2).then_some((s, n))
    });
    let waiting = status["waiting"][0]["name"].as_str().unwrap().to_string();
    let freed_by = subnets.iter().map(name).find(|n| *n != waiting).unwrap();
    let freed = subnets
        .iter()
        .find(|s| name(*s) == freed_by)
        .unwrap()
        .subnet
        .clone();
    assert!(!subnets.iter().any(|s| name(s) == waiting));

    // A node goes: the one waiting gets its subnet (once the deletion is seen).
    let gone = freed_by.clone();
    setup.admin(|c| async move { delete_node(&c, &gone).await });
    wait_for(
        &setup,
        ALLOCATED,
        "the waiting node's subnet",
        |subnets, _| {
            subnets
                .iter()
                .find(|s| name(*s) == waiting)
                .map(|s| assert_eq!(s.subnet, freed))
        },
    );
    controller
        .wait_status(ALLOCATED, |s| s["nodes_waiting"] == 0)
        .unwrap();
    // The operator deletes the NetNamespace with netid 0: default gets a real one.
    setup
        .api
        .admin()
        .run(&["delete", "netnamespace", "default"])
        .unwrap();
    let netns = wait_for(&setup, ALLOCATED, "default's new netid", |_, netns| {
        netns
            .iter()
            .find(|n| name(*n) == "default")
            .filter(|n| n.netid >= 10)
            .map(|_| netns.clone())
    });
    assert_unique(&[], &netns);
    controller
        .wait_status(ALLOCATED, |s| {
            s["conflicts"].as_array().is_some_and(Vec::is_empty)
        })
        .unwrap();
}

/// Creates `nodes` Nodes and `namespaces` Namespaces (named with `prefix`), 8 at a time.
fn create_many(setup: &Setup, prefix: &str, first: usize, count: usize) {
    let prefix = prefix.to_string();
    setup.admin(|c| async move {
        use futures::StreamExt;
        futures::stream::iter(first..first + count)
            .for_each_concurrent(8, |i| {
                let (c, prefix) = (c.clone(), prefix.clone());
                async move {
                    create_node(&c, &format!("{prefix}node-{i}"), Some(node_ip(i))).await;
                    create_namespace(&c, &format!("{prefix}ns-{i}")).await;
                }
            })
            .await;
    });
}

/// Waits until every node and namespace (the ones made here, and the API server's own
/// namespaces) has its allocation; checks nothing is given twice.
fn all_allocated(
    setup: &Setup,
    nodes: usize,
    namespaces: usize,
) -> (
    Vec<ofnode::controller::objects::HostSubnet>,
    Vec<ofnode::controller::objects::NetNamespace>,
) {
    let (subnets, netns) = wait_for(setup, ALLOCATED, "every allocation", |subnets, netns| {
        let node_subnets = subnets
            .iter()
            .filter(|s| name(*s).contains("node-"))
            .count();
        let ns = netns.iter().filter(|n| name(*n).contains("ns-")).count();
        (node_subnets == nodes && ns == namespaces).then_some((subnets, netns))
    });
    assert_unique(&subnets, &netns);
    (subnets, netns)
}

#[test]
fn two_controllers_race_exactly_one_writes_and_a_killed_leader_is_replaced_without_duplicates() {
    let setup = Setup::start();
    let options = |id: &str| ControllerOptions::new(id, "networkpolicy");
    // Both start at once on an empty cluster while Nodes and Namespaces pour in.
    let mut a = setup.controller(&options("ctl-a"));
    let mut b = setup.controller(&options("ctl-b"));
    create_many(&setup, "r", 0, 40);
    let (subnets, netns) = all_allocated(&setup, 40, 40);
    let writers: BTreeSet<String> = subnets
        .iter()
        .map(writer)
        .chain(netns.iter().map(writer))
        .collect();
    assert_eq!(
        writers.len(),
        1,
        "more than one controller wrote: {writers:?}"
    );
    let leader_id = writers.into_iter().next().unwrap();
    let (leader, standby) = if leader_id == "ctl-a" {
        (&mut a, &mut b)
    } else {
        (&mut b, &mut a)
    };
    let standby_status = standby.status().unwrap();
    assert_eq!(standby_status["leader"], false);
    assert_eq!(
        standby_status["writes"], 0,
        "the standby wrote: {standby_status}"
    );
    assert_eq!(standby_status["holder"], leader_id.as_str());
    let lease = setup
        .api
        .admin()
        .get_json(&["lease", "ofnode-controller", "-n", "ofnode"])
        .unwrap();
    assert_eq!(lease["spec"]["holderIdentity"], leader_id.as_str());
    // The managed fields agree: one field manager wrote every object.
    let managers: BTreeSet<String> = setup
        .api
        .admin()
        .get_json(&["hostsubnets,netnamespaces", "--show-managed-fields"])
        .unwrap()["items"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|o| {
            o["metadata"]["managedFields"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        })
        .map(|f| f["manager"].as_str().unwrap_or("").to_string())
        .collect();
    assert_eq!(managers, BTreeSet::from(["ofnode-controller".to_string()]));

    // The leader dies (kill -9) while more pour in; the standby takes over.
    let before: BTreeMap<String, String> = subnets
        .iter()
        .map(|s| (name(s), s.subnet.clone()))
        .collect();
    let transitions = lease["spec"]["leaseTransitions"].as_i64().unwrap_or(0);
    leader.kill9();
    create_many(&setup, "k", 40, 30);
    standby.wait_leading(LEADING).unwrap();
    let (subnets, netns) = all_allocated(&setup, 70, 70);
    for s in &subnets {
        if let Some(old) = before.get(&name(s)) {
            assert_eq!(&s.subnet, old, "an allocation changed across the failover");
        }
    }
    let new_writers: BTreeSet<String> = subnets
        .iter()
        .filter(|s| !before.contains_key(&name(*s)))
        .map(writer)
        .chain(
            netns
                .iter()
                .filter(|n| name(*n).starts_with("kns-"))
                .map(writer),
        )
        .collect();
    assert_eq!(new_writers, BTreeSet::from([standby.identity.clone()]));
    let lease = setup
        .api
        .admin()
        .get_json(&["lease", "ofnode-controller", "-n", "ofnode"])
        .unwrap();
    assert_eq!(lease["spec"]["holderIdentity"], standby.identity.as_str());
    assert_eq!(
        lease["spec"]["leaseTransitions"].as_i64().unwrap(),
        transitions + 1
    );

    // SIGTERM: the leader gives the lease back and exits cleanly; a third controller takes it
    // (released: no expiry to wait for) and finds nothing to do.
    let c = setup.controller(&options("ctl-c"));
    c.wait_status(LEADING, |s| s["holder"] == standby.identity.as_str())
        .unwrap();
    let status = standby.terminate(Duration::from_secs(30)).unwrap();
    assert!(status.success(), "{status}");
    c.wait_leading(LEADING).unwrap();
    let lease = setup
        .api
        .admin()
        .get_json(&["lease", "ofnode-controller", "-n", "ofnode"])
        .unwrap();
    assert_eq!(lease["spec"]["holderIdentity"], "ctl-c");
    let (subnets, netns) = all_allocated(&setup, 70, 70);
    assert!(subnets.iter().all(|s| writer(s) != "ctl-c"));
    assert!(netns.iter().all(|n| writer(n) != "ctl-c"));
    assert_eq!(
        c.status().unwrap()["attempts"],
        0,
        "everything was allocated already"
    );
}

#[test]
fn a_paused_leader_is_fenced_once_a_standby_took_over() {
    let setup = Setup::start();
    let a = setup.controller(&ControllerOptions::new("ctl-a", "networkpolicy"));
    a.wait_leading(LEADING).unwrap();
    let b = setup.controller(&ControllerOptions::new("ctl-b", "networkpolicy"));
    b.wait_status(LEADING, |s| s["holder"] == "ctl-a").unwrap();
    create_many(&setup, "p", 0, 5);
    all_allocated(&setup, 5, 5);
    let attempts_before = a.status().unwrap()["attempts"].as_u64().unwrap();

    // A stops (a long pause: swapped out, frozen VM) with the lease: B takes over after a
    // lease duration and allocates what comes meanwhile.
    a.signal(libc::SIGSTOP);
    create_many(&setup, "q", 5, 5);
    b.wait_leading(LEADING).unwrap();
    all_allocated(&setup, 10, 10);

    // A wakes up with the watch events it missed queued and its lease believed held: its
    // renewal deadline has passed, so it writes nothing, and it steps down.
    a.signal(libc::SIGCONT);
    let after = a
        .wait_status(LEADING, |s| s["leader"] == false && s["holder"] == "ctl-b")
        .unwrap();
    // Not one request sent: the API server would refuse most (the names are taken), but a
    // deposed leader must not even try.
    assert_eq!(
        after["attempts"].as_u64().unwrap(),
        attempts_before,
        "a deposed leader sent writes: {after}"
    );
    let (subnets, netns) = all_allocated(&setup, 10, 10);
    let late: Vec<String> = subnets
        .iter()
        .filter(|s| name(*s).starts_with("q"))
        .map(writer)
        .chain(
            netns
                .iter()
                .filter(|n| name(*n).starts_with("q"))
                .map(writer),
        )
        .collect();
    assert!(late.iter().all(|w| w == "ctl-b"), "{late:?}");
    let log = std::fs::read_to_string(&a.log).unwrap();
    assert!(log.contains("stepping down"), "{}", a.log_tail(30));
}

#[test]
fn the_controllers_credentials_allow_exactly_what_it_needs() {
    let setup = Setup::start();
    let controller = setup
        .api
        .kubectl_with(&setup.controller_kubeconfig, "ofnode-controller");
    let may = |verb: &str, resource: &str, namespace: &str| {
        controller.can_i(verb, resource, namespace).unwrap()
    };
    for resource in ["nodes", "namespaces"] {
        for verb in ["list", "watch"] {
            assert!(may(verb, resource, "default"), "{verb} {resource}");
        }
        for verb in ["create", "update", "patch", "delete"] {
            assert!(!may(verb, resource, "default"), "{verb} {resource}");
        }
    }
    for resource in [
        "hostsubnets.network.openshift.io",
        "netnamespaces.network.openshift.io",
    ] {
        for verb in ["list", "watch", "create", "update", "delete"] {
            assert!(may(verb, resource, "default"), "{verb} {resource}");
        }
        assert!(!may("patch", resource, "default"), "patch {resource}");
    }
    for verb in ["get", "watch", "create", "update"] {
        assert!(
            may(verb, "leases.coordination.k8s.io", "ofnode"),
            "{verb} leases"
        );
    }
    assert!(!may("delete", "leases.coordination.k8s.io", "ofnode"));
    assert!(!may("create", "leases.coordination.k8s.io", "kube-system"));
    for (verb, resource, namespace) in [
        ("get", "secrets", "ofnode"),
        ("list", "secrets", "kube-system"),
        ("create", "networkpolicies.networking.k8s.io", "default"),
        (
            "create",
            "egressnetworkpolicies.network.openshift.io",
            "default",
        ),
        ("list", "pods", "default"),
        ("create", "events", "default"),
        ("create", "serviceaccounts/token", "ofnode"),
    ] {
        assert!(
            !may(verb, resource, namespace),
            "{verb} {resource} in {namespace}"
        );
    }
    // Real requests, refused (403), nothing changed.
    let refused = [
        controller.run(&["get", "secrets", "-n", "ofnode"]).unwrap_err(),
        controller
            .apply("apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata: {name: deny, namespace: default}\nspec: {podSelector: {}}\n")
            .unwrap_err(),
        controller.run(&["label", "namespace", "default", "x=y"]).unwrap_err(),
    ];
    for error in &refused {
        assert!(error.is_forbidden(), "{error}");
    }
    assert!(setup
        .api
        .admin()
        .run(&["get", "networkpolicy", "deny", "-n", "default"])
        .is_err());

    // With exactly these, the controller does all its work without one refused write.
    setup.admin(|c| async move {
        create_node(&c, "node-0", Some(node_ip(0))).await;
        create_namespace(&c, "tenant-a").await;
    });
    let running = setup.controller(&ControllerOptions::new("ctl-a", "networkpolicy"));
    running.wait_leading(LEADING).unwrap();
    wait_for(&setup, ALLOCATED, "allocations", |s, n| {
        (s.len() == 1 && n.iter().any(|n| name(n) == "tenant-a")).then_some(())
    });
    setup.admin(|c| async move { delete_node(&c, "node-0").await });
    wait_for(&setup, ALLOCATED, "removal", |s, _| {
        s.is_empty().then_some(())
    });
    let status = running.status().unwrap();
    assert_eq!(status["write_errors"], 0, "{status}");
    assert!(status["last_error"].is_null(), "{status}");

    // The Deployment manifest is accepted by the API server.
    let dry_run = setup
        .api
        .admin()
        .run(&[
            "apply",
            "--dry-run=server",
            "-f",
            &ofnode_harness::kube::manifests_dir()
                .join("controller.yaml")
                .to_string_lossy(),
        ])
        .unwrap();
    assert!(
        dry_run.contains("deployment.apps/ofnode-controller created (server dry run)"),
        "{dry_run}"
    );
}

#[test]
fn bad_flags_are_refused_with_the_reason_before_anything_runs() {
    let run = |args: &[&str]| {
        let out = std::process::Command::new(binary())
            .arg("controller")
            .args(args)
            .output()
            .unwrap();
        assert!(!out.status.success());
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let base = [
        "--service-network",
        "172.30.0.0/16",
        "--kubeconfig",
        "/nonexistent",
    ];
    let with = |extra: &[&'static str]| -> Vec<&'static str> {
        base.iter().copied().chain(extra.iter().copied()).collect()
    };
    let err = run(&with(&[
        "--cluster-network",
        "10.128.0.0/14",
        "--host-subnet-length",
        "20",
    ]));
    assert!(
        err.contains("--host-subnet-length 20 does not fit cluster network 10.128.0.0/14"),
        "{err}"
    );
    let err = run(&with(&[
        "--cluster-network",
        "172.30.0.0/15",
        "--host-subnet-length",
        "8",
    ]));
    assert!(
        err.contains("cluster network 172.30.0.0/15 and service network 172.30.0.0/16 overlap"),
        "{err}"
    );
    let err = run(&with(&[
        "--cluster-network",
        "10.128.0.0/14",
        "--host-subnet-length",
        "9",
        "--renew-deadline",
        "20s",
    ]));
    assert!(
        err.contains("must be shorter than the lease duration"),
        "{err}"
    );
    let err = run(&with(&[
        "--cluster-network",
        "10.128.0.0/14",
        "--host-subnet-length",
        "9",
    ]));
    assert!(err.contains("kubeconfig /nonexistent: "), "{err}");
}
