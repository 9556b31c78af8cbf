//! The bridge's layout, each number named once: which table does what (the seed's SetupOVS
//! comments), the fixed OpenFlow ports, and what the registers carry. `flows.rs` writes flows
//! with these names, `readback.rs` reads flows back by them.

use ofnode_proto::{Field, FieldRange};

/// Table 0: dispatch by where a packet came from (VXLAN, tun0, a pod).
pub const CLASSIFY: u8 = 0;
/// Table 10: VXLAN ingress filtering: only from known nodes (host subnets).
pub const VXLAN_INGRESS: u8 = 10;
/// Table 20: from a pod: its IP and MAC checked, its VNID loaded (pods).
pub const FROM_POD: u8 = 20;
/// Table 21: from a pod, before routing: left to the policy mode (networkpolicy's conntrack).
pub const POLICY_CONNTRACK: u8 = 21;
/// Table 22: a local pod's egress judged by the AdminNetworkPolicies (networkpolicy mode);
/// table 21 jumps here first, Pass comes back to 21.
pub const ADMIN_EGRESS: u8 = 22;
/// Table 23: a local pod's egress judged by the BaselineAdminNetworkPolicy, for pods no
/// NetworkPolicy isolates for egress (table 21's last resort).
pub const BASELINE_EGRESS: u8 = 23;
/// Table 24: the policy audit: a verdict flow of an audited rule loads the rule's key into
/// reg4 and resubmits here; a new connection's first packet is sent to ofnode through the
/// rule's meter (`sdn/audit.rs`), and the verdict flow goes on as before.
pub const POLICY_AUDIT: u8 = 24;
/// Table 25: IP from tun0 with a local pod's source address: the pod's traffic to a service,
/// back from kube-proxy's DNAT in the host; its VNID is loaded again (networkpolicy mode).
pub const FROM_SERVICE: u8 = 25;
/// Table 30: general routing.
pub const ROUTING: u8 = 30;
/// Table 40: ARP to a local pod (pods).
pub const ARP_TO_LOCAL: u8 = 40;
/// Table 50: ARP to a remote pod, over VXLAN (host subnets).
pub const ARP_TO_REMOTE: u8 = 50;
/// Table 60: IP to a service (services).
pub const TO_SERVICE: u8 = 60;
/// Table 70: IP to a local pod: its VNID and port loaded (pods).
pub const TO_LOCAL: u8 = 70;
/// Table 80: IP policy enforcement, owned by the policy mode.
pub const POLICY: u8 = 80;
/// Table 81: after ingress policy: commit and deliver (networkpolicy mode).
pub const POLICY_COMMIT: u8 = 81;
/// Table 82: a local pod's ingress judged by the AdminNetworkPolicies (table 80 jumps here
/// first, Pass comes back to 80).
pub const ADMIN_INGRESS: u8 = 82;
/// Table 83: a local pod's ingress judged by the BaselineAdminNetworkPolicy, for pods no
/// NetworkPolicy isolates for ingress.
pub const BASELINE_INGRESS: u8 = 83;
/// Table 90: IP to a remote pod, over VXLAN (host subnets).
pub const TO_REMOTE: u8 = 90;
/// Table 100: egress network policy (egress policies).
pub const EGRESS_POLICY: u8 = 100;
/// Table 110: outbound multicast filtering (local multicast).
pub const MULTICAST_OUT: u8 = 110;
/// Table 111: multicast from local pods to the other nodes (VXLAN multicast).
pub const MULTICAST_TO_VXLAN: u8 = 111;
/// Table 120: multicast to local pods (local multicast).
pub const MULTICAST_TO_LOCAL: u8 = 120;
/// Table 253: the rule-version note.
pub const VERSION_NOTE: u8 = 253;

/// Every table with its name, in order.
pub const TABLES: [(u8, &str); 23] = [
    (CLASSIFY, "classify"),
    (VXLAN_INGRESS, "VXLAN ingress"),
    (FROM_POD, "from pod"),
    (POLICY_CONNTRACK, "policy conntrack"),
    (ADMIN_EGRESS, "admin policy egress"),
    (BASELINE_EGRESS, "baseline policy egress"),
    (POLICY_AUDIT, "policy audit"),
    (FROM_SERVICE, "from service"),
    (ROUTING, "routing"),
    (ARP_TO_LOCAL, "ARP to local pod"),
    (ARP_TO_REMOTE, "ARP to remote pod"),
    (TO_SERVICE, "to service"),
    (TO_LOCAL, "to local pod"),
    (POLICY, "policy"),
    (POLICY_COMMIT, "policy commit"),
    (ADMIN_INGRESS, "admin policy ingress"),
    (BASELINE_INGRESS, "baseline policy ingress"),
    (TO_REMOTE, "to remote pod"),
    (EGRESS_POLICY, "egress policy"),
    (MULTICAST_OUT, "multicast out"),
    (MULTICAST_TO_VXLAN, "multicast to VXLAN"),
    (MULTICAST_TO_LOCAL, "multicast to local pods"),
    (VERSION_NOTE, "version note"),
];

/// The name of table `table`, if it is one of the layout's.
pub fn table_name(table: u8) -> Option<&'static str> {
    TABLES
        .iter()
        .find(|(t, _)| *t == table)
        .map(|(_, name)| *name)
}

/// The VXLAN port (the seed's `vxlan0`) and its OpenFlow number.
pub const VXLAN_PORT: &str = "vxlan0";
pub const VXLAN_OFPORT: u16 = 1;
/// The node's gateway port (the seed's `tun0`) and its OpenFlow number.
pub const TUN_PORT: &str = "tun0";
pub const TUN_OFPORT: u16 = 2;
/// The highest OpenFlow number a port of br0 can have (OpenFlow 1.0's OFPP_MAX, which bounds
/// OVSDB's `ofport_request` too); the numbers above it are reserved ports.
pub const MAX_OFPORT: u16 = 0xfeff;

/// reg0: the VNID a packet comes from (a pod's, or the tunnel id of VXLAN traffic).
pub const REG_SOURCE_VNID: Field = Field::Reg(0);
/// reg1: the VNID of the pod or service a packet goes to.
pub const REG_DESTINATION_VNID: Field = Field::Reg(1);
/// reg2: the OpenFlow port a packet leaves by (table 80's `output:NXM_NX_REG2[]`).
pub const REG_OUTPUT_PORT: Field = Field::Reg(2);
/// reg4: an audited rule's key (`sdn/audit.rs`), loaded by its verdict flow for table 24.
pub const REG_AUDIT_KEY: Field = Field::Reg(4);
/// reg3 bit 0: the AdminNetworkPolicies have judged this packet's egress (passed it on to
/// NetworkPolicy); bit 1: its ingress. Set only on the way back from tables 22 and 82.
pub const ADMIN_EGRESS_DONE: FieldRange = FieldRange {
    field: Field::Reg(3),
    ofs: 0,
    n_bits: 1,
};
pub const ADMIN_INGRESS_DONE: FieldRange = FieldRange {
    field: Field::Reg(3),
    ofs: 1,
    n_bits: 1,
};
/// NXM_NX_TUN_ID[0..31]: the VNID a VXLAN packet carries, in the tunnel id's low 32 bits.
pub const TUNNEL_VNID: FieldRange = FieldRange {
    field: Field::TunId,
    ofs: 0,
    n_bits: 32,
};
