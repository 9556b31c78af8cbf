//! The desired flow table: every flow the node wants on the switch, keyed the way OpenFlow
//! identifies a flow — (table, priority, match) — so it compares exactly with a flow dump.
//!
//! Several owners may want the same flow (two host subnets on one host share its table 10
//! flow; every pod and service of a VNID wants its table 80 rule), so each flow counts its
//! owners and leaves the table with the last one. Changes happen inside a batch, which records
//! each touched flow's original entry: at the end the batch yields the minimal diff (deletes
//! of flows gone, adds of flows new or changed) or is rolled back exactly.

use std::collections::{HashMap, HashSet};

use ofnode_proto::{text, FlowMod, FlowModCommand, FlowStats, Instruction, Match, OFPTT_ALL};

use super::flows::VERSION_TABLE;

/// What identifies a flow in an OpenFlow table.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct FlowKey {
    pub table: u8,
    pub priority: u16,
    pub match_: Match,
}

/// What a flow does (and its cookie, which OVS reports back).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlowBody {
    pub cookie: u64,
    pub instructions: Vec<Instruction>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Entry {
    body: FlowBody,
    owners: u32,
}

/// The flow mods that take the switch from one table to another: strict deletes first, then
/// adds (never an add before a delete of the same flow: OVS bundles can miss such a delete).
#[derive(Debug, Default)]
pub struct Diff {
    pub deletes: Vec<FlowKey>,
    pub adds: Vec<(FlowKey, FlowBody)>,
}

impl Diff {
    pub fn is_empty(&self) -> bool {
        self.deletes.is_empty() && self.adds.is_empty()
    }

    pub fn len(&self) -> usize {
        self.deletes.len() + self.adds.len()
    }

    /// The flow mods in bundle order.
    pub fn flow_mods(&self) -> Vec<FlowMod> {
        let deletes = self.deletes.iter().map(delete_strict);
        let adds = self.adds.iter().map(|(key, body)| add(key, body));
        deletes.chain(adds).collect()
    }
}

/// Parses one flow of the seed's text into its key and body.
pub fn parse_flow(flow: &str) -> Result<(FlowKey, FlowBody), text::ParseError> {
    let fm = text::parse_flow(flow, FlowModCommand::Add)?;
    Ok(split(fm))
}

fn split(fm: FlowMod) -> (FlowKey, FlowBody) {
    let key = FlowKey {
        table: fm.table_id,
        priority: fm.priority,
        match_: fm.match_,
    };
    let body = FlowBody {
        cookie: fm.cookie,
        instructions: fm.instructions,
    };
    (key, body)
}

/// The flow_mod that adds (or replaces) a flow.
pub fn add(key: &FlowKey, body: &FlowBody) -> FlowMod {
    FlowMod {
        cookie: body.cookie,
        table_id: key.table,
        priority: key.priority,
        match_: key.match_.clone(),
        instructions: body.instructions.clone(),
        ..FlowMod::new(FlowModCommand::Add)
    }
}

/// The flow_mod that deletes exactly this flow.
pub fn delete_strict(key: &FlowKey) -> FlowMod {
    FlowMod {
        table_id: key.table,
        priority: key.priority,
        match_: key.match_.clone(),
        ..FlowMod::new(FlowModCommand::DeleteStrict)
    }
}

/// The flow_mod that deletes every flow of every table.
pub fn delete_all() -> FlowMod {
    FlowMod {
        table_id: OFPTT_ALL,
        ..FlowMod::new(FlowModCommand::Delete)
    }
}

/// Key and body of a flow the switch reported.
pub fn from_stats(stats: &FlowStats) -> (FlowKey, FlowBody) {
    let key = FlowKey {
        table: stats.table_id,
        priority: stats.priority,
        match_: stats.match_.clone(),
    };
    let body = FlowBody {
        cookie: stats.cookie,
        instructions: stats.instructions.clone(),
    };
    (key, body)
}

/// The desired table.
#[derive(Debug, Default)]
pub struct FlowTable {
    flows: HashMap<FlowKey, Entry>,
    /// Original entries of the flows the open batch touched.
    touched: HashMap<FlowKey, Option<Entry>>,
}

impl FlowTable {
    pub fn len(&self) -> usize {
        self.flows.len()
    }

    pub fn is_empty(&self) -> bool {
        self.flows.is_empty()
    }

    pub fn get(&self, key: &FlowKey) -> Option<&FlowBody> {
        self.flows.get(key).map(|e| &e.body)
    }

    pub fn iter(&self) -> impl Iterator<Item = (&FlowKey, &FlowBody)> {
        self.flows.iter().map(|(k, e)| (k, &e.body))
    }

    fn remember(&mut self, key: &FlowKey) {
        if !self.touched.contains_key(key) {
            self.touched
                .insert(key.clone(), self.flows.get(key).cloned());
        }
    }

    /// Adds one owner of a flow. A different body for a flow that already has owners replaces
    /// it (as an OpenFlow add would) — the most recent request wins.
    pub fn insert(&mut self, key: FlowKey, body: FlowBody) {
        self.remember(&key);
        match self.flows.get_mut(&key) {
            Some(entry) => {
                entry.owners += 1;
                if entry.body != body {
                    tracing::debug!(?key, "flow wanted with a new body; the newest wins");
                    entry.body = body;
                }
            }
            None => {
                self.flows.insert(key, Entry { body, owners: 1 });
            }
        }
    }

    /// Removes one owner of a flow; the flow goes with its last owner.
    pub fn remove(&mut self, key: &FlowKey) {
        self.remember(key);
        if let Some(entry) = self.flows.get_mut(key) {
            entry.owners -= 1;
            if entry.owners == 0 {
                self.flows.remove(key);
            }
        }
    }

    /// What the switch must do to follow the open batch.
    pub fn diff(&self) -> Diff {
        let mut diff = Diff::default();
        for (key, original) in &self.touched {
            let before = original.as_ref().map(|e| &e.body);
            match (before, self.flows.get(key)) {
                (Some(_), None) => diff.deletes.push(key.clone()),
                (None, Some(now)) => diff.adds.push((key.clone(), now.body.clone())),
                (Some(before), Some(now)) if *before != now.body => {
                    diff.adds.push((key.clone(), now.body.clone()))
                }
                _ => {}
            }
        }
        order_adds(&mut diff.adds);
        diff
    }

    /// Ends the batch, keeping its changes.
    pub fn commit_batch(&mut self) {
        self.touched.clear();
    }

    /// Ends the batch by restoring every flow it touched.
    pub fn rollback(&mut self) {
        for (key, original) in self.touched.drain() {
            match original {
                Some(entry) => self.flows.insert(key, entry),
                None => self.flows.remove(&key),
            };
        }
    }

    /// Every flow as an add, the version note last (so a half-applied install never looks
    /// set up).
    pub fn all_adds(&self) -> Vec<(FlowKey, FlowBody)> {
        let mut adds: Vec<(FlowKey, FlowBody)> =
            self.iter().map(|(k, b)| (k.clone(), b.clone())).collect();
        order_adds(&mut adds);
        adds
    }

    /// What to change on a switch that holds `current` so that it holds this table.
    pub fn reconcile(&self, current: &[FlowStats]) -> Diff {
        let mut diff = Diff::default();
        let mut seen: HashSet<&FlowKey> = HashSet::with_capacity(current.len());
        for stats in current {
            let (key, body) = from_stats(stats);
            match self.flows.get_key_value(&key) {
                Some((k, entry)) => {
                    seen.insert(k);
                    if entry.body != body {
                        diff.adds.push((key, entry.body.clone()));
                    }
                }
                None => diff.deletes.push(key),
            }
        }
        for (key, entry) in &self.flows {
            if !seen.contains(key) {
                diff.adds.push((key.clone(), entry.body.clone()));
            }
        }
        order_adds(&mut diff.adds);
        diff
    }
}

/// Sorts adds by table and priority (a stable, readable order), with the version table last.
fn order_adds(adds: &mut [(FlowKey, FlowBody)]) {
    adds.sort_by_key(|(key, _)| {
        (
            key.table == VERSION_TABLE,
            key.table,
            u16::MAX - key.priority,
        )
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn take(table: &mut FlowTable) -> Diff {
        let diff = table.diff();
        table.commit_batch();
        diff
    }

    fn flow(text: &str) -> (FlowKey, FlowBody) {
        parse_flow(text).unwrap()
    }

    #[test]
    fn shared_flows_leave_with_their_last_owner() {
        let mut table = FlowTable::default();
        let (k, b) = flow("table=10, priority=100, tun_src=192.0.2.2, actions=goto_table:30");
        table.insert(k.clone(), b.clone());
        table.insert(k.clone(), b.clone());
        let diff = take(&mut table);
        assert_eq!((diff.deletes.len(), diff.adds.len()), (0, 1));
        table.remove(&k);
        assert!(take(&mut table).is_empty());
        table.remove(&k);
        let diff = take(&mut table);
        assert_eq!(diff.deletes, vec![k]);
        assert!(table.is_empty());
    }

    #[test]
    fn rollback_restores_exactly() {
        let mut table = FlowTable::default();
        let (k1, b1) = flow("table=40, priority=100, arp, nw_dst=10.128.0.5, actions=output:3");
        table.insert(k1.clone(), b1.clone());
        take(&mut table);
        let (k2, b2) = flow("table=40, priority=100, arp, nw_dst=10.128.0.6, actions=output:4");
        table.remove(&k1);
        table.insert(k2, b2);
        table.rollback();
        assert_eq!(table.len(), 1);
        assert_eq!(table.get(&k1), Some(&b1));
    }

    #[test]
    fn a_changed_body_is_one_add() {
        let mut table = FlowTable::default();
        let (k, b) = flow("table=111, priority=100, actions=goto_table:120");
        table.insert(k.clone(), b);
        take(&mut table);
        let (k2, b2) = flow("table=111, priority=100, actions=move:NXM_NX_REG0[]->NXM_NX_TUN_ID[0..31],set_field:192.0.2.2->tun_dst,output:1,goto_table:120");
        assert_eq!(k, k2);
        table.remove(&k);
        table.insert(k2, b2.clone());
        let diff = take(&mut table);
        assert!(diff.deletes.is_empty());
        assert_eq!(diff.adds, vec![(k, b2)]);
    }

    #[test]
    fn version_note_is_added_last() {
        let mut table = FlowTable::default();
        for text in [
            "table=253, actions=note:00.03",
            "table=0, priority=0, actions=drop",
            "table=120, priority=0, actions=drop",
        ] {
            let (k, b) = flow(text);
            table.insert(k, b);
        }
        let adds = take(&mut table).adds;
        let tables: Vec<u8> = adds.iter().map(|(k, _)| k.table).collect();
        assert_eq!(tables, vec![0, 120, 253]);
    }
}
