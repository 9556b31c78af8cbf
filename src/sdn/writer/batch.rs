//! A batch of edits: applied to the core one by one, its net flow changes sent as one bundle
//! and its journal record written with one sync, then committed or rolled back as a whole, and
//! its edits answered (those with a port step once the step is carried out).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Instant;

use super::bundle::may_have_applied;
use super::Writer;
use crate::sdn::core::{Effects, Notice, PortStep, Reconcile};
use crate::sdn::error::Error;
use crate::sdn::port_steps::Answer;
use crate::sdn::request::{Deferred, Edit};
use crate::sdn::state::Change;
use crate::sdn::table::Diff;
use crate::sdn::types::HostSubnet;
use crate::value::IfName;

/// An edit's answer, waiting for its batch: the pod port it may have a step for.
type Waiting = (Option<IfName>, Deferred, Instant);

impl Writer {
    pub(super) async fn run_batch(&mut self, batch: Vec<(Edit, Instant)>) {
        if let Err(e) = self.settle().await {
            for (edit, started) in batch {
                edit.refuse(e.clone());
                self.count(started, false);
            }
            return;
        }
        let answers: Vec<Waiting> = batch
            .into_iter()
            .map(|(edit, started)| (edit.port().cloned(), edit.apply(&mut self.core), started))
            .collect();
        let Effects {
            flows,
            journal,
            vxlan_hosts,
            dns_names,
            notices,
            ports,
            meters,
        } = self.core.take_effects();
        // A meter must exist before a flow naming it is translated, and may go only once no
        // flow names it.
        self.meters.add(meters.added.iter().copied()).await;
        let outcome = self.carry(&flows, journal).await;
        match &outcome {
            Ok(()) => {
                self.core.commit();
                say(&notices);
                self.carry_out(vxlan_hosts, dns_names);
                self.meters.delete(meters.removed).await;
            }
            Err(_) => {
                self.core.rollback();
                self.meters.delete(meters.added).await;
            }
        }
        // The switch may hold the rolled-back batch: back to the desired table before anyone
        // is answered (a failure leaves it for the next batch, which settles it first).
        if let Err(e) = self.settle().await {
            tracing::warn!(error = %e, "the switch's table could not be settled after a bundle of unknown outcome; the next change settles it first");
        }
        // A caller's next look (status, the set-up check of its next operation) must already
        // see its own operation.
        self.publish();
        // The port steps of a batch that stands: their edits are answered once they are done.
        let ports = if outcome.is_ok() { ports } else { Vec::new() };
        self.answer_batch(answers, ports, outcome.err());
    }

    /// The batch's flows to the switch (one bundle), then its journal record to disk.
    async fn carry(&mut self, flows: &Diff, journal: Vec<Change>) -> Result<(), Error> {
        match self.switch.commit_diff(flows).await {
            Ok(()) => self.persist(journal).await,
            Err(e) if may_have_applied(&e) => self.applied_anyway(e, journal).await,
            Err(e) => Err(e),
        }
    }

    /// Answers the batch's edits with its outcome (`failed`, if it failed), but those whose
    /// port has a step: they are answered once their step is carried out.
    fn answer_batch(&mut self, answers: Vec<Waiting>, ports: Vec<PortStep>, failed: Option<Error>) {
        let mut waiting: HashMap<IfName, Answer> = HashMap::new();
        for (port, deliver, started) in answers {
            match port.filter(|port| ports.iter().any(|step| step.veth() == port)) {
                Some(port) => drop(waiting.insert(port, Answer { deliver, started })),
                None => {
                    let ok = deliver(failed.as_ref());
                    self.count(started, ok);
                }
            }
        }
        for step in ports {
            let answer = waiting.remove(step.veth());
            match &mut self.port_steps {
                Some(steps) => steps.start(step, answer),
                None => {
                    if let Some(Answer { deliver, started }) = answer {
                        let ok = deliver(None);
                        self.count(started, ok);
                    }
                }
            }
        }
    }

    /// A batch whose COMMIT went unanswered: the switch's table tells whether it applied. When
    /// it holds the batch, the batch happened (journaled, answered Ok); otherwise the batch is
    /// refused with `failed`, rolled back, and the switch settled to the state without it
    /// (`settle`, before the answers).
    async fn applied_anyway(&mut self, failed: Error, journal: Vec<Change>) -> Result<(), Error> {
        tracing::warn!(error = %failed, "no answer to the bundle's commit: reading the switch's table to learn whether it applied");
        self.unsettled = true;
        match self.switch_holds_desired().await {
            Ok(true) => {
                tracing::info!("the switch applied the bundle: the batch stands");
                self.unsettled = false;
                self.persist(journal).await
            }
            Ok(false) => {
                tracing::info!("the switch did not apply the bundle: the batch is refused");
                Err(failed)
            }
            Err(e) => {
                tracing::warn!(error = %e, "reading the switch's table failed: the batch is refused");
                Err(failed)
            }
        }
    }

    /// Whether the switch's table equals the desired one (the open batch included).
    async fn switch_holds_desired(&mut self) -> Result<bool, Error> {
        let current = self.switch.dump_after_cut().await?;
        Ok(matches!(self.core.reconcile(&current)?, Reconcile::Patch(diff) if diff.is_empty()))
    }

    /// The effects of a committed batch beyond the switch and the journal.
    fn carry_out(&self, vxlan_hosts: Option<Vec<HostSubnet>>, dns_names: Option<HashSet<String>>) {
        if let Some(hosts) = vxlan_hosts {
            self.vxlan_hosts.send_replace(Arc::new(hosts));
        }
        if let Some(names) = dns_names {
            self.dns.retain(&names);
        }
    }
}

/// Logs what the core wants said about a committed batch (the core itself does not log).
fn say(notices: &[Notice]) {
    for notice in notices {
        if notice.is_warning() {
            tracing::warn!("{notice}");
        } else {
            tracing::info!("{notice}");
        }
    }
}
