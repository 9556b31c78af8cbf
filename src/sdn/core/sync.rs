//! Whole-table work on the core: setup, adopting another daemon's state (HA), and making the
//! switch's table equal to the desired one (the resync at every connect, and drift repair).

use ofnode_proto::FlowStats;
use serde::{Deserialize, Serialize};

use super::CoreError as Error;
use super::{Core, Repaired};
use crate::sdn::readback::holds_version_note;
use crate::sdn::state::{Change, NodeState, PortIntent};
use crate::sdn::table::Diff;
use crate::sdn::types::Pod;
use crate::sdn::types::SetupRequest;

/// What `setup` did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SetupOutcome {
    /// Set up with these parameters already: nothing changed.
    AlreadySetUp,
    /// Bridge, ports and the whole table installed (keeping any pods of the same setup).
    Built,
    /// Set up with other parameters before: the table was rebuilt from scratch and everything
    /// attached to the old setup (pods, subnets, services, policies) was dropped.
    Rebuilt,
}

/// What a setup asks of the switch and the journal.
#[derive(Debug)]
pub enum SetupPlan {
    /// Set up with these parameters already: the switch only needs what it lacks.
    Reconcile,
    /// A new desired state: install `next`'s whole table in one bundle (delete all, then every
    /// flow, the version note last), journal `record`, and make `next` the core. The ports of
    /// `dropped` pods go too (the shell's OVSDB part).
    Replace {
        outcome: SetupOutcome,
        dropped: Vec<Pod>,
        next: Box<Core>,
        record: Change,
    },
}

/// What making the switch hold the desired table takes.
#[derive(Debug, PartialEq)]
pub enum Reconcile {
    /// The node is not set up: it wants nothing of the switch.
    NotSetUp,
    /// The version note is missing (ovs-vswitchd restarted, or someone deleted everything):
    /// install the whole table in one bundle.
    InstallAll,
    /// These differences, as one bundle (none: the tables are equal).
    Patch(Diff),
}

impl Reconcile {
    /// What doing it will have changed, for drift reports; `flows` is the desired table's size.
    pub fn repaired(&self, flows: usize) -> Repaired {
        match self {
            Reconcile::NotSetUp => Repaired::Nothing,
            Reconcile::InstallAll => Repaired::Reinstalled { flows },
            Reconcile::Patch(diff) => Repaired::from_diff(diff),
        }
    }
}

impl Core {
    /// The seed's SetupOVS flows for `setup`: with the parameters the node has, the state is
    /// kept; with others, everything attached to the old setup is dropped.
    pub fn setup(&self, setup: SetupRequest) -> Result<SetupPlan, Error> {
        let (outcome, state, dropped) = match &self.state().setup {
            Some(current) if *current == setup => return Ok(SetupPlan::Reconcile),
            None => {
                let mut state = self.state().clone();
                state.setup = Some(setup);
                (SetupOutcome::Built, state, Vec::new())
            }
            Some(_) => {
                let dropped: Vec<Pod> = self.state().pods.values().cloned().collect();
                // The dropped pods' ports must go, as must those whose removal is pending.
                let mut port_intents = self.state().port_intents.clone();
                port_intents.retain(|_, intent| *intent == PortIntent::Removed);
                for veth in dropped.iter().filter_map(|pod| pod.veth.clone()) {
                    port_intents.insert(veth, PortIntent::Removed);
                }
                let state = NodeState {
                    setup: Some(setup),
                    port_intents,
                    ..NodeState::default()
                };
                (SetupOutcome::Rebuilt, state, dropped)
            }
        };
        let record = Change::Replace {
            state: Box::new(state.clone()),
        };
        Ok(SetupPlan::Replace {
            outcome,
            dropped,
            next: Box::new(Core::new(state)?),
            record,
        })
    }

    /// High availability: the core that holds `state` (the previous active daemon's), and the
    /// journal record that makes it this daemon's; None when it is the state held already.
    pub fn adopt(&self, state: NodeState) -> Result<Option<(Core, Change)>, Error> {
        if &state == self.state() {
            return Ok(None);
        }
        let record = Change::Replace {
            state: Box::new(state.clone()),
        };
        Ok(Some((Core::new(state)?, record)))
    }

    /// What to do to a switch holding `current` so that it holds the desired table.
    pub fn reconcile(&self, current: &[FlowStats]) -> Result<Reconcile, Error> {
        Ok(match self.state().setup {
            None => Reconcile::NotSetUp,
            Some(setup) if !holds_version_note(current, setup.mode) => Reconcile::InstallAll,
            Some(_) => Reconcile::Patch(self.table.reconcile(current)?),
        })
    }
}
