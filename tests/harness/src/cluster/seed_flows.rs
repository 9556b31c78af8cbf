//! The seed's flows (../shared/seeds/ovscontroller.go.txt), written with ovs-vsctl/ovs-ofctl:
//! br0 programmed the way OpenShift SDN programmed it, with no ofnode involved. The e2e tests
//! run against it to prove the cluster plumbing, and ofnode's table must carry packets the same.

use super::{Context, Mode, Node, Pod, CLUSTER_NETWORK, POD_MTU, SERVICE_NETWORK};
use crate::cluster::ClusterError;

const VXLAN_OFPORT: &str = "1";
const TUN_OFPORT: &str = "2";

/// SetupOVS + the mode's table 80 + what SetupSDN does to tun0 (address, routes, forwarding).
pub(super) fn setup(node: &Node, mode: Mode) -> Result<(), ClusterError> {
    let ovs = node.ovs();
    let what = || format!("node {}: seed setup", node.index);
    ovs.vsctl(&[
        "add-br",
        "br0",
        "--",
        "set",
        "bridge",
        "br0",
        "datapath_type=netdev",
        "fail-mode=secure",
        "protocols=OpenFlow13",
        "--",
        "add-port",
        "br0",
        "vxlan0",
        "--",
        "set",
        "interface",
        "vxlan0",
        "type=vxlan",
        "options:remote_ip=flow",
        "options:key=flow",
        &format!("ofport_request={VXLAN_OFPORT}"),
        "--",
        "add-port",
        "br0",
        "tun0",
        "--",
        "set",
        "interface",
        "tun0",
        "type=internal",
        &format!("ofport_request={TUN_OFPORT}"),
    ])
    .context(what)?;
    ovs.wait_for_path(&ovs.mgmt_sock("br0"), std::time::Duration::from_secs(10))
        .context(what)?;
    ovs.ofctl("set-frags", "br0", &["nx-match"]).context(what)?;
    add_flows(node, &base_flows(node, mode))?;
    configure_tun0(node)
}

fn base_flows(node: &Node, mode: Mode) -> Vec<String> {
    let net = SeedNet {
        cluster: CLUSTER_NETWORK,
        service: SERVICE_NETWORK,
        local_subnet: &node.subnet_cidr(),
        gateway: &node.gateway.to_string(),
    };
    let mut flows = setup_flows(&net);
    flows.extend(mode_flows(mode));
    flows.push(version_note(mode));
    flows
}

/// tun0 gets the gateway with the subnet's prefix; the cluster network (on-link) and the service
/// network route through it instead of the subnet route; IPv4 forwarding on.
fn configure_tun0(node: &Node) -> Result<(), ClusterError> {
    let gateway = format!("{}/{}", node.gateway, super::SUBNET_PREFIX);
    let mtu = POD_MTU.to_string();
    node.exec(&["ip", "addr", "replace", &gateway, "dev", "tun0"])?;
    node.exec(&["ip", "link", "set", "tun0", "mtu", &mtu, "up"])?;
    node.exec(&["ip", "route", "del", &node.subnet_cidr(), "dev", "tun0"])?;
    node.exec(&[
        "ip",
        "route",
        "add",
        CLUSTER_NETWORK,
        "dev",
        "tun0",
        "scope",
        "link",
    ])?;
    node.exec(&["ip", "route", "add", SERVICE_NETWORK, "dev", "tun0"])?;
    node.exec(&["sysctl", "-qw", "net.ipv4.ip_forward=1"])?;
    Ok(())
}

/// AddHostSubnetRules for `remote`, without a fixed VNID.
pub(super) fn host_subnet(node: &Node, remote: &Node) -> Result<(), ClusterError> {
    add_flows(
        node,
        &host_subnet_flows(&remote.underlay_ip.to_string(), &remote.subnet_cidr(), None),
    )
}

/// SetUpPod (port + the 4 pod flows), plus the multitenant VNID rule of table 80. Returns the
/// ofport OVS assigned.
pub(super) fn pod_add(node: &Node, mode: Mode, pod: &Pod) -> Result<u32, ClusterError> {
    let ovs = node.ovs();
    let what = || format!("node {}: seed pod add {}", node.index, pod.host_veth);
    // --may-exist: an unattached pod's veth is on br0 already.
    ovs.vsctl(&["--may-exist", "add-port", "br0", &pod.host_veth])
        .context(what)?;
    let ofport: u32 = ovs
        .vsctl(&["get", "interface", &pod.host_veth, "ofport"])
        .context(what)?
        .trim()
        .parse()
        .map_err(|_| ClusterError::Invalid(format!("{}: no ofport", what())))?;
    let (ip, mac, vnid) = (pod.ip, &pod.mac, pod.vnid);
    let note = pod
        .sandbox
        .as_bytes()
        .chunks(2)
        .map(|pair| String::from_utf8_lossy(pair).into_owned())
        .collect::<Vec<_>>()
        .join(".");
    let mut flows = pod_flows(ofport, &ip.to_string(), mac, vnid, &note);
    if mode == Mode::Multitenant && vnid != 0 {
        flows.push(vnid_rule(vnid));
    }
    add_flows(node, &flows)?;
    Ok(ofport)
}

/// UpdateEgressNetworkPolicyRules' outcome for one policy with one Deny CIDR rule.
pub(super) fn egress_deny(node: &Node, vnid: u32, cidr: &str) -> Result<(), ClusterError> {
    add_flows(node, &[egress_rule_flow(vnid, 1, Some(cidr), false)])
}

/// UpdateEgressNetworkPolicyRules with no policy.
pub(super) fn egress_clear(node: &Node, vnid: u32) -> Result<(), ClusterError> {
    node.ovs()
        .ofctl("del-flows", "br0", &[&format!("table=100, reg0={vnid}")])
        .context(|| format!("node {}: seed egress clear", node.index))?;
    Ok(())
}

/// Adds flows in one `ovs-ofctl --bundle add-flows` (atomic, as the seed's transaction).
fn add_flows(node: &Node, flows: &[String]) -> Result<(), ClusterError> {
    // A file per call: pods may be added from several threads at once.
    let path = node
        .ovs()
        .dir()
        .join(format!("{}.flows", crate::unique_name("seed")));
    let what = || format!("node {}: add seed flows", node.index);
    std::fs::write(&path, flows.join("\n") + "\n")
        .map_err(|e| ClusterError::Invalid(format!("{}: write {}: {e}", what(), path.display())))?;
    node.ovs()
        .ofctl(
            "add-flows",
            "br0",
            &["--bundle", &path.display().to_string()],
        )
        .context(what)?;
    let _ = std::fs::remove_file(&path);
    Ok(())
}

// ---- The seed's flow texts, written once: the harness programs br0 with them through
// ovs-ofctl (above), and ofnode-proto's oracle tests hold the codec to them. ----

/// The addresses a node's SetupOVS flows name.
pub struct SeedNet<'a> {
    pub cluster: &'a str,
    pub service: &'a str,
    pub local_subnet: &'a str,
    pub gateway: &'a str,
}

/// SetupOVS's flows, without the policy plugin's table 80 rules (`mode_flows`) and the
/// version note (`version_note`).
pub fn setup_flows(net: &SeedNet<'_>) -> Vec<String> {
    let (cn, sn, ls, gw) = (net.cluster, net.service, net.local_subnet, net.gateway);
    vec![
        format!("table=0, priority=200, in_port=1, arp, nw_src={cn}, nw_dst={ls}, actions=move:NXM_NX_TUN_ID[0..31]->NXM_NX_REG0[],goto_table:10"),
        format!("table=0, priority=200, in_port=1, ip, nw_src={cn}, nw_dst={ls}, actions=move:NXM_NX_TUN_ID[0..31]->NXM_NX_REG0[],goto_table:10"),
        format!("table=0, priority=200, in_port=1, ip, nw_src={cn}, nw_dst=224.0.0.0/4, actions=move:NXM_NX_TUN_ID[0..31]->NXM_NX_REG0[],goto_table:10"),
        "table=0, priority=150, in_port=1, actions=drop".into(),
        "table=0, priority=250, in_port=2, ip, nw_dst=224.0.0.0/4, actions=drop".into(),
        format!("table=0, priority=200, in_port=2, arp, nw_src={gw}, nw_dst={cn}, actions=goto_table:30"),
        "table=0, priority=200, in_port=2, ip, actions=goto_table:30".into(),
        "table=0, priority=150, in_port=2, actions=drop".into(),
        "table=0, priority=100, arp, actions=goto_table:20".into(),
        "table=0, priority=100, ip, actions=goto_table:20".into(),
        "table=0, priority=0, actions=drop".into(),
        "table=10, priority=0, actions=drop".into(),
        "table=20, priority=0, actions=drop".into(),
        "table=21, priority=0, actions=goto_table:30".into(),
        format!("table=30, priority=300, arp, nw_dst={gw}, actions=output:2"),
        format!("table=30, priority=200, arp, nw_dst={ls}, actions=goto_table:40"),
        format!("table=30, priority=100, arp, nw_dst={cn}, actions=goto_table:50"),
        format!("table=30, priority=300, ip, nw_dst={gw}, actions=output:2"),
        format!("table=30, priority=100, ip, nw_dst={sn}, actions=goto_table:60"),
        format!("table=30, priority=200, ip, nw_dst={ls}, actions=goto_table:70"),
        format!("table=30, priority=100, ip, nw_dst={cn}, actions=goto_table:90"),
        "table=30, priority=50, in_port=1, ip, nw_dst=224.0.0.0/4, actions=goto_table:120".into(),
        "table=30, priority=25, ip, nw_dst=224.0.0.0/4, actions=goto_table:110".into(),
        "table=30, priority=0, ip, actions=goto_table:100".into(),
        "table=30, priority=0, arp, actions=drop".into(),
        "table=40, priority=0, actions=drop".into(),
        "table=50, priority=0, actions=drop".into(),
        "table=60, priority=200, reg0=0, actions=output:2".into(),
        "table=60, priority=0, actions=drop".into(),
        "table=70, priority=0, actions=drop".into(),
        format!("table=80, priority=300, ip, nw_src={gw}/32, actions=output:NXM_NX_REG2[]"),
        "table=80, priority=0, actions=drop".into(),
        "table=90, priority=0, actions=drop".into(),
        "table=100, priority=0, actions=output:2".into(),
        "table=110, priority=0, actions=drop".into(),
        "table=111, priority=100, actions=goto_table:120".into(),
        "table=120, priority=0, actions=drop".into(),
    ]
}

/// Table 80 belongs to the policy plugin: everything passes in subnet mode; multitenant lets
/// VNID 0 (either side) through here and each VNID to itself as pods arrive (`vnid_rule`).
pub fn mode_flows(mode: Mode) -> Vec<String> {
    match mode {
        Mode::Subnet => vec!["table=80, priority=200, actions=output:NXM_NX_REG2[]".into()],
        Mode::Multitenant => vec![
            "table=80, priority=200, reg0=0, actions=output:NXM_NX_REG2[]".into(),
            "table=80, priority=200, reg1=0, actions=output:NXM_NX_REG2[]".into(),
        ],
        // Not a seed plugin the harness writes: `Cluster::start` refuses it with seed flows.
        Mode::NetworkPolicy => Vec::new(),
    }
}

/// The version note of table 253: the plugin id (0 subnet, 1 multitenant) and rule version 3.
pub fn version_note(mode: Mode) -> String {
    let plugin_id = match mode {
        Mode::Subnet => 0,
        Mode::Multitenant => 1,
        Mode::NetworkPolicy => 2,
    };
    format!("table=253, actions=note:{plugin_id:02X}.03")
}

/// setupPodFlows for a pod on `ofport` (`note`: its sandbox id as dot-separated hex).
pub fn pod_flows(ofport: u32, ip: &str, mac: &str, vnid: u32, note: &str) -> Vec<String> {
    vec![
        format!("table=20, priority=100, in_port={ofport}, arp, nw_src={ip}, arp_sha={mac}, actions=load:{vnid}->NXM_NX_REG0[], note:{note}, goto_table:21"),
        format!("table=20, priority=100, in_port={ofport}, ip, nw_src={ip}, actions=load:{vnid}->NXM_NX_REG0[], goto_table:21"),
        format!("table=40, priority=100, arp, nw_dst={ip}, actions=output:{ofport}"),
        format!("table=70, priority=100, ip, nw_dst={ip}, actions=load:{vnid}->NXM_NX_REG1[], load:{ofport}->NXM_NX_REG2[], goto_table:80"),
    ]
}

/// EnsureVNIDRules (multitenant): pods of one VNID reach each other.
pub fn vnid_rule(vnid: u32) -> String {
    format!("table=80, priority=100, reg0={vnid}, reg1={vnid}, actions=output:NXM_NX_REG2[]")
}

/// AddServiceRules' flows for a service with `ports` (`"tcp/80"`, …).
pub fn service_flows(
    ip: std::net::Ipv4Addr,
    vnid: u32,
    ports: &[&str],
) -> Result<Vec<String>, ClusterError> {
    let action = format!(
        "priority=100, actions=load:{vnid}->NXM_NX_REG1[], load:2->NXM_NX_REG2[], goto_table:80"
    );
    let mut flows = vec![format!(
        "table=60, ip, nw_dst={ip}, ip_frag=later, {action}"
    )];
    for port in ports {
        let (proto, number) = port
            .split_once('/')
            .ok_or_else(|| ClusterError::Invalid(format!("service port {port:?}")))?;
        flows.push(format!(
            "table=60, ip, nw_dst={ip}, {proto}, {proto}_dst={number}, {action}"
        ));
    }
    Ok(flows)
}

/// AddServiceRules, plus the multitenant VNID rule of table 80 (EnsureVNIDRules).
pub(super) fn service_add(
    node: &Node,
    mode: Mode,
    ip: std::net::Ipv4Addr,
    vnid: u32,
    ports: &[&str],
) -> Result<(), ClusterError> {
    let mut flows = service_flows(ip, vnid, ports)?;
    if mode == Mode::Multitenant && vnid != 0 {
        flows.push(vnid_rule(vnid));
    }
    add_flows(node, &flows)
}

/// AddHostSubnetRules for a remote node: its tunnel source, and its subnet through the
/// tunnel with the packet's VNID (or a fixed one).
pub fn host_subnet_flows(host: &str, subnet: &str, fixed_vnid: Option<u32>) -> Vec<String> {
    let vnid = match fixed_vnid {
        Some(vnid) => format!("load:{vnid}->NXM_NX_TUN_ID[0..31]"),
        None => "move:NXM_NX_REG0[]->NXM_NX_TUN_ID[0..31]".into(),
    };
    vec![
        format!("table=10, priority=100, tun_src={host}, actions=goto_table:30"),
        format!("table=50, priority=100, arp, nw_dst={subnet}, actions={vnid},set_field:{host}->tun_dst,output:1"),
        format!("table=90, priority=100, ip, nw_dst={subnet}, actions={vnid},set_field:{host}->tun_dst,output:1"),
    ]
}

/// UpdateEgressNetworkPolicyRules' flow for one rule of a policy: traffic of `vnid` to
/// `cidr` (`None`: anywhere) is allowed out or dropped.
pub fn egress_rule_flow(vnid: u32, priority: u16, cidr: Option<&str>, allow: bool) -> String {
    let dst = cidr.map(|c| format!(", nw_dst={c}")).unwrap_or_default();
    let action = if allow { "output:2" } else { "drop" };
    format!("table=100, reg0={vnid}, priority={priority}, ip{dst}, actions={action}")
}
