//! The policy audit's flows and meters on a real (private) Open vSwitch, `ovs-ofctl` the
//! oracle: a namespace that audits allow and deny gets its rules' verdict flows prefixed
//! (`load:KEY->NXM_NX_REG4[],resubmit(,24)`), table 24's controller flow per audited rule, and
//! one meter per rule at the configured rate; turning the audit off takes the flows and then
//! the meters away; a restarted ovs-vswitchd (which has no meters) gets the meters back before
//! the flows that name them. The order of meter mods and bundles is read from the harness's
//! OpenFlow proxy between the node and the switch.

mod sdn_common;

use std::time::{Duration, Instant};

use ofnode::sdn::audit::{AuditSet, AuditTier, Dir, RuleRef, Verdict};
use ofnode::sdn::policy::networkpolicy::parse_netpol;
use ofnode::sdn::{AuditRate, Mode, Namespace, PodInfo, Vnid};
use ofnode_harness::ofproxy::{BundleCtrl, Direction, Traffic};
use ofnode_harness::{OfProxy, Ovs};
use sdn_common::*;

const RATE: AuditRate = AuditRate { rate: 50, burst: 7 };

/// The rule of policy `allow-b` (its first conjunction id is 1), and the isolation of x (VNID
/// 11) on ingress.
const ALLOW: RuleRef = RuleRef {
    tier: AuditTier::NetworkPolicy,
    dir: Dir::Ingress,
    verdict: Verdict::Allow,
    id: 1,
};
const ISOLATION: RuleRef = RuleRef {
    tier: AuditTier::NetworkPolicy,
    dir: Dir::Ingress,
    verdict: Verdict::Deny,
    id: 11,
};

fn namespace_x(audit: &str) -> Namespace {
    Namespace {
        name: "x".into(),
        vnid: Vnid::new(11).unwrap(),
        labels: labels(&[]),
        audit: audit.parse::<AuditSet>().unwrap(),
    }
}

/// The flows of table 80 and 24 `ovs-ofctl dump-flows` shows for the policy, audited or not.
fn policy_flows(audited: bool) -> Vec<String> {
    let prefix = |rule: RuleRef| {
        if audited {
            format!("load:{:#x}->NXM_NX_REG4[],resubmit(,24)", rule.key())
        } else {
            String::new()
        }
    };
    let allow = match prefix(ALLOW) {
        p if p.is_empty() => "goto_table:81".to_string(),
        p => format!("{p},goto_table:81"),
    };
    let drop = match prefix(ISOLATION) {
        p if p.is_empty() => "drop".to_string(),
        p => p,
    };
    let mut flows = vec![
        format!(
            "cookie={:#x}, table=80, priority=200,conj_id=1,ip actions={allow}",
            ALLOW.cookie()
        ),
        format!(
            "cookie={:#x}, table=80, priority=100,ip,nw_dst=10.128.0.5 actions={drop}",
            ISOLATION.cookie()
        ),
    ];
    if audited {
        flows.extend([ALLOW, ISOLATION].map(audit_flow));
    }
    flows
}

/// Table 24's flow of `rule`, as ovs-ofctl prints it.
fn audit_flow(rule: RuleRef) -> String {
    let userdata: Vec<String> = rule.userdata().iter().map(|b| format!("{b:02x}")).collect();
    format!(
        "table=24, priority=100,ct_state=+new+trk,reg4={:#x} actions=controller(max_len=128,userdata={},meter_id={})",
        rule.key(),
        userdata.join("."),
        rule.key()
    )
}

/// The flows of tables 24 and 80 the switch holds, but the mode's own (not the policy's).
fn switch_policy_flows(ovs: &Ovs) -> Vec<String> {
    let mut flows: Vec<String> = ovs
        .dump_flows("br0")
        .expect("dump-flows")
        .into_iter()
        .filter(|f| f.contains("table=24,") || f.contains("cookie=0x4f41"))
        .collect();
    flows.sort();
    flows
}

/// The meters on br0 as `ovs-ofctl -O OpenFlow13 dump-meters` prints them, one line each
/// (`meter=N pktps burst stats bands= type=drop rate=R burst_size=B`).
fn meters(ovs: &Ovs) -> Vec<String> {
    try_meters(ovs).expect("dump-meters")
}

/// [`meters`], or None while ovs-vswitchd does not answer.
fn try_meters(ovs: &Ovs) -> Option<Vec<String>> {
    let text = ovs
        .ofctl("dump-meters", "br0", &["-O", "OpenFlow13"])
        .ok()?;
    let mut meters: Vec<String> = Vec::new();
    for line in text.lines().skip(1).filter(|l| !l.trim().is_empty()) {
        match meters.last_mut() {
            Some(last) if !line.starts_with("meter=") => {
                last.push(' ');
                last.push_str(line.trim());
            }
            _ => meters.push(line.trim().to_string()),
        }
    }
    meters.sort();
    Some(meters)
}

fn meter_line(rule: RuleRef) -> String {
    format!(
        "meter={} pktps burst stats bands= type=drop rate={} burst_size={}",
        rule.key(),
        RATE.rate,
        RATE.burst
    )
}

const OFPT_METER_MOD: u8 = 29;

/// What the node sent the switch since `mark`, in order: `M` for a meter mod, `B` for a
/// bundle's commit (other messages left out).
fn meter_mods_and_commits(proxy: &OfProxy, mark: usize) -> String {
    meter_mods_and_commits_on(proxy, mark, None)
}

/// [`meter_mods_and_commits`] on connection `conn` alone (None: all of them).
fn meter_mods_and_commits_on(proxy: &OfProxy, mark: usize, conn: Option<usize>) -> String {
    let traffic: Traffic = proxy.traffic_since(mark);
    traffic
        .frames
        .iter()
        .filter(|f| f.direction == Direction::ToSwitch)
        .filter(|f| conn.is_none_or(|c| f.conn == c))
        .filter_map(|f| match f.bundle_ctrl() {
            Some((_, BundleCtrl::CommitRequest)) => Some('B'),
            _ => (f.msg_type() == OFPT_METER_MOD).then_some('M'),
        })
        .collect()
}

/// Namespace x (auditing nothing yet), its local pod a (pod=a, 10.128.0.5), a remote pod b
/// (pod=b) and the policy `allow-b`: from pod=b on TCP 80 to pod=a.
async fn policy_world(f: &Fixture) {
    let node = &f.node;
    node.namespace_set(namespace_x("none")).await.unwrap();
    f.veth("vethA");
    let mut pod = pod_a(0);
    pod.pod = key("x/pod-a");
    pod.labels = labels(&[("pod", "a")]);
    node.pod_add(&pod).await.expect("pod a");
    let info = PodInfo {
        labels: labels(&[("pod", "b")]),
        ips: vec!["10.130.0.7".parse().unwrap()],
        ..Default::default()
    };
    node.remote_pod_set(key("x/pod-b"), info).await.unwrap();
    let spec = r#"{"apiVersion":"networking.k8s.io/v1","kind":"NetworkPolicy",
        "metadata":{"name":"allow-b","namespace":"x"},
        "spec":{"podSelector":{"matchLabels":{"pod":"a"}},
        "ingress":[{"from":[{"podSelector":{"matchLabels":{"pod":"b"}}}],"ports":[{"port":80}]}]}}"#;
    node.netpol_apply(parse_netpol(spec.as_bytes()).unwrap())
        .await
        .unwrap();
}

#[track_caller]
fn assert_sorted_eq(got: Vec<String>, mut want: Vec<String>) {
    want.sort();
    assert_eq!(got, want);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn audited_rules_have_their_flows_and_meters_and_a_restarted_switch_gets_meters_first() {
    let (f, proxy) = Fixture::start_through_proxy_with(|_, cfg| cfg.audit = RATE).await;
    f.node
        .setup(&setup_request(Mode::NetworkPolicy))
        .await
        .expect("setup");
    let node = &f.node;
    policy_world(&f).await;
    // Not audited: the verdict flows carry their rules' cookies, nothing more.
    assert_sorted_eq(switch_policy_flows(&f.ovs), policy_flows(false));
    assert_sorted_eq(meters(&f.ovs), Vec::new());

    let mark = proxy.mark();
    node.namespace_set(namespace_x("allow,deny")).await.unwrap();
    assert_eq!(
        meter_mods_and_commits(&proxy, mark),
        "MMB",
        "meters before the bundle"
    );
    assert_sorted_eq(switch_policy_flows(&f.ovs), policy_flows(true));
    let want_meters = vec![meter_line(ALLOW), meter_line(ISOLATION)];
    assert_sorted_eq(meters(&f.ovs), want_meters.clone());
    let status = node.status();
    let audit = status.audit_meters.expect("the audit's status");
    assert_eq!((audit.rules, audit.refused.len()), (2, 0), "{audit:?}");

    // Off again: the flows go, then the meters.
    let mark = proxy.mark();
    node.namespace_set(namespace_x("none")).await.unwrap();
    assert_eq!(
        meter_mods_and_commits(&proxy, mark),
        "BMM",
        "meters after the bundle"
    );
    assert_sorted_eq(switch_policy_flows(&f.ovs), policy_flows(false));
    assert_sorted_eq(meters(&f.ovs), Vec::new());

    // A restarted ovs-vswitchd has no meters and no flows: the node gives it the meters
    // before the flows that name them. Flows are read before meters, so a flow seen without
    // its meter means the meter came later.
    node.namespace_set(namespace_x("allow,deny")).await.unwrap();
    let mark = proxy.mark();
    f.ovs.kill_vswitchd();
    f.ovs.start_vswitchd().expect("restart ovs-vswitchd");
    let audit_flows = [ALLOW, ISOLATION].map(audit_flow);
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let flows = f.ovs.dump_flows("br0").unwrap_or_default();
        let meters = try_meters(&f.ovs).unwrap_or_default();
        let present = audit_flows.iter().filter(|a| flows.contains(a)).count();
        if present > 0 {
            assert_eq!(
                meters, want_meters,
                "table 24's flows are back before their meters"
            );
        }
        if present == audit_flows.len() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the node did not restore the audit's flows: {flows:?}"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_sorted_eq(switch_policy_flows(&f.ovs), policy_flows(true));
    let order = meter_mods_and_commits(&proxy, mark);
    assert!(
        order.starts_with("MMB"),
        "the restarted switch got its meters first: {order}"
    );
}

/// A meter the switch refuses (here: a rate of 0, which the daemon's config refuses but the
/// node's does not check) is reported with the switch's error, counted, listed in status, and
/// the policy's flows still go.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_meter_is_reported_and_the_flows_still_go() {
    let f = Fixture::start_with(|_, cfg| cfg.audit = AuditRate { rate: 0, burst: 0 }).await;
    f.node
        .setup(&setup_request(Mode::NetworkPolicy))
        .await
        .expect("setup");
    let node = &f.node;
    node.namespace_set(namespace_x("deny")).await.unwrap();
    f.veth("vethA");
    let mut pod = pod_a(0);
    pod.pod = key("x/pod-a");
    node.pod_add(&pod).await.expect("pod a");
    let deny_all = r#"{"apiVersion":"networking.k8s.io/v1","kind":"NetworkPolicy",
        "metadata":{"name":"deny","namespace":"x"},"spec":{"podSelector":{}}}"#;
    node.netpol_apply(parse_netpol(deny_all.as_bytes()).unwrap())
        .await
        .expect("the policy is enforced although its meter is refused");
    let flows = f.ovs.dump_flows("br0").expect("dump-flows");
    let isolation = format!(
        "cookie={:#x}, table=80, priority=100,ip,reg1=0xb actions=load:{:#x}->NXM_NX_REG4[],resubmit(,24)",
        ISOLATION.cookie(),
        ISOLATION.key()
    );
    assert!(flows.contains(&isolation), "{flows:#?}");
    assert!(flows.contains(&audit_flow(ISOLATION)), "{flows:#?}");
    assert_sorted_eq(meters(&f.ovs), Vec::new());
    let audit = node.status().audit_meters.expect("the audit's status");
    assert_eq!(audit.refused.len(), 1, "{audit:?}");
    let refused = &audit.refused[0];
    assert_eq!(refused.meter, ISOLATION.key());
    assert_eq!(refused.rule, "networkpolicy ingress deny #11");
    assert!(refused.error.contains("OFPMMFC_"), "{refused:?}");
    let metrics = node.metrics().render(&node.status());
    assert!(
        metrics.contains("ofnode_audit_meter_refusals_total 1"),
        "{metrics}"
    );
}

/// The connection is cut just before a batch's first meter mod: the node sends it again on
/// the next session, still before the bundle that names it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_meter_mod_lost_with_the_connection_is_sent_again_before_the_flows() {
    let (f, proxy) = Fixture::start_through_proxy_with(|_, cfg| cfg.audit = RATE).await;
    f.node
        .setup(&setup_request(Mode::NetworkPolicy))
        .await
        .expect("setup");
    policy_world(&f).await;
    proxy.cut_before(|frame| frame.msg_type() == OFPT_METER_MOD);
    let mark = proxy.mark();
    f.node
        .namespace_set(namespace_x("allow,deny"))
        .await
        .expect("the batch goes on the next session");
    assert_sorted_eq(switch_policy_flows(&f.ovs), policy_flows(true));
    assert_sorted_eq(
        meters(&f.ovs),
        vec![meter_line(ALLOW), meter_line(ISOLATION)],
    );
    // On the new session: both meters, then the bundle.
    let order = meter_mods_and_commits_on(&proxy, mark, proxy.current());
    assert!(order.starts_with("MMB"), "{order}");
    assert!(proxy.connections() > 1, "the connection was cut");
}
