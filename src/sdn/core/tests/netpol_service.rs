//! Service traffic in networkpolicy mode: it leaves through tun0 unjudged (table 21 lets the
//! service network pass) and comes back from kube-proxy's DNAT through tun0, where table 25
//! gives a local pod's packets their VNID again and table 21 judges their egress. The other
//! modes' tables have none of it (the seed's flows are their spec).

use super::*;
use crate::sdn::objects::Namespace;

const SERVICE_FLOWS: [&str; 3] = [
    "table=0, priority=300, in_port=2, ip, nw_src=10.128.0.0/23, nw_dst=10.128.0.0/14, actions=goto_table:25",
    "table=25, priority=0, actions=goto_table:30",
    "table=21, priority=300, ip, nw_dst=172.30.0.0/16, actions=goto_table:30",
];

fn table(core: &Core) -> BTreeSet<String> {
    printed(&core.flows().iter().cloned().collect::<Vec<_>>())
}

#[test]
fn only_networkpolicy_mode_has_table_25_and_the_service_pass() {
    for mode in Mode::ALL {
        let mut core = set_up(mode);
        let held = table(&core);
        let has = seed(&SERVICE_FLOWS).is_subset(&held);
        assert_eq!(has, mode == Mode::NetworkPolicy, "{mode}");
        if mode != Mode::NetworkPolicy {
            assert!(!held.iter().any(|f| f.contains("table=25,")), "{mode}");
            // A pod brings the seed's four flows and nothing of table 25.
            let ((), e) = run(&mut core, |c| c.pod_add(pod(3, 10)).unwrap());
            assert!(!printed(&e.flows.adds)
                .iter()
                .any(|f| f.contains("table=25,")));
        }
    }
}

#[test]
fn a_pod_brings_its_table_25_flow_and_takes_it_along() {
    let mut core = set_up(Mode::NetworkPolicy);
    let x = Namespace {
        name: "x".into(),
        vnid: vnid(11),
        labels: BTreeMap::new(),
        audit: Default::default(),
    };
    run(&mut core, |c| c.namespace_set(x).unwrap());
    let ((), e) = run(&mut core, |c| {
        c.pod_add_in("x", pod(3, 0), BTreeMap::new()).unwrap()
    });
    let note = pod(3, 0).sandbox.note();
    let wanted = seed(&[
        &format!("table=20, priority=100, in_port=3, arp, nw_src=10.128.0.3, arp_sha=0a:58:0a:80:00:03, actions=load:11->NXM_NX_REG0[], note:{note}, goto_table:21"),
        "table=20, priority=100, in_port=3, ip, nw_src=10.128.0.3, actions=load:11->NXM_NX_REG0[], goto_table:21",
        "table=40, priority=100, arp, nw_dst=10.128.0.3, actions=output:3",
        "table=70, priority=100, ip, nw_dst=10.128.0.3, actions=load:11->NXM_NX_REG1[], load:3->NXM_NX_REG2[], goto_table:80",
        "table=25, priority=100, ip, nw_src=10.128.0.3, actions=load:11->NXM_NX_REG0[], resubmit(,21)",
    ]);
    assert_eq!(diff(&e.flows), (none(), wanted.clone()));
    let x3 = key_in("x", pod(3, 0).ip);
    let ((), e) = run(&mut core, |c| c.pod_del(&x3, None).unwrap());
    assert_eq!(diff(&e.flows), (wanted, none()));
}
