//! The seed's operations, one by one: the flow diff each makes.

use std::net::Ipv4Addr;

use super::*;
use crate::sdn::core::CoreError as Error;
use crate::sdn::core::{check_multicast_local, check_multicast_vxlan};
use crate::sdn::state::{Change, LocalMulticast};
use crate::sdn::types::Service;

#[test]
fn pod_add_is_the_seeds_four_flows_and_its_vnids_rule_for_the_first_user() {
    let mut core = set_up(Mode::Multitenant);
    let ((), e) = run(&mut core, |c| c.pod_add(pod(3, 10)).unwrap());
    let mut wanted = pod_3_flows(10);
    wanted.push(vnid_rule(10));
    assert_eq!(diff(&e.flows), (none(), seed_of(&wanted)));
    assert_eq!(
        e.journal,
        vec![Change::LocalPod {
            key: key_of(&pod(3, 10)),
            pod: Some(pod(3, 10))
        }]
    );
    // A second pod of the VNID brings its own flows only.
    let ((), e) = run(&mut core, |c| c.pod_add(pod(4, 10)).unwrap());
    assert_eq!(e.flows.adds.len(), 4);
    assert!(e.flows.deletes.is_empty());
}

#[test]
fn pod_update_moves_the_pod_and_the_rules_follow_their_users() {
    let mut core = set_up(Mode::Multitenant);
    run(&mut core, |c| c.pod_add(pod(3, 10)).unwrap());
    let (known, e) = run(&mut core, |c| {
        c.pod_update(&key_of(&pod(3, 10)), vnid(11)).unwrap()
    });
    assert!(known);
    // Same flows (table, priority, match) with new actions are adds; no add before a delete.
    let mut adds = pod_3_flows(11);
    adds.retain(|f| f.contains("load:11"));
    adds.push(vnid_rule(11));
    assert_eq!(diff(&e.flows), (seed(&[&vnid_rule(10)]), seed_of(&adds)));
    assert_eq!(core.state().pods[&key_of(&pod(3, 10))].vnid, vnid(11));
    let unknown = PodKey::new("default", "unknown").unwrap();
    let (known, e) = run(&mut core, |c| c.pod_update(&unknown, vnid(12)).unwrap());
    assert!(!known, "the shell then looks for it on the switch");
    assert!(e.flows.is_empty() && e.journal.is_empty());
}

#[test]
fn an_adopted_pod_gets_its_flows_without_a_veth() {
    let mut core = set_up(Mode::Subnet);
    let adopted = Pod {
        veth: None,
        ..pod(3, 0)
    };
    let ((), e) = run(&mut core, |c| {
        c.pod_adopt(key_of(&adopted), adopted).unwrap()
    });
    assert_eq!(diff(&e.flows), (none(), seed_of(&pod_3_flows(0))));
}

#[test]
fn pod_teardown_removes_its_flows_and_the_rule_with_its_last_user() {
    let mut core = set_up(Mode::Multitenant);
    run(&mut core, |c| c.pod_add(pod(3, 10)).unwrap());
    let ((), e) = run(&mut core, |c| {
        c.pod_del(&key_of(&pod(3, 10)), None).unwrap()
    });
    let mut gone = pod_3_flows(10);
    gone.push(vnid_rule(10));
    assert_eq!(diff(&e.flows), (seed_of(&gone), none()));
    // A pod the node does not know: nothing to do, no error (a repeated delete).
    let ((), e) = run(&mut core, |c| {
        c.pod_del(&key_of(&pod(3, 10)), None).unwrap()
    });
    assert!(e.flows.is_empty() && e.journal.is_empty());
}

#[test]
fn a_pod_follows_the_port_number_ovsdb_shows() {
    let mut core = set_up(Mode::Subnet);
    run(&mut core, |c| c.pod_add(pod(3, 0)).unwrap());
    let ((), e) = run(&mut core, |c| {
        c.follow_ports(|veth| (veth == "veth3").then_some(9))
            .unwrap()
    });
    assert_eq!(core.state().pods[&key_of(&pod(3, 0))].ofport, 9);
    assert!(diff(&e.flows).1.iter().any(|f| f.contains("output:9")));
    // Ports that agree, or that OVSDB does not know (yet), change nothing.
    let ((), e) = run(&mut core, |c| c.follow_ports(|_| Some(9)).unwrap());
    assert!(e.journal.is_empty());
    let ((), e) = run(&mut core, |c| c.follow_ports(|_| None).unwrap());
    assert!(e.journal.is_empty());
}

#[test]
fn vnid_rules_live_while_a_pod_or_service_uses_the_vnid() {
    let mut core = set_up(Mode::Multitenant);
    let svc = Service {
        ip: Ipv4Addr::new(172, 30, 0, 9),
        vnid: vnid(5),
        ports: vec!["tcp/80".parse().unwrap()],
    };
    let rule = |core: &Core| {
        core.flows()
            .iter()
            .any(|f| f.describe() == seed(&[&vnid_rule(5)]).pop_first().unwrap())
    };
    run(&mut core, |c| c.pod_add(pod(3, 5)).unwrap());
    assert!(rule(&core));
    let ((), e) = run(&mut core, |c| c.service_add(svc.clone()).unwrap());
    assert_eq!(e.flows.adds.len(), 2, "the service's own flows only");
    run(&mut core, |c| c.pod_del(&key_of(&pod(3, 5)), None).unwrap());
    assert!(rule(&core), "the service still uses VNID 5");
    let ((), e) = run(&mut core, |c| c.service_del(svc.ip).unwrap());
    assert!(!rule(&core));
    assert!(diff(&e.flows)
        .0
        .contains(&seed(&[&vnid_rule(5)]).pop_first().unwrap()));
    // VNID 0 never needs one (setup's reg0=0/reg1=0 flows), nor does the subnet mode.
    let ((), e) = run(&mut core, |c| c.pod_add(pod(4, 0)).unwrap());
    assert_eq!(e.flows.adds.len(), 4);
    let mut subnet = set_up(Mode::Subnet);
    let ((), e) = run(&mut subnet, |c| c.pod_add(pod(3, 5)).unwrap());
    assert_eq!(e.flows.adds.len(), 4);
}

#[test]
fn host_subnet_flows_with_and_without_a_fixed_vnid() {
    let mut core = set_up(Mode::Multitenant);
    let ((), e) = run(&mut core, |c| {
        c.hostsubnet_add(host_subnet(2, "10.128.2.0/23", None))
            .unwrap()
    });
    assert_eq!(
        diff(&e.flows),
        (
            none(),
            seed(&[
                "table=10, priority=100, tun_src=192.0.2.2, actions=goto_table:30",
                "table=50, priority=100, arp, nw_dst=10.128.2.0/23, actions=move:NXM_NX_REG0[]->NXM_NX_TUN_ID[0..31],set_field:192.0.2.2->tun_dst,output:1",
                "table=90, priority=100, ip, nw_dst=10.128.2.0/23, actions=move:NXM_NX_REG0[]->NXM_NX_TUN_ID[0..31],set_field:192.0.2.2->tun_dst,output:1",
            ])
        )
    );
    assert_eq!(e.vxlan_hosts.as_deref().map(<[_]>::len), Some(1));
    let ((), e) = run(&mut core, |c| {
        c.hostsubnet_add(host_subnet(3, "10.128.4.0/23", Some(7)))
            .unwrap()
    });
    assert_eq!(
        diff(&e.flows),
        (
            none(),
            seed(&[
                "table=10, priority=100, tun_src=192.0.2.3, actions=goto_table:30",
                "table=50, priority=100, arp, nw_dst=10.128.4.0/23, actions=load:7->NXM_NX_TUN_ID[0..31],set_field:192.0.2.3->tun_dst,output:1",
                "table=90, priority=100, ip, nw_dst=10.128.4.0/23, actions=load:7->NXM_NX_TUN_ID[0..31],set_field:192.0.2.3->tun_dst,output:1",
            ])
        )
    );
}

#[test]
fn host_subnet_delete_leaves_what_another_subnet_of_the_host_needs() {
    let mut core = set_up(Mode::Subnet);
    run(&mut core, |c| {
        c.hostsubnet_add(host_subnet(2, "10.128.2.0/23", None))
            .unwrap();
        c.hostsubnet_add(host_subnet(2, "10.128.6.0/23", None))
            .unwrap();
    });
    let ((), e) = run(&mut core, |c| {
        c.hostsubnet_del(
            Ipv4Addr::new(192, 0, 2, 2),
            "10.128.2.0/23".parse().unwrap(),
        )
        .unwrap()
    });
    // Tables 50 and 90; table 10's flow serves the host's other subnet (the seed deletes it
    // with either subnet: a deliberate difference).
    assert_eq!(
        diff(&e.flows),
        (
            seed_of(&seed_subnet_flows(2, "10.128.2.0/23", None)),
            none()
        )
    );
    assert_eq!(e.vxlan_hosts.unwrap().len(), 1);
    // Another host's subnet is not this host's to delete; an unknown one is no error.
    let err = run(&mut core, |c| {
        c.hostsubnet_del(
            Ipv4Addr::new(192, 0, 2, 9),
            "10.128.6.0/23".parse().unwrap(),
        )
    })
    .0
    .unwrap_err();
    assert!(matches!(err, Error::NotFound { .. }), "{err}");
    let (ok, e) = run(&mut core, |c| {
        c.hostsubnet_del(
            Ipv4Addr::new(192, 0, 2, 2),
            "10.128.8.0/23".parse().unwrap(),
        )
    });
    assert!(ok.is_ok() && e.journal.is_empty() && e.vxlan_hosts.is_none());
}

#[test]
fn service_flows_are_the_fragment_rule_then_one_per_port() {
    let mut core = set_up(Mode::Subnet);
    let svc = Service {
        ip: Ipv4Addr::new(172, 30, 0, 1),
        vnid: vnid(0),
        ports: vec!["tcp/80".parse().unwrap(), "udp/53".parse().unwrap()],
    };
    let ((), e) = run(&mut core, |c| c.service_add(svc.clone()).unwrap());
    let action =
        "priority=100, actions=load:0->NXM_NX_REG1[], load:2->NXM_NX_REG2[], goto_table:80";
    assert_eq!(
        diff(&e.flows),
        (
            none(),
            seed(&[
                &format!("table=60, ip, nw_dst=172.30.0.1, ip_frag=later, {action}"),
                &format!("table=60, ip, nw_dst=172.30.0.1, tcp, tcp_dst=80, {action}"),
                &format!("table=60, ip, nw_dst=172.30.0.1, udp, udp_dst=53, {action}"),
            ])
        )
    );
    let ((), e) = run(&mut core, |c| c.service_del(svc.ip).unwrap());
    assert_eq!(
        diff(&e.flows),
        (
            seed(&[
                &format!("table=60, ip, nw_dst=172.30.0.1, ip_frag=later, {action}"),
                &format!("table=60, ip, nw_dst=172.30.0.1, tcp, tcp_dst=80, {action}"),
                &format!("table=60, ip, nw_dst=172.30.0.1, udp, udp_dst=53, {action}"),
            ]),
            none()
        )
    );
}

#[test]
fn local_multicast_sorts_its_outputs_as_the_seed_does() {
    let mut core = set_up(Mode::Multitenant);
    let enabled = Some(LocalMulticast {
        ofports: vec![3, 10, 4],
    });
    let ((), e) = run(&mut core, |c| c.multicast_local(vnid(7), enabled).unwrap());
    assert_eq!(
        diff(&e.flows),
        (
            none(),
            seed(&[
                "table=110, reg0=7, actions=goto_table:111",
                "table=120, priority=100, reg0=7, actions=output:10,output:3,output:4",
            ])
        )
    );
    let ((), e) = run(&mut core, |c| c.multicast_local(vnid(7), None).unwrap());
    assert_eq!(
        diff(&e.flows),
        (
            seed(&[
                "table=110, reg0=7, actions=goto_table:111",
                "table=120, priority=100, reg0=7, actions=output:10,output:3,output:4",
            ]),
            none()
        )
    );
    let no_ports = Some(LocalMulticast { ofports: vec![] });
    let ((), e) = run(&mut core, |c| c.multicast_local(vnid(7), no_ports).unwrap());
    assert_eq!(
        diff(&e.flows),
        (none(), seed(&["table=110, reg0=7, actions=goto_table:111"]))
    );
}

#[test]
fn vxlan_multicast_replaces_table_111s_one_flow() {
    let mut core = set_up(Mode::Subnet);
    let remotes = vec![Ipv4Addr::new(192, 0, 2, 3), Ipv4Addr::new(192, 0, 2, 2)];
    let ((), e) = run(&mut core, |c| c.multicast_vxlan(remotes).unwrap());
    assert_eq!(
        diff(&e.flows),
        (
            none(),
            seed(&["table=111, priority=100, actions=move:NXM_NX_REG0[]->NXM_NX_TUN_ID[0..31],set_field:192.0.2.2->tun_dst,output:1,set_field:192.0.2.3->tun_dst,output:1,goto_table:120"])
        )
    );
    let ((), e) = run(&mut core, |c| c.multicast_vxlan(vec![]).unwrap());
    assert_eq!(
        diff(&e.flows),
        (
            none(),
            seed(&["table=111, priority=100, actions=goto_table:120"])
        )
    );
}

#[test]
fn multicast_input_is_checked_against_one_flows_size() {
    assert!(check_multicast_local(&[1, 3, 0xfeff]).is_ok());
    for bad in [0, 0xff00] {
        let err = check_multicast_local(&[bad]).unwrap_err();
        assert!(err.to_string().contains("1-65279"), "{err}");
    }
    let max = crate::sdn::core::max_multicast_ports().unwrap();
    assert!(check_multicast_local(&vec![3; max]).is_ok());
    let err = check_multicast_local(&vec![3; max + 1]).unwrap_err();
    assert!(matches!(err, Error::Invalid(_)), "{err}");
    assert!(err.to_string().contains(&format!("at most {max}")), "{err}");
    let err = check_multicast_vxlan(&vec![Ipv4Addr::LOCALHOST; 5000]).unwrap_err();
    assert!(err.to_string().contains("multicast remotes"), "{err}");
    assert!(check_multicast_vxlan(&vec![Ipv4Addr::LOCALHOST; 100]).is_ok());
}

#[test]
fn operations_before_setup_are_refused_and_deletes_are_harmless() {
    let mut core = Core::new(NodeState::default()).unwrap();
    let svc = Service {
        ip: Ipv4Addr::new(172, 30, 0, 1),
        vnid: vnid(0),
        ports: vec![],
    };
    assert!(matches!(core.pod_add(pod(3, 0)), Err(Error::NotSetUp)));
    assert!(matches!(
        core.pod_update(&key_of(&pod(3, 0)), vnid(1)),
        Err(Error::NotSetUp)
    ));
    assert!(matches!(
        core.hostsubnet_add(host_subnet(2, "10.128.2.0/23", None)),
        Err(Error::NotSetUp)
    ));
    assert!(matches!(core.service_add(svc), Err(Error::NotSetUp)));
    assert!(matches!(
        core.multicast_local(vnid(1), None),
        Err(Error::NotSetUp)
    ));
    assert!(matches!(core.multicast_vxlan(vec![]), Err(Error::NotSetUp)));
    assert!(matches!(
        core.egress_set(vnid(1), None),
        Err(Error::NotSetUp)
    ));
    assert!(core.pod_del(&key_of(&pod(3, 0)), None).is_ok());
    assert!(core.service_del(Ipv4Addr::new(172, 30, 0, 1)).is_ok());
    let e = core.take_effects();
    assert!(e.flows.is_empty() && e.journal.is_empty());
    assert!(
        core.flows().is_empty(),
        "an unset node wants nothing of the switch"
    );
}

#[test]
fn a_batch_is_one_diff_and_one_record_and_a_failed_edit_leaves_the_others() {
    let mut core = set_up(Mode::Multitenant);
    core.pod_add(pod(3, 10)).unwrap();
    core.pod_add(pod(4, 10)).unwrap();
    core.hostsubnet_add(host_subnet(2, "10.128.2.0/23", None))
        .unwrap();
    // Fails inside the batch: it changes nothing, the others stay.
    let refused = core.hostsubnet_del(
        Ipv4Addr::new(192, 0, 2, 9),
        "10.128.2.0/23".parse().unwrap(),
    );
    assert!(matches!(refused, Err(Error::NotFound { .. })));
    core.pod_del(&key_of(&pod(4, 10)), None).unwrap();
    let e = core.take_effects();
    // Pod 4 came and went inside the batch: the switch sees pod 3, its rule and the subnet;
    // the journal has pod 4's port marked for removal too.
    assert_eq!((e.flows.deletes.len(), e.flows.adds.len()), (0, 8));
    assert_eq!(e.journal.len(), 5);
    assert_eq!(e.vxlan_hosts.map(|h| h.len()), Some(1));
    core.commit();
    assert_eq!(core.state().pods.len(), 1);
}

#[test]
fn a_rolled_back_batch_leaves_state_and_table_exactly_as_they_were() {
    let mut core = set_up(Mode::Multitenant);
    run(&mut core, |c| c.pod_add(pod(3, 10)).unwrap());
    let state = core.state().clone();
    let table = printed(&core.flows().iter().cloned().collect::<Vec<_>>());
    core.pod_update(&key_of(&pod(3, 10)), vnid(11)).unwrap();
    core.hostsubnet_add(host_subnet(2, "10.128.2.0/23", None))
        .unwrap();
    core.pod_del(&key_of(&pod(3, 10)), None).unwrap();
    assert!(!core.take_effects().flows.is_empty());
    core.rollback();
    assert_eq!(core.state(), &state);
    assert_eq!(
        printed(&core.flows().iter().cloned().collect::<Vec<_>>()),
        table
    );
    // And the next batch starts clean.
    assert!(core.take_effects().flows.is_empty());
}

#[test]
fn a_host_subnet_added_again_for_another_host_or_vnid_is_replaced() {
    let mut core = set_up(Mode::Multitenant);
    run(&mut core, |c| {
        c.hostsubnet_add(host_subnet(2, "10.128.2.0/23", None))
            .unwrap()
    });
    // The same subnet, now a fixed VNID: tables 50 and 90 change their actions (adds that
    // replace), table 10 stays.
    let ((), e) = run(&mut core, |c| {
        c.hostsubnet_add(host_subnet(2, "10.128.2.0/23", Some(7)))
            .unwrap()
    });
    assert_eq!(
        diff(&e.flows),
        (
            none(),
            seed_of(&seed_subnet_flows(2, "10.128.2.0/23", Some(7)))
        )
    );
    // The same subnet moved to another host: the old host's table 10 flow goes with it.
    let ((), e) = run(&mut core, |c| {
        c.hostsubnet_add(host_subnet(3, "10.128.2.0/23", None))
            .unwrap()
    });
    let mut adds = seed_subnet_flows(3, "10.128.2.0/23", None);
    adds.push(seed_tunnel_flow(3));
    assert_eq!(
        diff(&e.flows),
        (seed_of(&[seed_tunnel_flow(2)]), seed_of(&adds))
    );
    let hosts = e.vxlan_hosts.unwrap();
    assert_eq!(hosts, vec![host_subnet(3, "10.128.2.0/23", None)]);
    // The very same subnet again: nothing for the switch.
    let ((), e) = run(&mut core, |c| {
        c.hostsubnet_add(host_subnet(3, "10.128.2.0/23", None))
            .unwrap()
    });
    assert!(e.flows.is_empty());
}

#[test]
fn a_hosts_last_subnet_takes_its_tunnel_flow_with_it() {
    let mut core = set_up(Mode::Subnet);
    run(&mut core, |c| {
        c.hostsubnet_add(host_subnet(2, "10.128.2.0/23", None))
            .unwrap();
        c.hostsubnet_add(host_subnet(2, "10.128.6.0/23", None))
            .unwrap();
    });
    let host = Ipv4Addr::new(192, 0, 2, 2);
    run(&mut core, |c| {
        c.hostsubnet_del(host, "10.128.2.0/23".parse().unwrap())
            .unwrap()
    });
    let ((), e) = run(&mut core, |c| {
        c.hostsubnet_del(host, "10.128.6.0/23".parse().unwrap())
            .unwrap()
    });
    let mut gone = seed_subnet_flows(2, "10.128.6.0/23", None);
    gone.push(seed_tunnel_flow(2));
    assert_eq!(diff(&e.flows), (seed_of(&gone), none()));
    assert_eq!(e.vxlan_hosts, Some(vec![]));
}

#[test]
fn a_service_added_again_is_replaced_port_by_port_and_its_vnid_rule_follows() {
    let mut core = set_up(Mode::Multitenant);
    let ip = Ipv4Addr::new(172, 30, 0, 1);
    let svc = |v: u32, ports: &[&str]| Service {
        ip,
        vnid: vnid(v),
        ports: ports.iter().map(|p| p.parse().unwrap()).collect(),
    };
    let action = |v: u32| {
        format!(
            "priority=100, actions=load:{v}->NXM_NX_REG1[], load:2->NXM_NX_REG2[], goto_table:80"
        )
    };
    run(&mut core, |c| {
        c.service_add(svc(5, &["tcp/80", "udp/53"])).unwrap()
    });
    // Port 53 goes, 443 comes; 80 and the fragment rule are untouched.
    let ((), e) = run(&mut core, |c| {
        c.service_add(svc(5, &["tcp/80", "tcp/443"])).unwrap()
    });
    assert_eq!(
        diff(&e.flows),
        (
            seed(&[&format!(
                "table=60, ip, nw_dst=172.30.0.1, udp, udp_dst=53, {}",
                action(5)
            )]),
            seed(&[&format!(
                "table=60, ip, nw_dst=172.30.0.1, tcp, tcp_dst=443, {}",
                action(5)
            )])
        )
    );
    // Another VNID: every flow's action changes (adds that replace), the rules move.
    let ((), e) = run(&mut core, |c| {
        c.service_add(svc(6, &["tcp/80", "tcp/443"])).unwrap()
    });
    assert_eq!(
        diff(&e.flows),
        (
            seed_of(&[vnid_rule(5)]),
            seed(&[
                &format!(
                    "table=60, ip, nw_dst=172.30.0.1, ip_frag=later, {}",
                    action(6)
                ),
                &format!(
                    "table=60, ip, nw_dst=172.30.0.1, tcp, tcp_dst=80, {}",
                    action(6)
                ),
                &format!(
                    "table=60, ip, nw_dst=172.30.0.1, tcp, tcp_dst=443, {}",
                    action(6)
                ),
                &vnid_rule(6),
            ])
        )
    );
}
