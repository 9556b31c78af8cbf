//! Typed flows: `ofnode_proto::FlowMod` values built in the words the node's flows are written
//! in — the seed's `ovs-ofctl` vocabulary (`table=`, `priority=`, `ip`, `nw_dst=`, `load:`,
//! `goto_table:` …) as methods that take values (a VNID, an address, a network, a port), never
//! text that is formatted and then parsed again.
//!
//! Each word builds exactly what `ofnode_proto::parse_flow` builds for it, prerequisites
//! included (`tcp` is eth_type and ip_proto; `nw_src` in an ARP flow is arp_spa), so a typed
//! flow and the seed's line are one value (flows.rs's tests compare every producer with the
//! seed's text). As in the text, the protocol comes before the fields that need it, and the
//! actions after the match:
//!
//! ```text
//! table=30, priority=300, ip, nw_dst=10.128.0.1, actions=output:2
//! table(ROUTING).priority(300).ip().nw_dst(gateway).output(TUN_OFPORT).build()
//! ```
//!
//! A flow without actions drops (`.drop()`); `goto(table)` ends a flow with `goto_table:`.

use std::net::Ipv4Addr;

use ofnode_proto::{
    Action, Conjunction, Ct, CtZone, Field, FieldRange, FlowMod, FlowModCommand, Instruction,
    Match, Resubmit, NX_CT_F_COMMIT, OFPCML_NO_BUFFER, OFPP_IN_PORT,
};

use crate::value::{Cidr, MacAddr, Vnid};

/// ct_state flags, as `ct_state=+trk+new` names them (OVS's CS_* bits).
pub const CT_NEW: u8 = 0x01;
pub const CT_EST: u8 = 0x02;
pub const CT_REL: u8 = 0x04;
pub const CT_RPL: u8 = 0x08;
pub const CT_INV: u8 = 0x10;
pub const CT_TRK: u8 = 0x20;

/// eth_type and ip_proto of the protocol words.
const ETH_IP: u64 = 0x0800;
const ETH_ARP: u64 = 0x0806;

/// `ip_frag=later`: a fragment (bit 0) that is not the first (bit 1), both bits matched.
const FRAG_LATER: u64 = 0b11;

/// A transport protocol word: `tcp`, `udp`, `sctp` (IPv4 with that ip_proto).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    Tcp,
    Udp,
    Sctp,
}

impl Transport {
    fn ip_proto(self) -> u64 {
        match self {
            Transport::Tcp => 6,
            Transport::Udp => 17,
            Transport::Sctp => 132,
        }
    }
}

/// A value that goes into a field: its bits, as the field holds them.
pub trait FieldValue {
    fn bits(self) -> u64;
}

impl FieldValue for u8 {
    fn bits(self) -> u64 {
        u64::from(self)
    }
}

impl FieldValue for u16 {
    fn bits(self) -> u64 {
        u64::from(self)
    }
}

impl FieldValue for u32 {
    fn bits(self) -> u64 {
        u64::from(self)
    }
}

impl FieldValue for u64 {
    fn bits(self) -> u64 {
        self
    }
}

impl FieldValue for Vnid {
    fn bits(self) -> u64 {
        u64::from(self.get())
    }
}

impl FieldValue for Ipv4Addr {
    fn bits(self) -> u64 {
        u64::from(u32::from(self))
    }
}

impl FieldValue for MacAddr {
    fn bits(self) -> u64 {
        self.octets()
            .iter()
            .fold(0, |bits, octet| (bits << 8) | u64::from(*octet))
    }
}

/// What `nw_src=`/`nw_dst=` take: an address (exact) or a network (its prefix).
pub trait Ipv4Prefix {
    /// The network address and prefix length.
    fn network_and_length(self) -> (Ipv4Addr, u8);
}

impl Ipv4Prefix for Ipv4Addr {
    fn network_and_length(self) -> (Ipv4Addr, u8) {
        (self, 32)
    }
}

impl Ipv4Prefix for Cidr {
    fn network_and_length(self) -> (Ipv4Addr, u8) {
        (self.network(), self.prefix())
    }
}

/// A flow of `table` (`table=N`), at ovs-ofctl's default priority until [`FlowBuilder::priority`].
pub fn table(table: u8) -> FlowBuilder {
    FlowBuilder {
        fm: FlowMod {
            table_id: table,
            ..FlowMod::new(FlowModCommand::Add)
        },
    }
}

/// A flow's table, priority, cookie and match; the actions follow ([`Actions`]).
#[derive(Debug, Clone)]
pub struct FlowBuilder {
    fm: FlowMod,
}

/// A flow with its actions so far.
#[derive(Debug, Clone)]
pub struct FlowActions {
    fm: FlowMod,
    actions: Vec<Action>,
}

impl FlowBuilder {
    /// `priority=N`.
    pub fn priority(mut self, priority: u16) -> Self {
        self.fm.priority = priority;
        self
    }

    /// `cookie=N`.
    pub fn cookie(mut self, cookie: u64) -> Self {
        self.fm.cookie = cookie;
        self
    }

    /// `ip`.
    pub fn ip(self) -> Self {
        self.field(Field::EthType, ETH_IP)
    }

    /// `arp`.
    pub fn arp(self) -> Self {
        self.field(Field::EthType, ETH_ARP)
    }

    /// `tcp`, `udp` or `sctp`.
    pub fn transport(self, transport: Transport) -> Self {
        self.ip().field(Field::IpProto, transport.ip_proto())
    }

    /// `tcp`.
    pub fn tcp(self) -> Self {
        self.transport(Transport::Tcp)
    }

    /// `udp`.
    pub fn udp(self) -> Self {
        self.transport(Transport::Udp)
    }

    /// `sctp`.
    pub fn sctp(self) -> Self {
        self.transport(Transport::Sctp)
    }

    /// `in_port=N`.
    pub fn in_port(self, port: u16) -> Self {
        self.field(Field::InPort, port)
    }

    /// `nw_src=A` or `nw_src=N/P` (arp_spa in an ARP flow).
    pub fn nw_src(self, net: impl Ipv4Prefix) -> Self {
        self.ipv4(Field::Ipv4Src, net)
    }

    /// `nw_dst=A` or `nw_dst=N/P` (arp_tpa in an ARP flow).
    pub fn nw_dst(self, net: impl Ipv4Prefix) -> Self {
        self.ipv4(Field::Ipv4Dst, net)
    }

    /// `tcp_dst=N` (`udp_dst`, `sctp_dst`: the destination port of the flow's transport).
    pub fn tp_dst(self, port: u16) -> Self {
        self.field(Field::TcpDst, port)
    }

    /// `tcp_dst=0xV/0xM` (`udp_dst`, `sctp_dst`): the ports whose masked bits equal `value`'s.
    pub fn tp_dst_masked(self, value: u16, mask: u16) -> Self {
        self.field_masked(Field::TcpDst, value.bits(), mask.bits())
    }

    /// `ip_frag=later`: fragments other than the first (which carry no transport header).
    pub fn later_fragments(self) -> Self {
        self.field_masked(Field::IpFrag, FRAG_LATER, FRAG_LATER)
    }

    /// `ct_state=+a+b-c`: the flags of `plus` set, those of `minus` clear (`CT_*`).
    pub fn ct_state(self, plus: u8, minus: u8) -> Self {
        self.field_masked(Field::CtState, plus.bits(), (plus | minus).bits())
    }

    /// `regN=V`.
    pub fn reg(self, reg: Field, value: impl FieldValue) -> Self {
        self.field(reg, value)
    }

    /// `tun_src=A`.
    pub fn tun_src(self, ip: Ipv4Addr) -> Self {
        self.field(Field::TunSrc, ip)
    }

    /// `arp_sha=M`.
    pub fn arp_sha(self, mac: MacAddr) -> Self {
        self.field(Field::ArpSha, mac)
    }

    /// `conj_id=N`.
    pub fn conj_id(self, id: u32) -> Self {
        self.field(Field::ConjId, id)
    }

    /// `FIELD=V`, exactly.
    pub fn field(self, field: Field, value: impl FieldValue) -> Self {
        self.field_masked(field, value.bits(), u64::MAX)
    }

    /// `FIELD=V/M`. A field the flow's packet type stores elsewhere is that field, as the
    /// parser reads it (`nw_src` in an ARP flow is arp_spa; `tcp_dst` in a UDP flow udp_dst).
    pub fn field_masked(mut self, field: Field, value: u64, mask: u64) -> Self {
        let field = resolve(&self.fm.match_, field);
        self.fm.match_.set_masked(field, value, mask);
        self
    }

    fn ipv4(self, field: Field, net: impl Ipv4Prefix) -> Self {
        let (addr, len) = net.network_and_length();
        let mask = u32::MAX
            .checked_shl(32 - u32::from(len.min(32)))
            .unwrap_or(0);
        self.field_masked(field, addr.bits(), mask.bits())
    }

    /// `actions=drop`: the flow has no actions.
    pub fn drop(self) -> FlowMod {
        self.fm
    }
}

/// The field sharing `field`'s flow slot that the match's packet type has (itself when its
/// prerequisite is met or no sibling's is), as `ofnode_proto`'s parser resolves a field name.
fn resolve(m: &Match, field: Field) -> Field {
    let met = |f: Field| f.info().prereq.is_met(m);
    if met(field) {
        return field;
    }
    field
        .shared_slot()
        .and_then(|(siblings, _)| siblings.iter().copied().find(|f| met(*f)))
        .unwrap_or(field)
}

impl FlowActions {
    /// The flow, its actions applied in order.
    pub fn build(self) -> FlowMod {
        self.finish(None)
    }

    fn finish(self, goto: Option<u8>) -> FlowMod {
        let mut instructions = Vec::with_capacity(2);
        if !self.actions.is_empty() {
            instructions.push(Instruction::ApplyActions(self.actions));
        }
        instructions.extend(goto.map(Instruction::GotoTable));
        FlowMod {
            instructions,
            ..self.fm
        }
    }
}

/// The action words, after the match (`actions=...`); the first turns a [`FlowBuilder`] into
/// [`FlowActions`].
pub trait Actions: Sized {
    /// The flow and its actions so far.
    fn into_actions(self) -> FlowActions;

    /// Any action, appended.
    fn action(self, action: Action) -> FlowActions {
        let mut flow = self.into_actions();
        flow.actions.push(action);
        flow
    }

    /// `goto_table:N`, the last instruction: the flow.
    fn goto(self, table: u8) -> FlowMod {
        self.into_actions().finish(Some(table))
    }

    /// `output:N`.
    fn output(self, port: u16) -> FlowActions {
        self.action(Action::output(u32::from(port)))
    }

    /// `output:NXM_NX_REGn[]`: to the port the register holds (NXAST_OUTPUT_REG).
    fn output_reg(self, reg: Field) -> FlowActions {
        self.action(Action::OutputReg {
            src: FieldRange::whole(reg),
            max_len: OFPCML_NO_BUFFER,
        })
    }

    /// `load:V->FIELD[]` (NXAST_REG_LOAD, which OVS prints as `load:`).
    fn load(self, field: Field, value: impl FieldValue) -> FlowActions {
        self.load_bits(FieldRange::whole(field), value)
    }

    /// `load:V->FIELD[a..b]`.
    fn load_bits(self, dst: FieldRange, value: impl FieldValue) -> FlowActions {
        self.action(Action::RegLoad {
            dst,
            value: value.bits(),
        })
    }

    /// `move:SRC[..]->DST[..]` (NXAST_REG_MOVE).
    fn move_bits(self, src: FieldRange, dst: FieldRange) -> FlowActions {
        self.action(Action::RegMove { src, dst })
    }

    /// `set_field:V->FIELD` (OFPAT_SET_FIELD).
    fn set_field(self, field: Field, value: impl FieldValue) -> FlowActions {
        self.action(Action::SetField {
            field,
            value: u128::from(value.bits()),
        })
    }

    /// `note:XX.XX...`.
    fn note(self, bytes: &[u8]) -> FlowActions {
        self.action(Action::note(bytes))
    }

    /// `ct(commit,zone=Z)`.
    fn ct_commit(self, zone: u16) -> FlowActions {
        self.action(Action::Ct(Ct {
            flags: NX_CT_F_COMMIT,
            zone: CtZone::Imm(zone),
            ..Ct::default()
        }))
    }

    /// `ct(zone=Z,table=T)`: track the packet, and continue it in table T with its ct_state.
    fn ct_track(self, zone: u16, table: u8) -> FlowActions {
        self.action(Action::Ct(Ct {
            zone: CtZone::Imm(zone),
            table: Some(table),
            ..Ct::default()
        }))
    }

    /// `resubmit(,T)`: look the packet up in table T, then carry on here.
    fn resubmit(self, table: u8) -> FlowActions {
        self.action(Action::Resubmit(Resubmit {
            in_port: OFPP_IN_PORT,
            table: Some(table),
            ct: false,
            legacy: false,
        }))
    }

    /// `conjunction(id,k/n)`: this flow is clause `clause` of the `n_clauses` of conjunction `id`.
    fn conjunction(self, id: u32, clause: u8, n_clauses: u8) -> FlowActions {
        self.action(Action::Conjunction(Conjunction {
            id,
            clause,
            n_clauses,
        }))
    }
}

impl Actions for FlowBuilder {
    fn into_actions(self) -> FlowActions {
        FlowActions {
            fm: self.fm,
            actions: Vec::new(),
        }
    }
}

impl Actions for FlowActions {
    fn into_actions(self) -> FlowActions {
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ofnode_proto::{format_flow_mod, parse_flow, CT_STATE_FLAGS};

    /// Each word next to the text that means it: one value, printed alike.
    #[test]
    fn every_word_builds_what_the_parser_builds_for_it() {
        let ip = Ipv4Addr::new(10, 128, 0, 5);
        let net: Cidr = "10.128.0.0/14".parse().unwrap();
        let mac: MacAddr = "0a:58:0a:80:00:05".parse().unwrap();
        let vnid = Vnid::new(0x00ab_cdef).unwrap();
        let tun_vnid = FieldRange::bits(Field::TunId, 0, 31);
        let cases: Vec<(FlowMod, &str)> = vec![
            (table(0).drop(), "table=0, actions=drop"),
            (
                table(7).priority(9).cookie(3).drop(),
                "table=7, priority=9, cookie=3, actions=drop",
            ),
            (table(0).ip().drop(), "ip, actions=drop"),
            (table(0).arp().drop(), "arp, actions=drop"),
            (table(0).tcp().tp_dst(80).drop(), "tcp, tcp_dst=80, actions=drop"),
            (table(0).udp().tp_dst(53).drop(), "udp, udp_dst=53, actions=drop"),
            (table(0).sctp().tp_dst(9).drop(), "sctp, sctp_dst=9, actions=drop"),
            (
                table(0).tcp().tp_dst_masked(0x50, 0xfff0).drop(),
                "tcp, tcp_dst=0x50/0xfff0, actions=drop",
            ),
            (
                table(0).sctp().tp_dst_masked(0x50, 0xfffc).drop(),
                "sctp, sctp_dst=0x50/0xfffc, actions=drop",
            ),
            (
                table(0).ip().later_fragments().drop(),
                "ip, ip_frag=later, actions=drop",
            ),
            (
                table(0).ip().ct_state(CT_TRK | CT_NEW, 0).drop(),
                "ip, ct_state=+trk+new, actions=drop",
            ),
            (
                table(0).ip().ct_state(0, CT_TRK).drop(),
                "ip, ct_state=-trk, actions=drop",
            ),
            (
                table(0).ip().ct_state(CT_TRK | CT_EST, CT_INV | CT_RPL).drop(),
                "ip, ct_state=+trk+est-inv-rpl, actions=drop",
            ),
            (
                table(0).ip().ct_state(CT_TRK | CT_REL, 0).drop(),
                "ip, ct_state=+trk+rel, actions=drop",
            ),
            (table(0).in_port(3).drop(), "in_port=3, actions=drop"),
            (table(0).ip().nw_src(ip).drop(), "ip, nw_src=10.128.0.5, actions=drop"),
            (
                table(0).ip().nw_dst(net).drop(),
                "ip, nw_dst=10.128.0.0/14, actions=drop",
            ),
            (
                table(0).ip().nw_dst(Cidr::host(ip)).drop(),
                "ip, nw_dst=10.128.0.5/32, actions=drop",
            ),
            (
                table(0).ip().nw_dst(Cidr::ANY).drop(),
                "ip, nw_dst=0.0.0.0/0, actions=drop",
            ),
            (
                table(0).arp().nw_src(ip).nw_dst(net).drop(),
                "arp, nw_src=10.128.0.5, nw_dst=10.128.0.0/14, actions=drop",
            ),
            (
                table(0).arp().arp_sha(mac).drop(),
                "arp, arp_sha=0a:58:0a:80:00:05, actions=drop",
            ),
            (
                table(0).reg(Field::Reg(0), vnid).reg(Field::Reg(1), 0u32).drop(),
                "reg0=11259375, reg1=0, actions=drop",
            ),
            (table(0).tun_src(ip).drop(), "tun_src=10.128.0.5, actions=drop"),
            (table(0).conj_id(7).ip().drop(), "conj_id=7, ip, actions=drop"),
            (table(0).goto(30), "actions=goto_table:30"),
            (table(0).output(2).build(), "actions=output:2"),
            (
                table(0).output_reg(Field::Reg(2)).build(),
                "actions=output:NXM_NX_REG2[]",
            ),
            (
                table(0).load(Field::Reg(0), vnid).load(Field::Reg(2), 3u16).build(),
                "actions=load:11259375->NXM_NX_REG0[], load:3->NXM_NX_REG2[]",
            ),
            (
                table(0).load_bits(tun_vnid, vnid).build(),
                "actions=load:11259375->NXM_NX_TUN_ID[0..31]",
            ),
            (
                table(0)
                    .move_bits(tun_vnid, FieldRange::whole(Field::Reg(0)))
                    .goto(10),
                "actions=move:NXM_NX_TUN_ID[0..31]->NXM_NX_REG0[],goto_table:10",
            ),
            (
                table(0).set_field(Field::TunDst, ip).output(1).build(),
                "actions=set_field:10.128.0.5->tun_dst,output:1",
            ),
            (
                table(0).note(&[0x01, 0x03]).build(),
                "actions=note:01.03",
            ),
            (
                table(0).note(&[0xab; 32]).goto(21),
                "actions=note:ab.ab.ab.ab.ab.ab.ab.ab.ab.ab.ab.ab.ab.ab.ab.ab.ab.ab.ab.ab.ab.ab.ab.ab.ab.ab.ab.ab.ab.ab.ab.ab, goto_table:21",
            ),
            (
                table(0).ip().ct_commit(13877).output(2).build(),
                "ip, actions=ct(commit,zone=13877),output:2",
            ),
            (
                table(0).ip().ct_track(13877, 0).build(),
                "ip, actions=ct(zone=13877,table=0)",
            ),
            (
                table(0).load(Field::Reg(0), 5u32).resubmit(21).build(),
                "actions=load:5->NXM_NX_REG0[], resubmit(,21)",
            ),
            (
                table(0)
                    .conjunction(1, 1, 2)
                    .conjunction(4_000_000_000, 3, 3)
                    .build(),
                "actions=conjunction(1,1/2),conjunction(4000000000,3/3)",
            ),
        ];
        for (typed, text) in cases {
            let parsed = parse_flow(text, FlowModCommand::Add).unwrap();
            assert_eq!(typed, parsed, "{text}");
            assert_eq!(format_flow_mod(&typed), format_flow_mod(&parsed), "{text}");
        }
    }

    #[test]
    fn ct_state_flags_are_ovs_bits() {
        let ours = [
            (CT_NEW, "new"),
            (CT_EST, "est"),
            (CT_REL, "rel"),
            (CT_RPL, "rpl"),
            (CT_INV, "inv"),
            (CT_TRK, "trk"),
        ];
        for (bit, name) in ours {
            assert!(CT_STATE_FLAGS.contains(&(u128::from(bit), name)), "{name}");
        }
    }
}
