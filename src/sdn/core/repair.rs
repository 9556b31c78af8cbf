//! What making the switch's table equal to the desired one changed, for logs, metrics and
//! `ofnode status`.

use std::collections::BTreeMap;
use std::fmt;

use crate::sdn::table::{Diff, Flow};

/// Counts per table, printed as `table 0: 3, table 10: 37`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PerTable(BTreeMap<u8, usize>);

impl PerTable {
    pub(crate) fn add(&mut self, table: u8) {
        *self.0.entry(table).or_default() += 1;
    }

    pub fn total(&self) -> usize {
        self.0.values().sum()
    }

    pub fn tables(&self) -> impl Iterator<Item = (u8, usize)> + '_ {
        self.0.iter().map(|(t, n)| (*t, *n))
    }

    fn of_flows(flows: &[Flow]) -> PerTable {
        let mut counts = PerTable::default();
        flows.iter().for_each(|f| counts.add(f.table()));
        counts
    }
}

impl fmt::Display for PerTable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts: Vec<String> = self
            .0
            .iter()
            .map(|(table, n)| format!("table {table}: {n}"))
            .collect();
        write!(f, "{}", parts.join(", "))
    }
}

/// What a comparison of the switch's table with the desired one changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Repaired {
    /// The tables were equal.
    Nothing,
    /// The version note was gone (everything deleted, or ovs-vswitchd restarted): the whole
    /// table was installed again in one bundle.
    Reinstalled { flows: usize },
    /// Foreign flows removed; missing or altered flows restored.
    Patched {
        removed: PerTable,
        restored: PerTable,
    },
}

impl Repaired {
    pub fn from_diff(diff: &Diff) -> Repaired {
        if diff.is_empty() {
            return Repaired::Nothing;
        }
        Repaired::Patched {
            removed: PerTable::of_flows(&diff.deletes),
            restored: PerTable::of_flows(&diff.adds),
        }
    }
}

impl fmt::Display for Repaired {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Repaired::Nothing => write!(f, "nothing"),
            Repaired::Reinstalled { flows } => {
                write!(
                    f,
                    "re-installed the whole table ({flows} flows): its version note was gone"
                )
            }
            Repaired::Patched { removed, restored } => {
                let mut parts = Vec::new();
                if removed.total() > 0 {
                    parts.push(format!(
                        "removed {} foreign flows ({removed})",
                        removed.total()
                    ));
                }
                if restored.total() > 0 {
                    parts.push(format!(
                        "restored {} missing or altered flows ({restored})",
                        restored.total()
                    ));
                }
                write!(f, "{}", parts.join("; "))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_repair_names_tables_and_counts() {
        let flow = |text: &str| crate::sdn::table::parse_flow(text).unwrap();
        let diff = Diff {
            deletes: vec![flow("table=30, priority=5, ip, actions=drop")],
            adds: vec![
                flow("table=0, priority=100, arp, actions=drop"),
                flow("table=10, priority=100, arp, actions=drop"),
                flow("table=10, priority=50, arp, actions=drop"),
            ],
        };
        assert_eq!(
            Repaired::from_diff(&diff).to_string(),
            "removed 1 foreign flows (table 30: 1); \
             restored 3 missing or altered flows (table 0: 1, table 10: 2)"
        );
        assert_eq!(Repaired::from_diff(&Diff::default()), Repaired::Nothing);
    }
}
