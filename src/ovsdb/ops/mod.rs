//! The typed operations the node needs, each one OVSDB transaction.
//!
//! Each operation is planned from the cache, then sent with a `wait` guard that makes the
//! server check what the plan assumed (e.g. "no Port named p1 exists yet"). If another client
//! changed that in between, the guard aborts the transaction, the cache has meanwhile received
//! the change (the server flushes monitor updates before its reply), and the operation is
//! planned again. Operations are idempotent: `add_port` of an existing port converges its
//! columns (`--may-exist`), `delete_port` of a missing port succeeds (`--if-exists`).
//!
//! Here the operations themselves; how each is planned from the cache: `plan.rs` (the plan and
//! its building blocks), `bridge.rs` (bridge and controllers), `port.rs` (ports and
//! interfaces), `qos.rs` (QoS rows and policing).

mod bridge;
mod plan;
mod port;
mod qos;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;

use super::client::{expect_count, op_error, Client};
use super::error::{Error, Result};
use super::monitor::Cache;
use super::types::Datum;
use bridge::{plan_bridge, plan_controller};
use plan::row;
pub(super) use plan::Plan;
pub(super) use port::{check_interface, interface_row, plan_add_ports, validate_port_spec};
use port::{plan_add_port, plan_delete_port, plan_port_changes};
use qos::{plan_bandwidth, plan_qos};

/// The bridge `ensure_bridge` creates or converges.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BridgeSpec {
    pub name: String,
    /// "secure" or "standalone"; `None` leaves the column empty (ovs-vswitchd's default).
    pub fail_mode: Option<String>,
    /// e.g. `["OpenFlow13"]`; empty means ovs-vswitchd's default versions.
    pub protocols: Vec<String>,
    /// "netdev" for the userspace datapath; `None` means the default ("system").
    pub datapath_type: Option<String>,
}

/// The port `add_port` creates or converges (a port with one interface of the same name).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PortSpec {
    pub bridge: String,
    pub name: String,
    /// "vxlan", "internal", …; `None` is a plain (system) network device.
    pub iface_type: Option<String>,
    /// Interface `options` (e.g. `remote_ip=flow`, `key=flow`).
    pub options: BTreeMap<String, String>,
    /// The OpenFlow port number to ask for (1–65279).
    pub ofport_request: Option<u16>,
}

/// One change of [`Client::change_ports`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PortChange {
    /// As [`Client::delete_port`].
    Delete { bridge: String, name: String },
    /// As [`Client::add_port`].
    Add(PortSpec),
    /// As [`Client::set_port_bandwidth`]; the port may be one an earlier `Add` of the same
    /// call creates.
    Bandwidth {
        port: String,
        max_rate_bps: Option<u64>,
        policing_kbps: u32,
    },
}

/// The largest OpenFlow port number `ofport_request` accepts (OFPP_MAX in OpenFlow 1.0 terms).
pub(super) const MAX_OFPORT_REQUEST: u16 = 65279;

/// Re-planning after a stale cache is rare; a few attempts cover concurrent writers.
const MAX_ATTEMPTS: usize = 3;

impl Client {
    /// Plans from the cache and runs the plan; `None` from `plan` means nothing needs doing.
    /// With `wait`, returns once ovs-vswitchd has applied the transaction.
    async fn execute(
        &self,
        wait: bool,
        plan: impl Fn(&Cache) -> Result<Option<Plan>>,
    ) -> Result<()> {
        if let Some(next_cfg) = self.execute_bumping(wait, plan).await? {
            self.wait_for_cfg(next_cfg).await?;
        }
        Ok(())
    }

    /// Like `execute`, but with `bump` it returns the `next_cfg` that ovs-vswitchd will reach
    /// once it has applied the transaction, without waiting for it (`None`: nothing was done
    /// or nothing bumped).
    pub(super) async fn execute_bumping(
        &self,
        bump: bool,
        plan: impl Fn(&Cache) -> Result<Option<Plan>>,
    ) -> Result<Option<i64>> {
        // A plan made from the cache of a dead session would rest on stale rows.
        if !self.connected() {
            return Err(self.disconnected());
        }
        for attempt in 1..=MAX_ATTEMPTS {
            let Some(plan) = self.with_cache(&plan)? else {
                return Ok(None);
            };
            match self.transact_bumping(plan.ops.clone(), bump).await? {
                Ok((results, next_cfg)) => {
                    for (index, table, record) in &plan.must_touch {
                        expect_count(&results, *index, table, record)?;
                    }
                    return Ok(next_cfg);
                }
                Err(err)
                    if err.index.is_some_and(|i| plan.guards.contains(&i))
                        && attempt < MAX_ATTEMPTS =>
                {
                    tracing::debug!(error = %err.error, "cache was stale; planning again");
                }
                Err(err) => return Err(op_error(&plan.ops, err)),
            }
        }
        Err(Error::Conflict(
            "the database kept changing under the operation; giving up".into(),
        ))
    }

    fn waits(&self) -> bool {
        self.options().wait_for_vswitchd
    }

    /// Creates the bridge (with its internal port) or converges its fail_mode, protocols and
    /// datapath_type (`--may-exist add-br` then `set Bridge`).
    pub async fn ensure_bridge(&self, spec: &BridgeSpec) -> Result<()> {
        if spec.name.is_empty() {
            return Err(Error::Invalid("a bridge needs a name".into()));
        }
        let wanted = row([
            ("fail_mode", Datum::optional(spec.fail_mode.as_deref())),
            (
                "protocols",
                Datum::set(spec.protocols.iter().map(String::as_str)),
            ),
            (
                "datapath_type",
                Datum::atom(spec.datapath_type.as_deref().unwrap_or("")),
            ),
        ]);
        self.execute(self.waits(), |cache| {
            Ok(plan_bridge(cache, &spec.name, &wanted))
        })
        .await?;
        if self.waits() {
            // The bridge's own interface shows whether ovs-vswitchd could create the bridge.
            self.with_cache(|cache| check_interface(cache, &spec.name, None))?;
        }
        Ok(())
    }

    /// Adds a port with one interface of the same name to a bridge and returns the OpenFlow
    /// port ovs-vswitchd assigned (`--may-exist add-port BRIDGE NAME -- set Interface NAME …`).
    /// `Bridge.ports` is mutated, never rewritten. If ovs-vswitchd cannot set the interface up,
    /// the error carries its `Interface.error` text; the port stays in the database, as with
    /// ovs-vsctl, and a later call retries it.
    pub async fn add_port(&self, spec: &PortSpec) -> Result<u16> {
        validate_port_spec(spec)?;
        let iface = interface_row(spec);
        // Always wait: the assigned port number is only known once ovs-vswitchd applied it.
        self.execute(true, |cache| plan_add_port(cache, spec, &iface).map(Some))
            .await?;
        self.with_cache(|cache| check_interface(cache, &spec.name, spec.ofport_request))
    }

    /// Removes a port from a bridge; nothing to do when it does not exist (`--if-exists`).
    /// A QoS row only this port used is destroyed with it (QoS is a root table: it would leak).
    pub async fn delete_port(&self, bridge: &str, name: &str) -> Result<()> {
        self.execute(self.waits(), |cache| plan_delete_port(cache, bridge, name))
            .await
    }

    /// Limits what a port sends (the pod's ingress) with a `linux-htb` QoS of `max-rate` bits
    /// per second, or removes the limit with `None`. The previous QoS row is destroyed in the
    /// same transaction, so no QoS row is ever left unreferenced.
    pub async fn set_port_qos_max_rate(&self, port: &str, max_rate_bps: Option<u64>) -> Result<()> {
        if max_rate_bps == Some(0) {
            return Err(Error::Invalid(
                "a max-rate of 0 would block the port; use None".into(),
            ));
        }
        self.execute(self.waits(), |cache| plan_qos(cache, port, max_rate_bps, 0))
            .await
    }

    /// A pod's limits in one transaction: the port's QoS `max-rate` (as
    /// [`Client::set_port_qos_max_rate`]) and its interface's ingress policing (as
    /// [`Client::set_ingress_policing_rate`]), so OVSDB holds both or neither.
    pub async fn set_port_bandwidth(
        &self,
        port: &str,
        max_rate_bps: Option<u64>,
        policing_kbps: u32,
    ) -> Result<()> {
        if max_rate_bps == Some(0) {
            return Err(Error::Invalid(
                "a max-rate of 0 would block the port; use None".into(),
            ));
        }
        self.execute(self.waits(), |cache| {
            plan_bandwidth(cache, port, max_rate_bps, policing_kbps, 0)
        })
        .await
    }

    /// Several port changes in one transaction, in order (one reconfiguration of
    /// ovs-vswitchd, and OVSDB holds all of them or none). When a change adds a port, returns
    /// once ovs-vswitchd applied the transaction, with the added ports it could not set up
    /// (each an [`Error::Interface`]): as with `add_port`, such a port stays in the database.
    pub async fn change_ports(&self, changes: &[PortChange]) -> Result<Vec<Error>> {
        let mut adds = Vec::new();
        for change in changes {
            match change {
                PortChange::Add(spec) => {
                    validate_port_spec(spec)?;
                    adds.push(spec);
                }
                PortChange::Bandwidth {
                    max_rate_bps: Some(0),
                    ..
                } => {
                    return Err(Error::Invalid(
                        "a max-rate of 0 would block the port; use None".into(),
                    ))
                }
                _ => {}
            }
        }
        self.execute(self.waits() || !adds.is_empty(), |cache| {
            plan_port_changes(cache, changes)
        })
        .await?;
        Ok(self.with_cache(|cache| {
            adds.iter()
                .filter_map(|spec| check_interface(cache, &spec.name, spec.ofport_request).err())
                .collect()
        }))
    }

    /// Polices what an interface receives (the pod's egress) at `kbps` kilobits per second;
    /// 0 turns policing off.
    pub async fn set_ingress_policing_rate(&self, iface: &str, kbps: u32) -> Result<()> {
        self.set_columns(
            "Interface",
            iface,
            &[("ingress_policing_rate", Datum::atom(i64::from(kbps)))],
        )
        .await
    }

    /// Points the bridge at these OpenFlow controllers, out-of-band (`set-controller`, then
    /// `connection-mode=out-of-band` on each). Old Controller rows go with the old references.
    pub async fn set_controller<S: AsRef<str>>(&self, bridge: &str, targets: &[S]) -> Result<()> {
        let targets: Vec<&str> = targets.iter().map(AsRef::as_ref).collect();
        self.execute(self.waits(), |cache| {
            plan_controller(cache, bridge, &targets)
        })
        .await
    }
}
