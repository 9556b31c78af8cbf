//! The store and its selector groups, without a switch: what a change does to the indexes and
//! which members join and leave which groups.

use std::net::{IpAddr, Ipv4Addr};

use super::*;
use crate::sdn::labels::{Expression, Labels, Operator, Selector};
use crate::sdn::objects::Namespace;
use crate::sdn::objects::PodInfo;
use crate::sdn::state::{Change, NodeState};
use crate::value::Vnid;

fn labels(pairs: &[(&str, &str)]) -> Labels {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn namespace(name: &str, vnid: u32, pairs: &[(&str, &str)]) -> Change {
    Change::Namespace {
        name: name.into(),
        namespace: Some(Namespace {
            name: name.into(),
            vnid: Vnid::new(vnid).unwrap(),
            labels: labels(pairs),
            audit: Default::default(),
        }),
    }
}

fn key(text: &str) -> PodKey {
    text.parse().unwrap()
}

fn pod(key_text: &str, ip: [u8; 4], local: bool, pairs: &[(&str, &str)]) -> Change {
    Change::PodInfo {
        key: key(key_text),
        info: Some(PodInfo {
            labels: labels(pairs),
            ips: vec![IpAddr::V4(Ipv4Addr::from(ip))],
            local,
            ports: Vec::new(),
        }),
    }
}

fn selector(pairs: &[(&str, &str)]) -> Selector {
    Selector {
        match_labels: labels(pairs),
        match_expressions: Vec::new(),
    }
}

/// Applies `changes`, returning every delta as (group, pod or namespace name, joined).
fn apply(store: &mut Store, changes: Vec<Change>) -> Vec<(GroupId, String, bool)> {
    let mut deltas = Vec::new();
    for change in changes {
        store.apply(change, &mut deltas);
    }
    deltas
        .into_iter()
        .map(|d| {
            let name = match d.member {
                Member::Pod { key, .. } => key.to_string(),
                Member::Namespace { name, .. } => name,
            };
            (d.group, name, d.joined)
        })
        .collect()
}

fn members(store: &Store, group: GroupId) -> Vec<String> {
    let mut names: Vec<String> = store
        .groups()
        .members(group, store.world())
        .into_iter()
        .map(|m| match m {
            Member::Pod { key, .. } => key.to_string(),
            Member::Namespace { name, .. } => name,
        })
        .collect();
    names.sort();
    names
}

fn acquire(store: &mut Store, key: GroupKey) -> GroupId {
    let (groups, world) = store.groups_and_world();
    groups.acquire(key, world)
}

/// Namespaces x (team=a), y (team=b); pods x/web-1 (local), x/db-1 (remote), y/web-2 (remote).
fn world() -> Store {
    let mut store = Store::new(NodeState::default());
    apply(
        &mut store,
        vec![
            namespace("x", 11, &[("team", "a")]),
            namespace("y", 12, &[("team", "b")]),
            pod("x/web-1", [10, 128, 0, 5], true, &[("app", "web")]),
            pod("x/db-1", [10, 129, 0, 5], false, &[("app", "db")]),
            pod("y/web-2", [10, 129, 0, 6], false, &[("app", "web")]),
        ],
    );
    store
}

#[test]
fn a_group_starts_with_the_members_its_selectors_take() {
    let mut store = world();
    let web_in_x = acquire(
        &mut store,
        GroupKey::pods(
            Scope::Named("x".into()),
            Some(&selector(&[("app", "web")])),
            false,
        ),
    );
    assert_eq!(members(&store, web_in_x), ["x/web-1"]);
    let web_anywhere = acquire(
        &mut store,
        GroupKey::pods(
            Scope::Selected(Selector::default()),
            Some(&selector(&[("app", "web")])),
            false,
        ),
    );
    assert_eq!(members(&store, web_anywhere), ["x/web-1", "y/web-2"]);
    let local_in_x = acquire(
        &mut store,
        GroupKey::pods(Scope::Named("x".into()), None, true),
    );
    assert_eq!(members(&store, local_in_x), ["x/web-1"]);
    let team_b = acquire(
        &mut store,
        GroupKey::namespaces(&selector(&[("team", "b")])),
    );
    assert_eq!(members(&store, team_b), ["y"]);
    // The implicit name label selects namespaces too.
    let by_name = acquire(
        &mut store,
        GroupKey::namespaces(&selector(&[("kubernetes.io/metadata.name", "x")])),
    );
    assert_eq!(members(&store, by_name), ["x"]);
    assert_eq!(store.groups().matches_of(web_anywhere), 2);
}

#[test]
fn equal_selectors_are_one_group_kept_until_its_last_user_releases_it() {
    let mut store = world();
    let expr = |values: &[&str]| Selector {
        match_labels: Labels::new(),
        match_expressions: vec![Expression {
            key: "app".into(),
            operator: Operator::In,
            values: values.iter().map(|v| v.to_string()).collect(),
        }],
    };
    let a = acquire(
        &mut store,
        GroupKey::pods(Scope::Named("x".into()), Some(&expr(&["web", "db"])), false),
    );
    let b = acquire(
        &mut store,
        GroupKey::pods(
            Scope::Named("x".into()),
            Some(&expr(&["db", "web", "db"])),
            false,
        ),
    );
    assert_eq!(a, b, "the same selection in another spelling");
    assert_eq!(store.groups().len(), 1);
    let (groups, _) = store.groups_and_world();
    groups.release(a);
    assert_eq!(store.groups().len(), 1);
    let (groups, _) = store.groups_and_world();
    groups.release(b);
    assert!(store.groups().is_empty());
    // A pod change after the group went touches nothing.
    assert!(apply(
        &mut store,
        vec![pod("x/web-3", [10, 128, 0, 7], true, &[("app", "web")])]
    )
    .is_empty());
}

#[test]
fn a_pod_change_joins_and_leaves_only_the_groups_it_touches() {
    let mut store = world();
    let web_in_x = acquire(
        &mut store,
        GroupKey::pods(
            Scope::Named("x".into()),
            Some(&selector(&[("app", "web")])),
            false,
        ),
    );
    let db_in_x = acquire(
        &mut store,
        GroupKey::pods(
            Scope::Named("x".into()),
            Some(&selector(&[("app", "db")])),
            false,
        ),
    );
    let web_in_y = acquire(
        &mut store,
        GroupKey::pods(
            Scope::Named("y".into()),
            Some(&selector(&[("app", "web")])),
            false,
        ),
    );
    // Relabelled: leaves one group, joins another; the group of y never hears of it.
    let deltas = apply(
        &mut store,
        vec![pod("x/web-1", [10, 128, 0, 5], true, &[("app", "db")])],
    );
    assert_eq!(
        deltas,
        vec![
            (web_in_x, "x/web-1".into(), false),
            (db_in_x, "x/web-1".into(), true)
        ]
    );
    // A label no selector reads: nothing.
    let deltas = apply(
        &mut store,
        vec![pod(
            "x/web-1",
            [10, 128, 0, 5],
            true,
            &[("app", "db"), ("tier", "1")],
        )],
    );
    assert!(deltas.is_empty());
    // A new address: leaves with the old one, joins with the new.
    let deltas = apply(
        &mut store,
        vec![pod("x/web-1", [10, 128, 0, 9], true, &[("app", "db")])],
    );
    assert_eq!(
        deltas,
        vec![
            (db_in_x, "x/web-1".into(), false),
            (db_in_x, "x/web-1".into(), true)
        ]
    );
    // Deleted.
    let deltas = apply(
        &mut store,
        vec![Change::PodInfo {
            key: key("y/web-2"),
            info: None,
        }],
    );
    assert_eq!(deltas, vec![(web_in_y, "y/web-2".into(), false)]);
    assert!(members(&store, web_in_y).is_empty());
}

#[test]
fn a_namespace_change_moves_its_pods_in_and_out_of_selector_scoped_groups() {
    let mut store = world();
    let team_a_web = acquire(
        &mut store,
        GroupKey::pods(
            Scope::Selected(selector(&[("team", "a")])),
            Some(&selector(&[("app", "web")])),
            false,
        ),
    );
    let team_a = acquire(
        &mut store,
        GroupKey::namespaces(&selector(&[("team", "a")])),
    );
    assert_eq!(members(&store, team_a_web), ["x/web-1"]);
    // y joins team a: its web pod joins, and y itself joins the namespace group.
    let deltas = apply(&mut store, vec![namespace("y", 12, &[("team", "a")])]);
    assert_eq!(
        deltas,
        vec![
            (team_a_web, "y/web-2".into(), true),
            (team_a, "y".into(), true)
        ]
    );
    // A new VNID: y's members leave with the old one and join with the new.
    let mut raw = Vec::new();
    store.apply(namespace("y", 22, &[("team", "a")]), &mut raw);
    let vnids: Vec<(bool, Vnid)> = raw
        .iter()
        .map(|d| match &d.member {
            Member::Pod { vnid, .. } | Member::Namespace { vnid, .. } => (d.joined, *vnid),
        })
        .collect();
    let (v12, v22) = (Vnid::new(12).unwrap(), Vnid::new(22).unwrap());
    assert_eq!(
        vnids,
        vec![(false, v12), (true, v22), (false, v12), (true, v22)]
    );
    // Deleted: everything of it leaves.
    let deltas = apply(
        &mut store,
        vec![
            Change::PodInfo {
                key: key("y/web-2"),
                info: None,
            },
            Change::Namespace {
                name: "y".into(),
                namespace: None,
            },
        ],
    );
    assert_eq!(
        deltas,
        vec![
            (team_a_web, "y/web-2".into(), false),
            (team_a, "y".into(), false)
        ]
    );
}

#[test]
fn pods_of_an_unknown_namespace_are_in_no_group_until_it_exists() {
    let mut store = world();
    let all_in_z = acquire(
        &mut store,
        GroupKey::pods(Scope::Named("z".into()), None, false),
    );
    assert!(apply(&mut store, vec![pod("z/a", [10, 129, 0, 9], false, &[])]).is_empty());
    let deltas = apply(&mut store, vec![namespace("z", 13, &[])]);
    assert_eq!(deltas, vec![(all_in_z, "z/a".into(), true)]);
}

#[test]
fn preview_answers_without_making_a_group() {
    let store = world();
    let key = GroupKey::pods(
        Scope::Selected(Selector::default()),
        Some(&selector(&[("app", "web")])),
        false,
    );
    assert_eq!(store.groups().preview(&key, store.world()).len(), 2);
    assert!(store.groups().is_empty());
}

#[test]
fn the_index_finds_pods_by_namespace_label_and_address() {
    let store = world();
    let index = store.index();
    assert_eq!(index.pod_count_in("x"), 2);
    let at: Vec<String> = index
        .pods_at(IpAddr::V4(Ipv4Addr::new(10, 129, 0, 6)))
        .map(|k| k.to_string())
        .collect();
    assert_eq!(at, ["y/web-2"]);
    // A selector's rarest pair narrows the candidates.
    let web = selector(&[("app", "web")]);
    let candidates: Vec<String> = index
        .pod_candidates("y", Some(&web))
        .map(|k| k.to_string())
        .collect();
    assert_eq!(candidates, ["y/web-2"]);
    let none = selector(&[("app", "nope")]);
    assert_eq!(index.pod_candidates("x", Some(&none)).count(), 0);
}

#[test]
fn local_pods_are_found_by_address_and_sandbox() {
    use crate::sdn::types::Pod;
    let mut store = Store::new(NodeState::default());
    let attached = Pod {
        veth: Some("veth5".parse().unwrap()),
        ip: Ipv4Addr::new(10, 128, 0, 5),
        mac: "0a:58:0a:80:00:05".parse().unwrap(),
        sandbox: "ab".repeat(32).parse().unwrap(),
        vnid: Vnid::new(11).unwrap(),
        ofport: 5,
    };
    let undo = store.apply(
        Change::LocalPod {
            key: key("x/web-1"),
            pod: Some(attached.clone()),
        },
        &mut Vec::new(),
    );
    let (found, _) = store.local_pod_at(attached.ip).unwrap();
    assert_eq!(found.to_string(), "x/web-1");
    assert!(store.local_pod_by_sandbox(&attached.sandbox).is_some());
    store.apply(undo, &mut Vec::new());
    assert!(store.local_pod_at(attached.ip).is_none());
    assert!(store.local_pod_by_sandbox(&attached.sandbox).is_none());
}
