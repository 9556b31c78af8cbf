//! The admin tiers in the core: an admin change never touches a NetworkPolicy flow, a
//! priority change rewrites that policy's flows alone, two ANPs at one priority are refused
//! with nothing changed, and what one rule costs.

use super::netpol::world;
use super::*;
use crate::sdn::policy::admin::parse_admin_policy;

/// An ANP over the bench world's labels: subject the namespaces of team `team`, ingress
/// Deny from app=a1 pods on TCP 80 and Pass from team t1, egress Allow to 192.0.2.0/24.
fn anp(name: &str, priority: u16, team: usize) -> crate::sdn::policy::admin::AdminPolicy {
    let yaml = format!(
        "apiVersion: policy.networking.k8s.io/v1alpha1\nkind: AdminNetworkPolicy\n\
         metadata: {{name: {name}}}\nspec:\n  priority: {priority}\n\
         \x20 subject: {{namespaces: {{matchLabels: {{team: t{team}}}}}}}\n  ingress:\n\
         \x20 - {{name: deny-a1-80, action: Deny, from: [{{pods: {{namespaceSelector: {{}}, podSelector: {{matchLabels: {{app: a1}}}}}}}}], ports: [{{portNumber: {{port: 80}}}}]}}\n\
         \x20 - {{name: pass-t1, action: Pass, from: [{{namespaces: {{matchLabels: {{team: t1}}}}}}]}}\n  egress:\n\
         \x20 - {{name: allow-docs, action: Allow, to: [{{networks: [192.0.2.0/24]}}]}}\n"
    );
    parse_admin_policy(yaml.as_bytes()).unwrap()
}

/// Whether a flow is one of the admin tiers' (their tables, their jumps in 21 and 80).
fn is_admin(flow: &Flow) -> bool {
    match flow.table() {
        22 | 23 | 82 | 83 => true,
        21 => matches!(flow.priority(), 250 | 1),
        80 => matches!(flow.priority(), 305 | 60),
        _ => false,
    }
}

fn flows_in(core: &Core, tables: &[u8]) -> BTreeSet<String> {
    core.flows()
        .iter()
        .filter(|f| tables.contains(&f.table()))
        .map(Flow::describe)
        .collect()
}

#[test]
fn an_admin_change_touches_no_networkpolicy_flow() {
    let mut core = world(200, 200);
    let netpol_flows: BTreeSet<String> = core
        .flows()
        .iter()
        .filter(|f| !is_admin(f))
        .map(Flow::describe)
        .collect();
    assert!(
        netpol_flows.len() > 1000,
        "the world has NetworkPolicy flows"
    );
    let banp = {
        let mut p = anp("default", 0, 2);
        p.tier = crate::sdn::policy::admin::Tier::Baseline;
        p.ingress.remove(1);
        p
    };
    type Step = Box<dyn Fn(&mut Core)>;
    let steps: Vec<Step> = vec![
        Box::new(|c| c.admin_apply(anp("a", 10, 0)).unwrap()),
        Box::new(|c| c.admin_apply(anp("b", 20, 1)).unwrap()),
        Box::new(|c| c.admin_apply(anp("a", 30, 0)).unwrap()),
        Box::new(move |c| c.admin_apply(banp.clone()).unwrap()),
        Box::new(|c| c.admin_del("anp", "a").unwrap()),
        Box::new(|c| c.admin_del("anp", "b").unwrap()),
        Box::new(|c| c.admin_del("banp", "default").unwrap()),
    ];
    for (i, step) in steps.iter().enumerate() {
        let ((), effects) = run(&mut core, step);
        assert!(!effects.flows.is_empty(), "step {i} changed flows");
        let foreign: Vec<String> = effects
            .flows
            .deletes
            .iter()
            .chain(&effects.flows.adds)
            .filter(|f| !is_admin(f))
            .map(Flow::describe)
            .collect();
        assert!(foreign.is_empty(), "step {i} touched {foreign:?}");
    }
    let after: BTreeSet<String> = core.flows().iter().map(Flow::describe).collect();
    assert_eq!(
        after, netpol_flows,
        "every admin flow went with the last policy"
    );
}

#[test]
fn a_priority_change_rewrites_that_policys_flows_only() {
    let mut core = world(200, 200);
    run(&mut core, |c| c.admin_apply(anp("a", 10, 0)).unwrap());
    run(&mut core, |c| c.admin_apply(anp("b", 20, 0)).unwrap());
    let admin_tables = [22u8, 82];
    let before = flows_in(&core, &admin_tables);
    let of_a = |flows: &BTreeSet<String>, p: u16| -> BTreeSet<String> {
        let band = (65_000 - p * 64 - 63)..=(65_000 - p * 64);
        flows
            .iter()
            .filter(|f| {
                band.clone()
                    .any(|prio| f.contains(&format!("priority={prio},")))
            })
            .cloned()
            .collect()
    };
    let a_before = of_a(&before, 10);
    let others = &before - &a_before;
    assert!(a_before.len() > 20 && others.len() > 20);

    let ((), effects) = run(&mut core, |c| c.admin_apply(anp("a", 30, 0)).unwrap());
    let after = flows_in(&core, &admin_tables);
    let a_after = of_a(&after, 30);
    assert_eq!(&after - &a_after, others, "no other policy's flow changed");
    assert_eq!(a_after.len(), a_before.len());
    // Exactly a's old flows went and its new ones came, in one bundle.
    assert_eq!(effects.flows.deletes.len(), a_before.len());
    assert_eq!(effects.flows.adds.len(), a_after.len());
    let deleted: BTreeSet<String> = effects.flows.deletes.iter().map(Flow::describe).collect();
    assert_eq!(deleted, a_before);
}

#[test]
fn a_second_anp_at_one_priority_is_refused_and_changes_nothing() {
    let mut core = world(20, 20);
    run(&mut core, |c| c.admin_apply(anp("a", 10, 0)).unwrap());
    let before: BTreeSet<String> = core.flows().iter().map(Flow::describe).collect();
    let (result, effects) = run(&mut core, |c| c.admin_apply(anp("b", 10, 1)));
    let error = result.expect_err("refused").to_string();
    assert!(
        error.contains("spec.priority") && error.contains("\"a\""),
        "{error}"
    );
    assert!(effects.flows.is_empty() && effects.journal.is_empty());
    let after: BTreeSet<String> = core.flows().iter().map(Flow::describe).collect();
    assert_eq!(before, after);
    // The same policy again at its own priority is no change at all.
    let ((), effects) = run(&mut core, |c| c.admin_apply(anp("a", 10, 0)).unwrap());
    assert!(effects.flows.is_empty() && effects.journal.is_empty());
}

#[test]
fn a_rule_costs_its_subjects_peers_and_ports_plus_one() {
    let mut core = world(200, 200);
    // Subject: team t0's namespaces (one flow per namespace with pods here, by VNID) or the
    // app=a0 pods of them (one per pod); peers: app=a1 pods anywhere (one per pod) or team
    // t1's namespaces (one per namespace, by VNID); one port.
    let policy = |name: &str, priority: u16, subject: &str, from: &str| {
        let yaml = format!(
            "apiVersion: policy.networking.k8s.io/v1alpha1\nkind: AdminNetworkPolicy\n\
             metadata: {{name: {name}}}\nspec:\n  priority: {priority}\n  subject: {subject}\n  ingress:\n\
             \x20 - {{action: Deny, from: [{from}], ports: [{{portNumber: {{port: 80}}}}]}}\n"
        );
        parse_admin_policy(yaml.as_bytes()).unwrap()
    };
    let team_ns = "{namespaces: {matchLabels: {team: t0}}}";
    let team_pods =
        "{pods: {namespaceSelector: {matchLabels: {team: t0}}, podSelector: {matchLabels: {app: a0}}}}";
    let app_peers = "{pods: {namespaceSelector: {}, podSelector: {matchLabels: {app: a1}}}}";
    let team_peers = "{namespaces: {matchLabels: {team: t1}}}";
    run(&mut core, |c| {
        c.admin_apply(policy("ns-pods", 5, team_ns, app_peers))
            .unwrap()
    });
    run(&mut core, |c| {
        c.admin_apply(policy("pods-ns", 6, team_pods, team_peers))
            .unwrap()
    });

    let state = core.state();
    let team = |ns: &str| state.namespaces[ns].labels.get("team").cloned();
    let app = |i: &crate::sdn::objects::PodInfo| i.labels.get("app").cloned();
    let local_t0: Vec<_> = state
        .pod_infos
        .iter()
        .filter(|(k, i)| i.local && team(k.namespace()).as_deref() == Some("t0"))
        .collect();
    let namespaces_here: BTreeSet<&str> = local_t0.iter().map(|(k, _)| k.namespace()).collect();
    let a0_here = local_t0
        .iter()
        .filter(|(_, i)| app(i).as_deref() == Some("a0"))
        .count();
    let a1_pods = state
        .pod_infos
        .values()
        .filter(|i| app(i).as_deref() == Some("a1"))
        .count();
    let t1_namespaces = state
        .namespaces
        .values()
        .filter(|n| n.labels.get("team").map(String::as_str) == Some("t1"))
        .count();
    assert!(namespaces_here.len() > 1 && a1_pods > 10 && t1_namespaces > 1);

    let summaries = core.admin_summaries();
    // P subjects + S peers + K ports + the conjunction's flow.
    assert_eq!(summaries[0].selected_pods, local_t0.len());
    assert_eq!(summaries[0].flows, namespaces_here.len() + a1_pods + 1 + 1);
    assert_eq!(summaries[1].selected_pods, a0_here);
    assert_eq!(summaries[1].flows, a0_here + t1_namespaces + 1 + 1);
    // Table 82 holds both and its default (back to NetworkPolicy).
    assert_eq!(
        flows_in(&core, &[82]).len(),
        summaries[0].flows + summaries[1].flows + 1
    );
}
