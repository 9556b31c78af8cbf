//! Conjunction ids: one per rule, allocated when a policy is applied and kept in the node
//! state, so that a restart, resync or HA take-over computes the very same flows.

use std::collections::BTreeSet;

use super::model::{NetPol, Rule};
use super::StoredNetPol;

/// Conjunction ids for a policy's rules: the old policy's by position where it had one, new
/// ones the lowest ids no other policy uses (from 1: 0 would be "no conjunction").
pub fn allocate_ids(
    policy: NetPol,
    old: Option<&StoredNetPol>,
    others: impl Iterator<Item = u32>,
) -> StoredNetPol {
    let count = |rules: &Option<Vec<Rule>>| rules.as_ref().map_or(0, Vec::len);
    let mut used: BTreeSet<u32> = others.collect();
    let keep = |old_ids: Option<&Vec<u32>>, n: usize, used: &BTreeSet<u32>| -> Vec<Option<u32>> {
        (0..n)
            .map(|i| {
                old_ids
                    .and_then(|ids| ids.get(i))
                    .copied()
                    .filter(|id| !used.contains(id))
            })
            .collect()
    };
    let kept_in = keep(old.map(|o| &o.ingress_ids), count(&policy.ingress), &used);
    used.extend(kept_in.iter().flatten());
    let kept_eg = keep(old.map(|o| &o.egress_ids), count(&policy.egress), &used);
    used.extend(kept_eg.iter().flatten());
    let mut fill = |kept: Vec<Option<u32>>| -> Vec<u32> {
        kept.into_iter()
            .map(|id| {
                id.unwrap_or_else(|| {
                    let id = (1..u32::MAX)
                        .find(|id| !used.contains(id))
                        .unwrap_or(u32::MAX);
                    used.insert(id);
                    id
                })
            })
            .collect()
    };
    let ingress_ids = fill(kept_in);
    let egress_ids = fill(kept_eg);
    StoredNetPol {
        policy,
        ingress_ids,
        egress_ids,
    }
}
