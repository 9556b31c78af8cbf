//! The policy audit's meters on the switch: one per audited rule, its id the rule's key (the
//! `meter_id` of its table 24 flow), limiting that rule's packet-ins to `audit_rate` per second
//! (burst `audit_burst`), so that one noisy rule cannot starve another's log.
//!
//! A meter must exist when a flow naming it is translated (a flow added first gave unmetered
//! packet-ins until its cached datapath flows went), and meter mods cannot go in a bundle. So:
//! meters a batch adds go BEFORE its bundle, those it removes AFTER it; at every resync (a
//! connect, a restarted ovs-vswitchd that has none) every desired meter is added first (ADD,
//! and MODIFY where it exists). A meter the switch refuses is logged with its error, counted
//! and shown in status; the flows still go: the policy is enforced, that rule's packet-ins
//! are then unmetered.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use ofnode_proto::{
    ErrorKind, Message, MeterBand, MeterCommand, MeterMod, OFPMF_BURST, OFPMF_PKTPS, OFPMF_STATS,
};

use crate::openflow::{self, Switch};
use crate::sdn::config::AuditRate;
use crate::sdn::metrics::Metrics;

/// OFPET_METER_MOD_FAILED / OFPMMFC_METER_EXISTS.
const METER_EXISTS: ErrorKind = ErrorKind::Standard {
    err_type: 12,
    code: 1,
};

/// The switch's audit meters, as far as ofnode made them.
pub(super) struct Meters {
    switch: Switch,
    metrics: Arc<Metrics>,
    rate: AuditRate,
    /// How long a meter mod waits for the switch's session when there is none.
    connect_timeout: Duration,
    /// Meters the table's flows name (the audited rules), kept here so that status counts
    /// them without a look through the table.
    desired: BTreeSet<u32>,
    /// Meters the switch refused, with its error (until one is added or no longer wanted).
    refused: BTreeMap<u32, String>,
    /// A meter mod did not reach the switch (no session): the next resync adds every meter.
    pub unsent: bool,
}

impl Meters {
    pub fn new(
        switch: Switch,
        metrics: Arc<Metrics>,
        rate: AuditRate,
        connect_timeout: Duration,
    ) -> Meters {
        Meters {
            switch,
            metrics,
            rate,
            connect_timeout,
            desired: BTreeSet::new(),
            refused: BTreeMap::new(),
            unsent: false,
        }
    }

    /// How many audited rules have a meter (or should: see `refused`).
    pub fn count(&self) -> usize {
        self.desired.len()
    }

    /// The meters the switch refused, each with its error.
    pub fn refused(&self) -> &BTreeMap<u32, String> {
        &self.refused
    }

    fn meter_mod(&self, meter_id: u32, command: MeterCommand) -> MeterMod {
        MeterMod {
            command,
            ..MeterMod::add(
                meter_id,
                OFPMF_PKTPS | OFPMF_BURST | OFPMF_STATS,
                vec![MeterBand::drop(self.rate.rate, self.rate.burst)],
            )
        }
    }

    /// Adds the meters of `keys` (one that exists is modified to the configured rate). A
    /// refusal is recorded, never returned: the flows go all the same.
    pub async fn add(&mut self, keys: impl IntoIterator<Item = u32>) {
        for key in keys {
            self.desired.insert(key);
            // A session lost on the way is waited for once more: the meter must be there
            // before the bundle that follows names it.
            let mut added = self.add_one(key).await;
            if matches!(&added, Err(e) if !matches!(e, openflow::Error::Switch { .. })) {
                added = self.add_one(key).await;
            }
            match added {
                Ok(()) => drop(self.refused.remove(&key)),
                Err(e @ openflow::Error::Switch { .. }) => self.refuse(key, &e),
                // Still no session: the next resync adds every desired meter first.
                Err(e) => {
                    tracing::debug!(meter = key, error = %e, "audit meter not sent; the next resync adds it");
                    self.unsent = true;
                }
            }
        }
    }

    /// ADD, or MODIFY where the meter exists.
    async fn add_one(&self, key: u32) -> Result<(), openflow::Error> {
        match self.send(self.meter_mod(key, MeterCommand::Add)).await {
            Err(e) if is_switch_error(&e, METER_EXISTS) => {
                self.send(self.meter_mod(key, MeterCommand::Modify)).await
            }
            other => other,
        }
    }

    /// Deletes the meters of `keys` (their flows are gone).
    pub async fn delete(&mut self, keys: impl IntoIterator<Item = u32>) {
        for key in keys {
            self.desired.remove(&key);
            self.refused.remove(&key);
            if let Err(e) = self.send(MeterMod::delete(key)).await {
                tracing::warn!(meter = key, error = %e, "an audit meter no flow names any more could not be deleted; it stays, unused");
            }
        }
    }

    /// Makes every meter of `desired` exist at the configured rate (a resync: the switch may
    /// have none, e.g. a restarted ovs-vswitchd); forgets the refusals of the others.
    pub async fn add_all(&mut self, desired: &BTreeSet<u32>) {
        self.refused.retain(|key, _| desired.contains(key));
        self.desired.clone_from(desired);
        self.unsent = false;
        self.add(desired.iter().copied()).await;
    }

    /// Sends one meter mod, waiting for the switch's session when there is none (as a bundle
    /// does), so that a batch's meters still go before its flows after a reconnect.
    async fn send(&self, meter_mod: MeterMod) -> Result<(), openflow::Error> {
        if !self.switch.is_connected() {
            self.switch.wait_connected(self.connect_timeout).await?;
        }
        self.switch.send_checked(Message::MeterMod(meter_mod)).await
    }

    fn refuse(&mut self, key: u32, e: &openflow::Error) {
        tracing::warn!(
            meter = key,
            error = %e,
            "the switch refused an audited rule's meter: the policy is enforced, but that rule's audit packet-ins are unmetered"
        );
        Metrics::inc(&self.metrics.audit_meter_refusals);
        self.refused.insert(key, e.to_string());
    }
}

fn is_switch_error(e: &openflow::Error, kind: ErrorKind) -> bool {
    matches!(e, openflow::Error::Switch { error, .. } if error.kind == kind)
}
