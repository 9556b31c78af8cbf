//! The mode's flows merged across policies, kept incrementally.

use std::collections::{BTreeMap, BTreeSet};

use super::view::{Body, Key, View};

/// The mode's merged flows, kept with each policy's own part, so that a change recomputes
/// only the policies it touches (Antrea's conjMatchFlowContext, ovn-controller's
/// ofctrl_add_or_append_flow): a clause flow shared by several rules carries one
/// `conjunction` action per rule, and goes with the last of them.
#[derive(Debug, Default, Clone)]
pub struct Index {
    by_policy: BTreeMap<String, BTreeMap<Key, Body>>,
    merged: BTreeMap<Key, Merged>,
}

/// The contributions to one flow: conjunction actions, or whole action lists (equal ones from
/// several policies, e.g. one pod's isolation drop), each with the number of its owners.
#[derive(Debug, Default, Clone)]
struct Merged {
    conjunctions: BTreeMap<(u32, u8, u8), u32>,
    actions: BTreeMap<String, u32>,
}

/// One flow the mode changes: its text before and after (None: absent).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlowChange {
    pub before: Option<String>,
    pub after: Option<String>,
}

fn count<K: Ord>(map: &mut BTreeMap<K, u32>, key: K, add: bool) {
    if add {
        *map.entry(key).or_default() += 1;
    } else if let Some(n) = map.get_mut(&key) {
        *n -= 1;
        if *n == 0 {
            map.remove(&key);
        }
    }
}

impl Merged {
    fn account(&mut self, body: &Body, add: bool) {
        match body {
            Body::Conjunctions(set) => {
                for c in set {
                    count(&mut self.conjunctions, *c, add);
                }
            }
            Body::Actions(a) => count(&mut self.actions, a.clone(), add),
        }
    }

    fn text(&self, (table, priority, match_): &Key) -> Option<String> {
        let actions = if !self.conjunctions.is_empty() {
            self.conjunctions
                .keys()
                .map(|(id, k, n)| format!("conjunction({id},{k}/{n})"))
                .collect::<Vec<_>>()
                .join(",")
        } else {
            self.actions.keys().next()?.clone()
        };
        Some(format!(
            "table={table}, priority={priority}, {match_}, actions={actions}"
        ))
    }
}

impl Index {
    /// The index of every policy of `view`.
    pub fn build(view: &View) -> Index {
        let mut index = Index::default();
        index.update(view, view.netpols.keys().cloned());
        index
    }

    /// Every merged flow.
    pub fn texts(&self) -> Vec<String> {
        self.merged
            .iter()
            .filter_map(|(key, merged)| merged.text(key))
            .collect()
    }

    /// Recomputes the flows of the policies `keys` (deleted ones lose theirs) in `view`;
    /// returns the merged flows that changed.
    pub fn update(
        &mut self,
        view: &View,
        keys: impl IntoIterator<Item = String>,
    ) -> Vec<FlowChange> {
        let mut before: BTreeMap<Key, Option<String>> = BTreeMap::new();
        for key in keys.into_iter().collect::<BTreeSet<_>>() {
            let new = view.flows_of_key(&key);
            let old = self.by_policy.remove(&key).unwrap_or_default();
            if old == new {
                if !new.is_empty() {
                    self.by_policy.insert(key, new);
                }
                continue;
            }
            for (flow, body, add) in old
                .iter()
                .map(|(f, b)| (f, b, false))
                .chain(new.iter().map(|(f, b)| (f, b, true)))
            {
                let merged = self.merged.entry(flow.clone()).or_default();
                before
                    .entry(flow.clone())
                    .or_insert_with(|| merged.text(flow));
                merged.account(body, add);
            }
            if !new.is_empty() {
                self.by_policy.insert(key, new);
            }
        }
        before
            .into_iter()
            .filter_map(|(flow, before)| {
                let after = self.merged.get(&flow).and_then(|m| m.text(&flow));
                if after.is_none() {
                    self.merged.remove(&flow);
                }
                (before != after).then_some(FlowChange { before, after })
            })
            .collect()
    }
}
