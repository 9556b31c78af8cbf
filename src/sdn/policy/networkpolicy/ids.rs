//! Conjunction ids: one per conjunction of a rule (its numbered ports, and its named ports),
//! allocated when a policy is applied and kept in the node state, so that a restart, resync
//! or HA take-over computes the very same flows.

use std::collections::BTreeSet;

use super::model::{NetPol, Rule};
use super::StoredNetPol;

/// Conjunction ids for a policy's rules: the old policy's by position where it had one, new
/// ones the lowest ids no other policy uses (from 1: 0 would be "no conjunction").
///
/// One pass over the used ids in order: n new ids among m used ones cost O((n + m) log m)
/// (a body of 350,000 empty rules once took O(n²) here and stalled the node's writer).
pub fn allocate_ids(
    policy: NetPol,
    old: Option<&StoredNetPol>,
    others: impl Iterator<Item = u32>,
) -> StoredNetPol {
    // One id per conjunction a rule is (two for a rule with numbered and named ports).
    let count = |rules: &Option<Vec<Rule>>| {
        rules
            .as_ref()
            .map_or(0, |rules| rules.iter().map(Rule::conjunctions).sum())
    };
    let mut used: BTreeSet<u32> = others.collect();
    let mut keep = |old_ids: Option<&Vec<u32>>, n: usize| -> Vec<Option<u32>> {
        (0..n)
            .map(|i| {
                let id = old_ids.and_then(|ids| ids.get(i)).copied()?;
                // An id another policy took meanwhile (or a repeated one) is not kept.
                used.insert(id).then_some(id)
            })
            .collect()
    };
    let kept_in = keep(old.map(|o| &o.ingress_ids), count(&policy.ingress));
    let kept_eg = keep(old.map(|o| &o.egress_ids), count(&policy.egress));
    let mut free = FreeIds::new(&used);
    let mut fill = |kept: Vec<Option<u32>>| -> Vec<u32> {
        kept.into_iter()
            .map(|id| id.unwrap_or_else(|| free.next_id()))
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

/// The ids not in `used`, lowest first, from 1.
struct FreeIds<'a> {
    used: &'a BTreeSet<u32>,
    next: u32,
}

impl<'a> FreeIds<'a> {
    fn new(used: &'a BTreeSet<u32>) -> FreeIds<'a> {
        FreeIds { used, next: 1 }
    }

    /// The next free id. The cursor only moves forward, past each used id once. It cannot
    /// run out: ids in use are bounded by the rules the node holds, far below 2³².
    fn next_id(&mut self) -> u32 {
        while self.used.contains(&self.next) {
            self.next = self.next.saturating_add(1);
        }
        let id = self.next;
        self.next = self.next.saturating_add(1);
        id
    }
}

#[cfg(test)]
mod tests {
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
        }
    }

    #[test]
    fn new_ids_fill_the_gaps_lowest_first() {
        let stored = allocate_ids(policy(3, Some(2)), None, [1, 2, 4, 7].into_iter());
        assert_eq!(stored.ingress_ids, vec![3, 5, 6]);
        assert_eq!(stored.egress_ids, vec![8, 9]);
    }

    #[test]
    fn a_replaced_policy_keeps_its_ids_by_position_unless_taken() {
        let old = allocate_ids(policy(2, Some(1)), None, [1].into_iter());
        assert_eq!(
            (old.ingress_ids.clone(), old.egress_ids.clone()),
            (vec![2, 3], vec![4])
        );
        // Id 3 went to another policy meanwhile: position 1 gets a new one, the others stay.
        let new = allocate_ids(policy(3, Some(1)), Some(&old), [1, 3].into_iter());
        assert_eq!(new.ingress_ids, vec![2, 5, 6]);
        assert_eq!(new.egress_ids, vec![4]);
    }

    /// A 1 MiB body holds ~350,000 empty rules: their ids come in one pass (this hung when
    /// every id searched from 1).
    #[test]
    fn many_rules_get_distinct_ids_in_one_pass() {
        let others = (1..=1000u32).map(|i| i * 2);
        let stored = allocate_ids(policy(350_000, None), None, others);
        assert_eq!(stored.ingress_ids.len(), 350_000);
        assert_eq!(&stored.ingress_ids[..3], &[1, 3, 5]);
        let distinct: BTreeSet<u32> = stored.ingress_ids.iter().copied().collect();
        assert_eq!(distinct.len(), 350_000);
        assert!(distinct.iter().all(|id| *id > 2000 || id % 2 == 1));
    }
}
