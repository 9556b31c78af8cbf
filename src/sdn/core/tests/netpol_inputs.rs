//! The NetworkPolicy mode's inputs refused by the core, each changing nothing: in the modes
//! that do not enforce NetworkPolicy (all of them), and in networkpolicy mode a namespace of
//! VNID 0 and a policy over the flow limit.

use std::net::Ipv4Addr;

use super::*;
use crate::sdn::core::CoreError as Error;
use crate::sdn::core::LabelEdit;
use crate::sdn::labels::Labels;
use crate::sdn::objects::Namespace;
use crate::sdn::objects::PodInfo;
use crate::sdn::policy::networkpolicy::limits::MAX_FLOWS;
use crate::sdn::policy::networkpolicy::parse_netpol;

fn namespace(name: &str, v: u32) -> Namespace {
    Namespace {
        name: name.into(),
        vnid: vnid(v),
        labels: BTreeMap::new(),
        audit: Default::default(),
    }
}

fn pod_labels() -> Labels {
    BTreeMap::from([("pod".to_string(), "a".to_string())])
}

fn deny_all(namespace: &str) -> crate::sdn::policy::networkpolicy::model::NetPol {
    let json = format!(
        r#"{{"apiVersion":"networking.k8s.io/v1","kind":"NetworkPolicy",
            "metadata":{{"name":"deny","namespace":"{namespace}"}},"spec":{{"podSelector":{{}}}}}}"#
    );
    parse_netpol(json.as_bytes()).unwrap()
}

/// One operation on the core that may be refused.
type Op = Box<dyn FnOnce(&mut Core) -> Result<(), Error>>;

/// Runs `op` as a batch and checks it failed and changed nothing: the state, the table and
/// the batch's effects.
#[track_caller]
fn refused(core: &mut Core, op: impl FnOnce(&mut Core) -> Result<(), Error>) -> Error {
    let (state, table) = (core.state().clone(), printed_table(core));
    let (result, effects) = run(core, op);
    let err = result.expect_err("refused");
    assert_eq!(core.state(), &state, "{err}");
    assert_eq!(printed_table(core), table, "{err}");
    assert!(
        effects.flows.is_empty() && effects.journal.is_empty(),
        "{err}"
    );
    err
}

fn printed_table(core: &Core) -> BTreeSet<String> {
    core.flows().iter().map(Flow::describe).collect()
}

#[test]
fn the_modes_that_do_not_enforce_networkpolicy_refuse_its_inputs() {
    for mode in [Mode::Subnet, Mode::Multitenant] {
        let mut core = set_up(mode);
        let added = key_of(&pod(5, 11));
        run(&mut core, |c| c.pod_add(pod(5, 11)).unwrap());
        let remote_key = key_in("x", Ipv4Addr::new(10, 130, 0, 7));
        let remote = PodInfo {
            ips: vec![std::net::IpAddr::V4(Ipv4Addr::new(10, 130, 0, 7))],
            ..PodInfo::default()
        };
        let remote_gone = remote_key.clone();
        let ops: Vec<(&str, Op)> = vec![
            (
                "namespaces",
                Box::new(|c| c.namespace_set(namespace("x", 11))),
            ),
            ("namespaces", Box::new(|c| c.namespace_del("x"))),
            (
                "a pod's labels",
                Box::new(|c| c.pod_add_in("x", pod(6, 11), pod_labels())),
            ),
            (
                "pod labels",
                Box::new(move |c| c.pod_labels(&added, &LabelEdit::default())),
            ),
            (
                "remote pods",
                Box::new(move |c| c.remote_pod_set(remote_key, remote)),
            ),
            (
                "remote pods",
                Box::new(move |c| c.remote_pod_del(&remote_gone)),
            ),
            (
                "NetworkPolicy objects",
                Box::new(|c| c.netpol_apply(deny_all("x"))),
            ),
            (
                "NetworkPolicy objects",
                Box::new(|c| c.netpol_del("x", "deny")),
            ),
        ];
        for (what, op) in ops {
            let err = refused(&mut core, op);
            assert!(
                matches!(&err, Error::WrongMode { mode: m, .. } if *m == mode),
                "{what}: {err:?}"
            );
            assert_eq!(
                err.to_string(),
                format!(
                    "{what}: only a node in networkpolicy mode takes them; this node is in {} mode",
                    mode.name()
                )
            );
        }
        // A pod without labels is the seed's pod add, as before.
        run(&mut core, |c| {
            c.pod_add_in("x", pod(6, 11), Labels::new()).unwrap()
        });
        assert!(core
            .state()
            .pods
            .contains_key(&key_in("x", Ipv4Addr::new(10, 128, 0, 6))));
    }
}

#[test]
fn networkpolicy_mode_refuses_a_namespace_of_vnid_0_and_a_policy_over_the_flow_limit() {
    let mut core = set_up(Mode::NetworkPolicy);
    let err = refused(&mut core, |c| c.namespace_set(namespace("x", 0)));
    assert!(err.to_string().starts_with("vnid: 0 is the VNID"), "{err}");

    run(&mut core, |c| c.namespace_set(namespace("x", 11)).unwrap());
    run(&mut core, |c| {
        c.pod_add_in("x", pod(5, 0), pod_labels()).unwrap()
    });
    // 60 ipBlocks, each a /16 minus 32 scattered hosts: far more flows than the limit.
    let blocks: Vec<String> = (0..60)
        .map(|i| {
            let except: Vec<String> = (0..32)
                .map(|j| format!(r#""10.{i}.{}.{}/32""#, j * 7, j + 1))
                .collect();
            format!(
                r#"{{"ipBlock":{{"cidr":"10.{i}.0.0/16","except":[{}]}}}}"#,
                except.join(",")
            )
        })
        .collect();
    let json = format!(
        r#"{{"apiVersion":"networking.k8s.io/v1","kind":"NetworkPolicy",
            "metadata":{{"name":"big","namespace":"x"}},
            "spec":{{"podSelector":{{}},"ingress":[{{"from":[{}]}}]}}}}"#,
        blocks.join(",")
    );
    let big = parse_netpol(json.as_bytes()).unwrap();
    let err = refused(&mut core, |c| c.netpol_apply(big));
    assert!(
        err.to_string()
            .starts_with(&format!("spec: needs more than {MAX_FLOWS} flows")),
        "{err}"
    );
    // A policy within the limit goes in.
    run(&mut core, |c| c.netpol_apply(deny_all("x")).unwrap());
    assert_eq!(core.state().netpols.len(), 1);
}
