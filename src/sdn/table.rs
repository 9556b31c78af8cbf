//! The desired flow table: every flow the node wants on the switch, keyed the way OpenFlow
//! identifies a flow — (table, priority, match) — so it compares exactly with a flow dump.
//!
//! Each flow is kept as the OFPT_FLOW_MOD that adds it, encoded by `ofnode_proto`: at 40,000
//! flows (10,000 pods) the encoded form takes a fraction of the typed one, and a flow the
//! switch reports, encoded the same way, compares byte for byte. The match is canonical (the
//! proto crate orders fields), so equal flows encode equally.
//!
//! Several owners may want the same flow (two host subnets on one host share its table 10
//! flow; every pod and service of a VNID wants its table 80 rule), so each flow counts its
//! owners and leaves the table with the last one. Changes happen inside a batch, which records
//! each touched flow's original entry: at the end the batch yields the minimal diff (deletes
//! of flows gone, adds of flows new or changed) or is rolled back exactly.

use foldhash::{HashMap, HashMapExt, HashSet, HashSetExt};
use std::hash::{Hash, Hasher};

use bytes::{Bytes, BytesMut};
use ofnode_proto::{
    text, DecodeError, EncodeError, FlowMod, FlowModCommand, FlowStats, Message,
    BUNDLE_ADD_OVERHEAD, MAX_BUNDLED_MESSAGE_LEN, OFPTT_ALL, OFP_HEADER_LEN,
};

use super::layout::VERSION_NOTE;

/// Where the identifying fields sit in an encoded OFPT_FLOW_MOD (`struct ofp_flow_mod`):
/// the 8-byte header, cookie and cookie mask, then the table id; the priority after the
/// command and two timeouts; the `ofp_match` (type, length, fields) after the fixed 40 bytes.
const TABLE_ID_AT: usize = OFP_HEADER_LEN + 16;
const PRIORITY_AT: usize = OFP_HEADER_LEN + 22;
const MATCH_AT: usize = OFP_HEADER_LEN + 40;
const MATCH_LEN_AT: usize = MATCH_AT + 2;

/// One flow: the encoded flow_mod that adds it. Equality and hashing look at the flow's
/// identity only (table, priority, match); [`Flow::same`] compares everything.
#[derive(Clone)]
pub struct Flow(Bytes);

/// A flow that does not encode, and why (with the flow, so that an error can name it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unencodable {
    pub flow: Box<FlowMod>,
    pub reason: EncodeError,
}

impl Unencodable {
    fn of(flow: FlowMod, reason: EncodeError) -> Unencodable {
        Unencodable {
            flow: Box::new(flow),
            reason,
        }
    }
}

impl Flow {
    /// The flow a flow_mod adds (its command is ignored), or why it cannot be sent: it does
    /// not encode as one message, or not inside the bundle add every flow of the node travels
    /// in. Never an empty or cut flow.
    pub fn from_flow_mod(fm: &FlowMod) -> Result<Flow, EncodeError> {
        let flow = Flow::encode(fm)?;
        let length = flow.0.len();
        if length > MAX_BUNDLED_MESSAGE_LEN {
            return Err(EncodeError::TooLong {
                what: "bundle add message",
                length: length + BUNDLE_ADD_OVERHEAD,
                max: usize::from(u16::MAX),
            });
        }
        Ok(flow)
    }

    /// The flow a flow_mod adds, of any length one message can have.
    fn encode(fm: &FlowMod) -> Result<Flow, EncodeError> {
        let message = Message::FlowMod(FlowMod {
            command: FlowModCommand::Add,
            cookie_mask: 0,
            ..fm.clone()
        });
        let mut out = BytesMut::with_capacity(128);
        message.try_encode(0, &mut out)?;
        // Exactly its size: a big table holds tens of thousands of these.
        Ok(Flow(Bytes::copy_from_slice(&out)))
    }

    /// A flow the switch reported, in the same form (too long to send in a bundle, it can
    /// still be deleted).
    pub fn from_stats(stats: &FlowStats) -> Result<Flow, Unencodable> {
        let fm = FlowMod {
            cookie: stats.cookie,
            table_id: stats.table_id,
            priority: stats.priority,
            idle_timeout: stats.idle_timeout,
            hard_timeout: stats.hard_timeout,
            flags: stats.flags,
            match_: stats.match_.clone(),
            instructions: stats.instructions.clone(),
            ..FlowMod::new(FlowModCommand::Add)
        };
        Flow::encode(&fm).map_err(|reason| Unencodable::of(fm, reason))
    }

    pub fn table(&self) -> u8 {
        self.0.get(TABLE_ID_AT).copied().unwrap_or(0)
    }

    pub fn priority(&self) -> u16 {
        match self.0.get(PRIORITY_AT..PRIORITY_AT + 2) {
            Some(&[hi, lo]) => u16::from_be_bytes([hi, lo]),
            _ => 0,
        }
    }

    /// The encoded `ofp_match` (without its padding).
    fn match_bytes(&self) -> &[u8] {
        let len = match self.0.get(MATCH_LEN_AT..MATCH_LEN_AT + 2) {
            Some(&[hi, lo]) => usize::from(u16::from_be_bytes([hi, lo])),
            _ => 0,
        };
        self.0.get(MATCH_AT..MATCH_AT + len).unwrap_or_default()
    }

    /// True when the two flows are identical in every respect (actions, cookie, timeouts).
    pub fn same(&self, other: &Flow) -> bool {
        self.0 == other.0
    }

    /// The flow_mod that adds (or replaces) this flow.
    pub fn to_add(&self) -> Result<FlowMod, DecodeError> {
        match Message::decode(&self.0)? {
            (_, Message::FlowMod(fm)) => Ok(fm),
            (_, other) => Err(DecodeError::BadValue {
                what: "stored flow message type",
                value: u64::from(other.msg_type()),
            }),
        }
    }

    /// The encoded flow_mod that adds this flow (shares its bytes).
    pub fn encoded(&self) -> Bytes {
        self.0.clone()
    }

    /// The flow_mod that deletes exactly this flow.
    pub fn to_delete_strict(&self) -> Result<FlowMod, DecodeError> {
        let fm = self.to_add()?;
        Ok(FlowMod {
            table_id: fm.table_id,
            priority: fm.priority,
            match_: fm.match_,
            ..FlowMod::new(FlowModCommand::DeleteStrict)
        })
    }

    /// The flow as a switch reports it once installed (for tests of what reads flows back).
    #[cfg(test)]
    pub fn as_stats(&self) -> FlowStats {
        let fm = self.to_add().expect("a stored flow decodes");
        FlowStats {
            table_id: fm.table_id,
            duration_sec: 0,
            duration_nsec: 0,
            priority: fm.priority,
            idle_timeout: fm.idle_timeout,
            hard_timeout: fm.hard_timeout,
            flags: fm.flags,
            cookie: fm.cookie,
            packet_count: 0,
            byte_count: 0,
            match_: fm.match_,
            instructions: fm.instructions,
        }
    }

    /// The flow in `ovs-ofctl` syntax, for logs and errors.
    pub fn describe(&self) -> String {
        self.to_add()
            .map(|fm| text::format_flow_mod(&fm))
            .unwrap_or_else(|e| format!("<undecodable flow: {e}>"))
    }
}

impl PartialEq for Flow {
    fn eq(&self, other: &Flow) -> bool {
        self.table() == other.table()
            && self.priority() == other.priority()
            && self.match_bytes() == other.match_bytes()
    }
}

impl Eq for Flow {}

impl Hash for Flow {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.table().hash(state);
        self.priority().hash(state);
        self.match_bytes().hash(state);
    }
}

impl std::fmt::Debug for Flow {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.describe())
    }
}

/// `fm` as a switch reports it once installed (for tests of what reads flows back).
#[cfg(test)]
pub fn installed(fm: &FlowMod) -> FlowStats {
    Flow::from_flow_mod(fm)
        .expect("a test flow encodes")
        .as_stats()
}

/// Parses one flow of the seed's text (tests write flows as the seed does).
#[cfg(test)]
pub fn parse_flow(flow: &str) -> Result<Flow, String> {
    let fm = text::parse_flow(flow, FlowModCommand::Add).map_err(|e| e.to_string())?;
    Flow::from_flow_mod(&fm).map_err(|e| e.to_string())
}

/// The largest `n` for which the flow `flow(n)` still fits in one bundle add message (whose
/// length is a u16), for a flow that grows by the same bytes with each step of `n` (one more
/// output port, one more VXLAN remote). The sizes come from the encoder itself; the error is
/// a flow that does not encode for another reason than its length.
pub fn max_repeats(flow: impl Fn(usize) -> FlowMod) -> Result<usize, Unencodable> {
    let size = |n: usize| {
        let fm = flow(n);
        match Flow::from_flow_mod(&fm) {
            Ok(flow) => Ok(flow.encoded().len()),
            // Already too long for a bundle add: no count fits.
            Err(EncodeError::TooLong { .. }) => Ok(usize::MAX),
            Err(reason) => Err(Unencodable::of(fm, reason)),
        }
    };
    let (one, two) = (size(1)?, size(2)?);
    let step = two.saturating_sub(one).max(1);
    Ok(match MAX_BUNDLED_MESSAGE_LEN.checked_sub(one) {
        Some(room) => 1 + room / step,
        None => 0,
    })
}

/// The flow_mod that deletes every flow of every table.
pub fn delete_all() -> FlowMod {
    FlowMod {
        table_id: OFPTT_ALL,
        ..FlowMod::new(FlowModCommand::Delete)
    }
}

/// The flow mods that take the switch from one table to another: strict deletes first, then
/// adds (never an add before a delete of the same flow: OVS bundles can miss such a delete).
#[derive(Debug, Default, PartialEq)]
pub struct Diff {
    pub deletes: Vec<Flow>,
    pub adds: Vec<Flow>,
}

impl Diff {
    pub fn is_empty(&self) -> bool {
        self.deletes.is_empty() && self.adds.is_empty()
    }

    pub fn len(&self) -> usize {
        self.deletes.len() + self.adds.len()
    }
}

/// The desired table.
#[derive(Debug, Default)]
pub struct FlowTable {
    /// Each flow with its number of owners.
    flows: HashMap<Flow, u32>,
    /// Original entries of the flows the open batch touched.
    touched: HashMap<Flow, Option<(Flow, u32)>>,
}

impl FlowTable {
    /// A table of these flows (each counted once per occurrence), outside any batch.
    pub fn from_flows(flows: impl IntoIterator<Item = Flow>) -> FlowTable {
        let mut table = FlowTable::default();
        for flow in flows {
            table.add_owner(flow);
        }
        table
    }

    pub fn len(&self) -> usize {
        self.flows.len()
    }

    pub fn is_empty(&self) -> bool {
        self.flows.is_empty()
    }

    /// The stored flow with `flow`'s identity.
    pub fn get(&self, flow: &Flow) -> Option<&Flow> {
        self.flows.get_key_value(flow).map(|(k, _)| k)
    }

    pub fn iter(&self) -> impl Iterator<Item = &Flow> {
        self.flows.keys()
    }

    fn remember(&mut self, flow: &Flow) {
        if !self.touched.contains_key(flow) {
            let original = self
                .flows
                .get_key_value(flow)
                .map(|(stored, owners)| (stored.clone(), *owners));
            self.touched.insert(flow.clone(), original);
        }
    }

    fn add_owner(&mut self, flow: Flow) {
        match self.flows.remove_entry(&flow) {
            Some((stored, owners)) => {
                // A different body for a flow that already has owners replaces it (as an
                // OpenFlow add would): the most recent request wins.
                let kept = if stored.same(&flow) { stored } else { flow };
                self.flows.insert(kept, owners + 1);
            }
            None => {
                self.flows.insert(flow, 1);
            }
        }
    }

    /// Adds one owner of a flow.
    pub fn insert(&mut self, flow: Flow) {
        self.remember(&flow);
        self.add_owner(flow);
    }

    /// Removes one owner of a flow; the flow goes with its last owner.
    pub fn remove(&mut self, flow: &Flow) {
        self.remember(flow);
        if let Some(owners) = self.flows.get_mut(flow) {
            *owners -= 1;
            if *owners == 0 {
                self.flows.remove(flow);
            }
        }
    }

    /// What the switch must do to follow the open batch.
    pub fn diff(&self) -> Diff {
        let mut diff = Diff::default();
        for (key, original) in &self.touched {
            let before = original.as_ref().map(|(flow, _)| flow);
            let now = self.get(key);
            match (before, now) {
                (Some(before), None) => diff.deletes.push(before.clone()),
                (None, Some(now)) => diff.adds.push(now.clone()),
                (Some(before), Some(now)) if !before.same(now) => diff.adds.push(now.clone()),
                _ => {}
            }
        }
        order_adds(&mut diff.adds);
        diff
    }

    /// Ends the batch, keeping its changes.
    pub fn commit_batch(&mut self) {
        self.touched = HashMap::new();
    }

    /// Ends the batch by restoring every flow it touched.
    pub fn rollback(&mut self) {
        for (key, original) in std::mem::take(&mut self.touched) {
            self.flows.remove(&key);
            if let Some((flow, owners)) = original {
                self.flows.insert(flow, owners);
            }
        }
    }

    /// Every flow, the version note last (so a half-applied install never looks set up).
    pub fn all_flows(&self) -> Vec<&Flow> {
        let mut flows: Vec<&Flow> = self.flows.keys().collect();
        flows.sort_by_key(|f| order_key(f));
        flows
    }

    /// What to change on a switch that holds `current` so that it holds this table.
    pub fn reconcile(&self, current: &[FlowStats]) -> Result<Diff, Unencodable> {
        let mut diff = Diff::default();
        let mut seen: HashSet<&Flow> = HashSet::with_capacity(current.len());
        for stats in current {
            let flow = Flow::from_stats(stats)?;
            match self.flows.get_key_value(&flow) {
                Some((wanted, _)) => {
                    seen.insert(wanted);
                    if !wanted.same(&flow) {
                        diff.adds.push(wanted.clone());
                    }
                }
                None => diff.deletes.push(flow),
            }
        }
        diff.adds
            .extend(self.flows.keys().filter(|f| !seen.contains(f)).cloned());
        order_adds(&mut diff.adds);
        Ok(diff)
    }
}

/// Table, then priority from high to low, with the version table last.
fn order_key(flow: &Flow) -> (bool, u8, u16) {
    let table = flow.table();
    (table == VERSION_NOTE, table, u16::MAX - flow.priority())
}

fn order_adds(adds: &mut [Flow]) {
    adds.sort_by_key(order_key);
}

#[cfg(test)]
mod tests {
    use std::net::Ipv4Addr;

    use super::*;
    use crate::sdn::flowmod::table;
    use ofnode_proto::{BundleAdd, BundleFlags, Field};

    fn take(table: &mut FlowTable) -> Diff {
        let diff = table.diff();
        table.commit_batch();
        diff
    }

    fn flow(text: &str) -> Flow {
        parse_flow(text).unwrap()
    }

    #[test]
    fn identity_is_table_priority_match() {
        let fm = text::parse_flow(
            "table=70, priority=100, ip, nw_dst=10.128.0.5, actions=load:10->NXM_NX_REG1[], load:3->NXM_NX_REG2[], goto_table:80",
            FlowModCommand::Add,
        )
        .unwrap();
        let f = Flow::from_flow_mod(&fm).unwrap();
        assert_eq!((f.table(), f.priority()), (70, 100));
        assert_eq!(f.to_add().unwrap(), fm);
        let other_actions = flow("table=70, priority=100, ip, nw_dst=10.128.0.5, actions=drop");
        assert_eq!(f, other_actions);
        assert!(!f.same(&other_actions));
        assert_ne!(
            f,
            flow("table=70, priority=101, ip, nw_dst=10.128.0.5, actions=drop")
        );
        assert_ne!(
            f,
            flow("table=70, priority=100, ip, nw_dst=10.128.0.6, actions=drop")
        );
        let delete = f.to_delete_strict().unwrap();
        assert_eq!(delete.command, FlowModCommand::DeleteStrict);
        assert_eq!((delete.table_id, delete.priority), (70, 100));
        assert_eq!(delete.match_, fm.match_);
        assert!(delete.instructions.is_empty());
    }

    #[test]
    fn shared_flows_leave_with_their_last_owner() {
        let mut table = FlowTable::default();
        let f = flow("table=10, priority=100, tun_src=192.0.2.2, actions=goto_table:30");
        table.insert(f.clone());
        table.insert(f.clone());
        let diff = take(&mut table);
        assert_eq!((diff.deletes.len(), diff.adds.len()), (0, 1));
        table.remove(&f);
        assert!(take(&mut table).is_empty());
        table.remove(&f);
        let diff = take(&mut table);
        assert_eq!(diff.deletes, vec![f]);
        assert!(table.is_empty());
    }

    #[test]
    fn rollback_restores_exactly() {
        let mut table = FlowTable::default();
        let f1 = flow("table=40, priority=100, arp, nw_dst=10.128.0.5, actions=output:3");
        table.insert(f1.clone());
        take(&mut table);
        let f2 = flow("table=40, priority=100, arp, nw_dst=10.128.0.6, actions=output:4");
        table.remove(&f1);
        table.insert(f2);
        table.rollback();
        assert_eq!(table.len(), 1);
        assert!(table.get(&f1).is_some_and(|f| f.same(&f1)));
    }

    #[test]
    fn a_changed_body_is_one_add() {
        let mut table = FlowTable::default();
        let old = flow("table=111, priority=100, actions=goto_table:120");
        table.insert(old.clone());
        take(&mut table);
        let new = flow("table=111, priority=100, actions=move:NXM_NX_REG0[]->NXM_NX_TUN_ID[0..31],set_field:192.0.2.2->tun_dst,output:1,goto_table:120");
        table.remove(&old);
        table.insert(new.clone());
        let diff = take(&mut table);
        assert!(diff.deletes.is_empty());
        assert_eq!(diff.adds.len(), 1);
        assert!(diff.adds[0].same(&new));
    }

    #[test]
    fn max_repeats_is_the_last_count_whose_bundle_add_fits_a_u16_length() {
        use crate::sdn::flowmod::Actions;
        let flow = |n: usize| {
            let flow = table(120).priority(100).reg(Field::Reg(0), 0xff_ffffu32);
            (0..n)
                .fold(flow.into_actions(), |f, _| f.output(65279))
                .build()
        };
        let max = max_repeats(flow).unwrap();
        let bundle_add_len = |n: usize| {
            let fm = Message::FlowMod(flow(n));
            let mut out = BytesMut::new();
            match BundleAdd::encode_borrowed(1, BundleFlags::ATOMIC, &fm, 7, &mut out) {
                Ok(()) => out.len(),
                Err(_) => usize::MAX,
            }
        };
        assert!(bundle_add_len(max) <= usize::from(u16::MAX), "{max}");
        assert!(bundle_add_len(max + 1) > usize::from(u16::MAX), "{max}");
        assert!((4000..4100).contains(&max), "{max}");
        // Too long at once: no count fits; a flow that cannot be sent at all: its error.
        assert_eq!(max_repeats(|n| flow(n + 5000)), Ok(0));
        let clause_zero = |_| table(120).conjunction(1, 0, 2).build();
        let refused = max_repeats(clause_zero).unwrap_err();
        assert_eq!(*refused.flow, clause_zero(1));
        assert!(matches!(refused.reason, EncodeError::BadConjunction { .. }));
    }

    /// A clause flow of 5,000 rules (`conjunction` actions of 16 bytes each) is ~80 KB: more
    /// than an OpenFlow length can say. It is refused with the reason, never held as an empty
    /// flow (which is what the encoder's dropped error used to make of it).
    #[test]
    fn a_flow_longer_than_one_message_is_refused_never_held_empty() {
        use crate::sdn::flowmod::Actions;
        let clause = (1..=5000u32).fold(
            table(80)
                .priority(200)
                .ip()
                .nw_src(Ipv4Addr::new(10, 128, 0, 5))
                .into_actions(),
            |flow, id| flow.conjunction(id, 1, 2),
        );
        let refused = Flow::from_flow_mod(&clause.build());
        assert!(
            matches!(refused, Err(EncodeError::TooLong { length, max: 65_535, .. }) if length > 80_000),
            "{refused:?}"
        );
    }

    /// Every flow of the node travels in a bundle add, 24 bytes longer than the flow mod: one
    /// that fits a message but not a bundle add is refused too. The switch may hold one (an
    /// `ovs-ofctl add-flow` outside a bundle): it is read back, to be deleted.
    #[test]
    fn a_flow_that_fits_a_message_but_no_bundle_add_is_refused_but_read_back() {
        use crate::sdn::flowmod::Actions;
        // 8 header + 40 fixed + 8 empty match + 8 apply-actions header, then outputs of 16.
        let flow = |outputs: usize| {
            (0..outputs)
                .fold(table(0).into_actions(), |flow, _| flow.output(1))
                .build()
        };
        let fits = flow((MAX_BUNDLED_MESSAGE_LEN - 64) / 16);
        assert!(Flow::from_flow_mod(&fits).is_ok());
        let too_long = flow((MAX_BUNDLED_MESSAGE_LEN - 64) / 16 + 1);
        let length = Flow::encode(&too_long).unwrap().encoded().len();
        assert!(length > MAX_BUNDLED_MESSAGE_LEN && length <= usize::from(u16::MAX));
        assert_eq!(
            Flow::from_flow_mod(&too_long),
            Err(EncodeError::TooLong {
                what: "bundle add message",
                length: length + BUNDLE_ADD_OVERHEAD,
                max: 65_535,
            })
        );
        let stats = Flow::encode(&too_long).unwrap().as_stats();
        assert_eq!(
            Flow::from_stats(&stats).map(|f| f.encoded().len()),
            Ok(length)
        );
    }

    #[test]
    fn version_note_is_added_last() {
        let mut table = FlowTable::default();
        for text in [
            "table=253, actions=note:00.03",
            "table=0, priority=0, actions=drop",
            "table=120, priority=0, actions=drop",
        ] {
            table.insert(flow(text));
        }
        let tables: Vec<u8> = take(&mut table).adds.iter().map(Flow::table).collect();
        assert_eq!(tables, vec![0, 120, 253]);
        let tables: Vec<u8> = table.all_flows().iter().map(|f| f.table()).collect();
        assert_eq!(tables, vec![0, 120, 253]);
    }
}
