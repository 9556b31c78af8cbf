//! Conjunction ids: one per conjunction of a rule (its numbered ports, and its named ports),
//! allocated when a policy is applied and kept in the node state, so that a restart, resync
//! or HA take-over computes the very same flows.

use std::collections::{BTreeMap, HashMap, HashSet};

use super::model::{NetPol, Rule};
use super::StoredNetPol;

/// The conjunction ids the node's policies hold, with the free ones as ranges: allocating an
/// id or giving one back costs O(log n), not a pass over every policy's ids (which made a
/// policy add cost what the node's other 5,000 policies hold).
#[derive(Debug, Clone)]
pub struct ConjIds {
    /// How many times each id is held (once, unless a stored state repeats one).
    held: HashMap<u32, u32>,
    /// Free ids, disjoint ranges `start → end` (end exclusive, so u32::MAX fits), from 1: id
    /// 0 is "no conjunction".
    free: BTreeMap<u32, u64>,
}

impl Default for ConjIds {
    fn default() -> ConjIds {
        ConjIds {
            held: HashMap::new(),
            free: BTreeMap::from([(1, u64::from(u32::MAX) + 1)]),
        }
    }
}

impl ConjIds {
    /// The ids `held` holds.
    pub fn of(held: impl IntoIterator<Item = u32>) -> ConjIds {
        let mut ids = ConjIds::default();
        for id in held {
            ids.take(id);
        }
        ids
    }

    /// How many times `id` is held.
    pub fn held(&self, id: u32) -> u32 {
        self.held.get(&id).copied().unwrap_or(0)
    }

    /// The free ids, lowest first.
    pub fn free(&self) -> impl Iterator<Item = u32> + '_ {
        self.free
            .iter()
            .flat_map(|(&start, &end)| (u64::from(start)..end).map(|id| id as u32))
    }

    pub fn take(&mut self, id: u32) {
        let held = self.held.entry(id).or_insert(0);
        *held += 1;
        if *held > 1 {
            return;
        }
        let Some((&start, &end)) = self.free.range(..=id).next_back() else {
            return;
        };
        if u64::from(id) >= end {
            return;
        }
        self.free.remove(&start);
        if start < id {
            self.free.insert(start, u64::from(id));
        }
        if u64::from(id) + 1 < end {
            self.free.insert(id + 1, end);
        }
    }

    pub fn release(&mut self, id: u32) {
        match self.held.get_mut(&id) {
            Some(held) if *held > 1 => {
                *held -= 1;
                return;
            }
            Some(_) => {
                self.held.remove(&id);
            }
            None => return,
        }
        if id == 0 {
            return;
        }
        let (mut start, mut end) = (id, u64::from(id) + 1);
        if let Some((&before, &before_end)) = self.free.range(..id).next_back() {
            if before_end == u64::from(id) {
                self.free.remove(&before);
                start = before;
            }
        }
        if let Ok(after) = u32::try_from(end) {
            if let Some(after_end) = self.free.remove(&after) {
                end = after_end;
            }
        }
        self.free.insert(start, end);
    }

    /// Takes (or, `held` false, releases) every id of `stored`.
    pub fn follow(&mut self, stored: &StoredNetPol, held: bool) {
        for &id in stored.ingress_ids.iter().chain(&stored.egress_ids) {
            if held {
                self.take(id);
            } else {
                self.release(id);
            }
        }
    }
}

/// Conjunction ids for a policy's rules: the old policy's by position where no other policy
/// holds it, new ones the lowest free ids (from 1: 0 would be "no conjunction"). `ids` is
/// what every stored policy holds, the old one's included.
pub fn allocate_ids(policy: NetPol, old: Option<&StoredNetPol>, ids: &ConjIds) -> StoredNetPol {
    // One id per conjunction a rule is (two for a rule with numbered and named ports).
    let count = |rules: &Option<Vec<Rule>>| {
        rules
            .as_ref()
            .map_or(0, |rules| rules.iter().map(Rule::conjunctions).sum())
    };
    let mut own: HashMap<u32, u32> = HashMap::new();
    for id in old
        .into_iter()
        .flat_map(|o| o.ingress_ids.iter().chain(&o.egress_ids))
    {
        *own.entry(*id).or_insert(0) += 1;
    }
    let held_by_others = |id: u32| ids.held(id) > own.get(&id).copied().unwrap_or(0);
    let mut kept = HashSet::new();
    let mut keep = |old_ids: Option<&Vec<u32>>, n: usize| -> Vec<Option<u32>> {
        (0..n)
            .map(|i| {
                let id = old_ids.and_then(|ids| ids.get(i)).copied()?;
                // An id another policy took meanwhile (or a repeated one) is not kept.
                (!held_by_others(id) && kept.insert(id)).then_some(id)
            })
            .collect()
    };
    let kept_in = keep(old.map(|o| &o.ingress_ids), count(&policy.ingress));
    let kept_eg = keep(old.map(|o| &o.egress_ids), count(&policy.egress));
    // The old policy's ids are held: free ones are neither its nor another's.
    let mut free = ids.free().filter(|id| !kept.contains(id));
    let mut fill = |kept: Vec<Option<u32>>| -> Vec<u32> {
        kept.into_iter()
            .map(|id| id.or_else(|| free.next()).unwrap_or(u32::MAX))
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

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;
    use crate::sdn::labels::Selector;

    fn policy(ingress: usize, egress: Option<usize>) -> NetPol {
        let rules = |n: usize| {
            vec![
                Rule {
                    peers: None,
                    ports: Vec::new(),
                };
                n
            ]
        };
        NetPol {
            namespace: "x".into(),
            name: "p".into(),
            pod_selector: Selector::default(),
            ingress: Some(rules(ingress)),
            egress: egress.map(rules),
            audit: None,
        }
    }

    #[test]
    fn new_ids_fill_the_gaps_lowest_first() {
        let stored = allocate_ids(policy(3, Some(2)), None, &ConjIds::of([1, 2, 4, 7]));
        assert_eq!(stored.ingress_ids, vec![3, 5, 6]);
        assert_eq!(stored.egress_ids, vec![8, 9]);
    }

    #[test]
    fn a_replaced_policy_keeps_its_ids_by_position_unless_taken() {
        let old = allocate_ids(policy(2, Some(1)), None, &ConjIds::of([1]));
        assert_eq!(
            (old.ingress_ids.clone(), old.egress_ids.clone()),
            (vec![2, 3], vec![4])
        );
        // Id 3 went to another policy meanwhile: position 1 gets a new one, the others stay.
        let held = [1, 3]
            .into_iter()
            .chain(old.ingress_ids.clone())
            .chain(old.egress_ids.clone());
        let new = allocate_ids(policy(3, Some(1)), Some(&old), &ConjIds::of(held));
        assert_eq!(new.ingress_ids, vec![2, 5, 6]);
        assert_eq!(new.egress_ids, vec![4]);
    }

    /// Ids given back merge with their neighbours: the free ranges stay as few as the gaps.
    #[test]
    fn released_ids_are_free_again_and_ranges_merge() {
        let mut ids = ConjIds::of(1..=10);
        assert_eq!(ids.free().next(), Some(11));
        for id in [5, 3, 4] {
            ids.release(id);
        }
        assert_eq!(ids.free().take(4).collect::<Vec<_>>(), vec![3, 4, 5, 11]);
        assert_eq!(ids.free.len(), 2, "{:?}", ids.free);
        // An id held twice (a repeated id in a stored state) is free once both let go.
        ids.take(7);
        ids.release(7);
        assert_eq!(ids.held(7), 1);
        ids.release(7);
        assert_eq!(ids.free().take(5).collect::<Vec<_>>(), vec![3, 4, 5, 7, 11]);
        for id in [3, 4, 5, 7] {
            ids.take(id);
        }
        ids.release(10);
        ids.release(0);
        assert_eq!(ids.free().next(), Some(10));
        assert_eq!(ids.free.len(), 1, "{:?}", ids.free);
        ids.take(u32::MAX);
        ids.release(u32::MAX);
        assert_eq!(ids.free.len(), 1, "{:?}", ids.free);
    }

    /// A 1 MiB body holds ~350,000 empty rules: their ids come in one pass (this hung when
    /// every id searched from 1).
    #[test]
    fn many_rules_get_distinct_ids_in_one_pass() {
        let others = ConjIds::of((1..=1000u32).map(|i| i * 2));
        let stored = allocate_ids(policy(350_000, None), None, &others);
        assert_eq!(stored.ingress_ids.len(), 350_000);
        assert_eq!(&stored.ingress_ids[..3], &[1, 3, 5]);
        let distinct: BTreeSet<u32> = stored.ingress_ids.iter().copied().collect();
        assert_eq!(distinct.len(), 350_000);
        assert!(distinct.iter().all(|id| *id > 2000 || id % 2 == 1));
    }
}
