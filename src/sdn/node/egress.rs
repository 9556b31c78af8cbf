//! Egress network policy (the seed's UpdateEgressNetworkPolicyRules) and its DNS names,
//! resolved before the policy's flows are computed and again when their answers expire.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, Notify};

use super::Node;
use crate::sdn::core::{check_egress, Core, CoreError};
use crate::sdn::dns::Dns;
use crate::sdn::error::Error;
use crate::sdn::metrics::Metrics;
use crate::sdn::request::{self, Edit, Envelope, Request};
use crate::sdn::state::EgressState;
use crate::sdn::types::EgressNetworkPolicy;
use crate::value::Vnid;

impl Node {
    /// The seed's UpdateEgressNetworkPolicyRules, in one atomic bundle. Policies that cannot be
    /// honoured are the seed's input errors: `Error::Policy` says what was done instead.
    pub async fn egress_set(
        &self,
        vnid: Vnid,
        namespaces: &[String],
        policies: &[EgressNetworkPolicy],
    ) -> Result<(), Error> {
        let _shared = self.inner.gate.read().await;
        check_egress(vnid, namespaces, policies)?;
        let egress = if policies.is_empty() {
            None
        } else {
            Some(self.egress_entry(namespaces, policies).await)
        };
        let policy_error = self.edit(move |core| core.egress_set(vnid, egress)).await?;
        self.inner.dns_wakeup.notify_one();
        match policy_error {
            Some(message) => Err(CoreError::Policy {
                message,
                applied: true,
            }
            .into()),
            None => Ok(()),
        }
    }

    /// The stored form of a VNID's policies, with its DNS names resolved when the policy will
    /// use them (one policy in an unshared namespace).
    pub async fn egress_entry(
        &self,
        namespaces: &[String],
        policies: &[EgressNetworkPolicy],
    ) -> EgressState {
        let mut entry = EgressState {
            namespaces: namespaces.to_vec(),
            policies: policies.to_vec(),
            dns: BTreeMap::new(),
            resolver_error: None,
        };
        let uses_dns = namespaces.len() == 1 && policies.len() == 1;
        if uses_dns && entry.dns_names().next().is_some() {
            let dns = &self.inner.dns;
            match dns.check() {
                Err(reason) => entry.resolver_error = Some(reason),
                Ok(()) => {
                    let names: Vec<String> = entry.dns_names().map(str::to_string).collect();
                    entry.dns = dns.resolve_all(names.iter().map(String::as_str)).await;
                }
            }
        }
        entry
    }
}

/// Resolves egress DNS names again when their answers expire, and updates the flows of every
/// policy whose addresses changed (one bundle per refresh).
pub(super) async fn refresh_dns(
    dns: Arc<Dns>,
    wakeup: Arc<Notify>,
    requests: mpsc::WeakSender<Envelope>,
    metrics: Arc<Metrics>,
) {
    const IDLE: Duration = Duration::from_secs(60);
    loop {
        if requests.upgrade().is_none() {
            return;
        }
        let sleep = match dns.next_refresh() {
            Some(at) => tokio::time::sleep_until(at),
            None => tokio::time::sleep(IDLE),
        };
        tokio::select! {
            () = sleep => {}
            () = wakeup.notified() => continue,
        }
        let changed = dns.refresh_due().await;
        if changed.is_empty() {
            continue;
        }
        metrics
            .dns_changes
            .fetch_add(changed.len() as u64, std::sync::atomic::Ordering::Relaxed);
        let step = move |core: &mut Core| core.egress_dns_changed(&changed);
        let sent = request::send_weak(&requests, |reply| {
            Request::Edit(Edit::new(None, step, reply))
        });
        if sent.await.is_none() {
            return;
        }
    }
}
