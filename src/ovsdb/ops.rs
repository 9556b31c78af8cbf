//! The typed operations the node needs, each one OVSDB transaction.
//!
//! Each operation is planned from the cache, then sent with a `wait` guard that makes the
//! server check what the plan assumed (e.g. "no Port named p1 exists yet"). If another client
//! changed that in between, the guard aborts the transaction, the cache has meanwhile received
//! the change (the server flushes monitor updates before its reply), and the operation is
//! planned again. Operations are idempotent: `add_port` of an existing port converges its
//! columns (`--may-exist`), `delete_port` of a missing port succeeds (`--if-exists`).

use std::collections::BTreeMap;

use super::client::{expect_count, op_error, Client};
use super::error::{Error, Result};
use super::monitor::Cache;
use super::txn::{Condition, Mutation, Mutator, Operation, Until};
use super::types::{Atom, Datum, Row, Uuid};

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

/// A transaction and what its results must show.
pub(super) struct Plan {
    ops: Vec<Operation>,
    /// The `wait` operations that check the cache's view; a failure of one means "plan again".
    guards: Vec<usize>,
    /// Operations (by index) that must have changed exactly one row, with the table and record.
    must_touch: Vec<(usize, &'static str, String)>,
}

impl Plan {
    fn new() -> Plan {
        Plan {
            ops: Vec::new(),
            guards: Vec::new(),
            must_touch: Vec::new(),
        }
    }

    fn push(&mut self, op: Operation) -> usize {
        self.ops.push(op);
        self.ops.len() - 1
    }

    fn guard(&mut self, op: Operation) {
        let index = self.push(op);
        self.guards.push(index);
    }

    fn touch_one(&mut self, op: Operation, table: &'static str, record: &str) {
        let index = self.push(op);
        self.must_touch.push((index, table, record.to_string()));
    }

    /// `other`'s operations after this plan's, with their checks.
    fn append(&mut self, other: Plan) {
        let base = self.ops.len();
        self.guards.extend(other.guards.iter().map(|i| i + base));
        self.must_touch.extend(
            other
                .must_touch
                .into_iter()
                .map(|(i, table, record)| (i + base, table, record)),
        );
        self.ops.extend(other.ops);
    }
}

/// A `wait` that holds when the rows of `table` matching `conditions` have exactly `rows` in
/// `columns` (an empty `rows`: no row matches).
fn guard_rows(
    table: &str,
    conditions: Vec<Condition>,
    columns: &[&str],
    rows: Vec<Row>,
) -> Operation {
    Operation::Wait {
        table: table.to_string(),
        conditions,
        columns: columns.iter().map(|c| c.to_string()).collect(),
        until: Until::Equal,
        rows,
        timeout_ms: 0,
    }
}

fn named(name: &str) -> Condition {
    Condition::eq("name", name)
}

fn row<const N: usize>(columns: [(&str, Datum); N]) -> Row {
    columns
        .into_iter()
        .map(|(column, datum)| (column.to_string(), datum))
        .collect()
}

fn str_map(map: &BTreeMap<String, String>) -> Datum {
    Datum::map(map.iter().map(|(k, v)| (k.as_str(), v.as_str())))
}

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

fn plan_bridge(cache: &Cache, name: &str, wanted: &Row) -> Option<Plan> {
    let mut plan = Plan::new();
    match cache.find("Bridge", name) {
        Some((_, current)) => {
            if wanted
                .iter()
                .all(|(column, datum)| current.get(column) == Some(datum))
            {
                return None;
            }
            plan.touch_one(
                Operation::Update {
                    table: "Bridge".into(),
                    conditions: vec![named(name)],
                    row: wanted.clone(),
                },
                "Bridge",
                name,
            );
        }
        None => {
            plan.guard(guard_rows("Bridge", vec![named(name)], &["name"], vec![]));
            plan.push(insert(
                "Interface",
                "iface",
                row([("name", name.into()), ("type", "internal".into())]),
            ));
            plan.push(insert(
                "Port",
                "port",
                row([("name", name.into()), ("interfaces", named_uuid("iface"))]),
            ));
            let mut bridge = wanted.clone();
            bridge.insert("name".into(), name.into());
            bridge.insert("ports".into(), named_uuid("port"));
            plan.push(insert("Bridge", "bridge", bridge));
            plan.push(Operation::Mutate {
                table: "Open_vSwitch".into(),
                conditions: vec![],
                mutations: vec![Mutation::new(
                    "bridges",
                    Mutator::Insert,
                    named_uuid("bridge"),
                )],
            });
        }
    }
    Some(plan)
}

pub(super) fn validate_port_spec(spec: &PortSpec) -> Result<()> {
    if spec.name.is_empty() || spec.bridge.is_empty() {
        return Err(Error::Invalid("a port needs a name and a bridge".into()));
    }
    if spec
        .ofport_request
        .is_some_and(|p| p == 0 || p > MAX_OFPORT_REQUEST)
    {
        return Err(Error::Invalid(format!(
            "ofport_request must be 1-{MAX_OFPORT_REQUEST}, not {:?}",
            spec.ofport_request
        )));
    }
    Ok(())
}

/// The Interface columns `spec` asks for.
pub(super) fn interface_row(spec: &PortSpec) -> Row {
    row([
        ("name", Datum::atom(spec.name.as_str())),
        (
            "type",
            Datum::atom(spec.iface_type.as_deref().unwrap_or("")),
        ),
        ("options", str_map(&spec.options)),
        (
            "ofport_request",
            Datum::optional(spec.ofport_request.map(i64::from)),
        ),
    ])
}

pub(super) fn plan_add_port(cache: &Cache, spec: &PortSpec, iface: &Row) -> Result<Plan> {
    let mut plan = Plan::new();
    plan_port_into(&mut plan, cache, spec, iface, 0)?;
    Ok(plan)
}

/// Adds several ports in one transaction (one reconfiguration of ovs-vswitchd instead of one
/// per port). `ports` pairs each spec with its Interface row.
pub(super) fn plan_add_ports(cache: &Cache, ports: &[(PortSpec, Row)]) -> Result<Plan> {
    let mut plan = Plan::new();
    for (tag, (spec, iface)) in ports.iter().enumerate() {
        plan_port_into(&mut plan, cache, spec, iface, tag)?;
    }
    Ok(plan)
}

/// The operations adding one port; `tag` keeps its named uuids apart from other ports'.
fn plan_port_into(
    plan: &mut Plan,
    cache: &Cache,
    spec: &PortSpec,
    iface: &Row,
    tag: usize,
) -> Result<()> {
    let name = spec.name.as_str();
    if cache.find("Bridge", &spec.bridge).is_none() {
        return Err(Error::NotFound {
            table: "Bridge".into(),
            record: spec.bridge.clone(),
        });
    }
    match cache.find("Port", name) {
        Some((port_uuid, port)) => {
            if let Some(other) = cache
                .bridge_of_port(port_uuid)
                .filter(|b| *b != spec.bridge)
            {
                return Err(Error::Conflict(format!(
                    "port {name} already exists on bridge {other}, not {}",
                    spec.bridge
                )));
            }
            let iface_uuid = cache.find("Interface", name).map(|(uuid, _)| uuid);
            let interfaces: Vec<Uuid> = port
                .get("interfaces")
                .map(|d| d.uuids().collect())
                .unwrap_or_default();
            if iface_uuid.is_none() || interfaces != [iface_uuid.unwrap_or_default()] {
                return Err(Error::Conflict(format!(
                    "port {name} exists but does not hold exactly one interface named {name}"
                )));
            }
            // `name` is immutable in OVSDB: even an update to the same value is refused.
            let mut changes = iface.clone();
            changes.remove("name");
            plan.touch_one(
                Operation::Update {
                    table: "Interface".into(),
                    conditions: vec![named(name)],
                    row: changes,
                },
                "Interface",
                name,
            );
            // Inserting into a set is idempotent: this re-attaches the port if it were detached.
            plan.touch_one(
                mutate_set(
                    "Bridge",
                    &spec.bridge,
                    "ports",
                    Mutator::Insert,
                    Datum::atom(port_uuid),
                ),
                "Bridge",
                &spec.bridge,
            );
        }
        None => {
            if cache.find("Interface", name).is_some() {
                return Err(Error::Conflict(format!(
                    "an interface named {name} already exists in another port"
                )));
            }
            let (iface_id, port_id) = (format!("iface{tag}"), format!("port{tag}"));
            plan.guard(guard_rows("Port", vec![named(name)], &["name"], vec![]));
            plan.push(insert("Interface", &iface_id, iface.clone()));
            plan.push(insert(
                "Port",
                &port_id,
                row([("name", name.into()), ("interfaces", named_uuid(&iface_id))]),
            ));
            plan.touch_one(
                mutate_set(
                    "Bridge",
                    &spec.bridge,
                    "ports",
                    Mutator::Insert,
                    named_uuid(&port_id),
                ),
                "Bridge",
                &spec.bridge,
            );
        }
    }
    Ok(())
}

/// The plan of [`Client::change_ports`]; the index of each change is its tag for named uuids.
fn plan_port_changes(cache: &Cache, changes: &[PortChange]) -> Result<Option<Plan>> {
    let mut plan = Plan::new();
    let mut added = Vec::new();
    for (tag, change) in changes.iter().enumerate() {
        let part = match change {
            PortChange::Delete { bridge, name } => plan_delete_port(cache, bridge, name)?,
            PortChange::Add(spec) => {
                plan_port_into(&mut plan, cache, spec, &interface_row(spec), tag)?;
                added.push(spec.name.as_str());
                None
            }
            PortChange::Bandwidth {
                port,
                max_rate_bps,
                policing_kbps,
            } if cache.find("Port", port).is_none() && added.contains(&port.as_str()) => Some(
                plan_new_port_bandwidth(port, *max_rate_bps, *policing_kbps, tag),
            ),
            PortChange::Bandwidth {
                port,
                max_rate_bps,
                policing_kbps,
            } => plan_bandwidth(cache, port, *max_rate_bps, *policing_kbps, tag)?,
        };
        if let Some(part) = part {
            plan.append(part);
        }
    }
    Ok((!plan.ops.is_empty()).then_some(plan))
}

/// The limits of a port inserted earlier in the same transaction (it has no QoS row yet; its
/// rows are found by name like committed ones).
fn plan_new_port_bandwidth(
    port: &str,
    max_rate: Option<u64>,
    policing_kbps: u32,
    tag: usize,
) -> Plan {
    let mut plan = Plan::new();
    if let Some(rate) = max_rate {
        let name = format!("qos{tag}");
        plan.push(insert(
            "QoS",
            &name,
            row([
                ("type", "linux-htb".into()),
                ("other_config", Datum::map([("max-rate", rate.to_string())])),
            ]),
        ));
        plan.touch_one(
            Operation::Update {
                table: "Port".into(),
                conditions: vec![named(port)],
                row: row([("qos", named_uuid(&name))]),
            },
            "Port",
            port,
        );
    }
    plan.touch_one(
        Operation::Update {
            table: "Interface".into(),
            conditions: vec![named(port)],
            row: row([(
                "ingress_policing_rate",
                Datum::atom(i64::from(policing_kbps)),
            )]),
        },
        "Interface",
        port,
    );
    plan
}

fn plan_delete_port(cache: &Cache, bridge: &str, name: &str) -> Result<Option<Plan>> {
    let Some((port_uuid, port)) = cache.find("Port", name) else {
        return Ok(None);
    };
    let owner = cache.bridge_of_port(port_uuid);
    if let Some(other) = owner.filter(|b| *b != bridge) {
        return Err(Error::Conflict(format!(
            "port {name} is on bridge {other}, not {bridge}"
        )));
    }
    let mut plan = Plan::new();
    let qos = port.get("qos").cloned().unwrap_or_else(Datum::empty);
    // The QoS decision below rests on the cached value of Port.qos.
    plan.guard(guard_rows(
        "Port",
        vec![Condition::uuid(port_uuid)],
        &["qos"],
        vec![row([("qos", qos.clone())])],
    ));
    plan.push(mutate_set(
        "Bridge",
        bridge,
        "ports",
        Mutator::Delete,
        Datum::atom(port_uuid),
    ));
    // Deleting the Port row itself (not leaving it to garbage collection) drops its reference
    // to the QoS row before the commit counts references.
    plan.push(Operation::Delete {
        table: "Port".into(),
        conditions: vec![Condition::uuid(port_uuid)],
    });
    push_qos_destroy(&mut plan, cache, qos.as_uuid(), port_uuid);
    Ok(Some(plan))
}

/// `tag` keeps the new QoS row's named uuid apart from other changes' in one transaction.
fn plan_qos(cache: &Cache, port: &str, max_rate: Option<u64>, tag: usize) -> Result<Option<Plan>> {
    let (port_uuid, current_port) = cache.find("Port", port).ok_or_else(|| Error::NotFound {
        table: "Port".into(),
        record: port.to_string(),
    })?;
    let current = current_port
        .get("qos")
        .cloned()
        .unwrap_or_else(Datum::empty);
    let current_uuid = current.as_uuid();
    let wanted_config = max_rate.map(|rate| Datum::map([("max-rate", rate.to_string())]));
    let current_row = current_uuid.and_then(|uuid| cache.row("QoS", uuid));
    let unchanged = match (current_row, &wanted_config) {
        (None, None) => current_uuid.is_none(),
        (Some(qos), Some(config)) => {
            qos.get("type").and_then(Datum::as_str) == Some("linux-htb")
                && qos.get("other_config") == Some(config)
                && qos.get("queues").is_none_or(Datum::is_empty)
        }
        _ => false,
    };
    if unchanged {
        return Ok(None);
    }
    let mut plan = Plan::new();
    plan.guard(guard_rows(
        "Port",
        vec![named(port)],
        &["qos"],
        vec![row([("qos", current)])],
    ));
    let new_qos = match wanted_config {
        Some(config) => {
            let name = format!("qos{tag}");
            plan.push(insert(
                "QoS",
                &name,
                row([("type", "linux-htb".into()), ("other_config", config)]),
            ));
            named_uuid(&name)
        }
        None => Datum::empty(),
    };
    plan.touch_one(
        Operation::Update {
            table: "Port".into(),
            conditions: vec![named(port)],
            row: row([("qos", new_qos)]),
        },
        "Port",
        port,
    );
    push_qos_destroy(&mut plan, cache, current_uuid, port_uuid);
    Ok(Some(plan))
}

fn plan_bandwidth(
    cache: &Cache,
    port: &str,
    max_rate: Option<u64>,
    policing_kbps: u32,
    tag: usize,
) -> Result<Option<Plan>> {
    let qos = plan_qos(cache, port, max_rate, tag)?;
    let policing = i64::from(policing_kbps);
    let policed = cache
        .column("Interface", port, "ingress_policing_rate")
        .and_then(Datum::as_i64);
    if policed == Some(policing) {
        return Ok(qos);
    }
    let mut plan = qos.unwrap_or_else(Plan::new);
    plan.touch_one(
        Operation::Update {
            table: "Interface".into(),
            conditions: vec![named(port)],
            row: row([("ingress_policing_rate", Datum::atom(policing))]),
        },
        "Interface",
        port,
    );
    Ok(Some(plan))
}

/// Destroys a QoS row that no port other than `changed` (already detached from it by the
/// plan's earlier operations) refers to. Which ports use the row comes from the cache, so a
/// guard makes the server check it: if another client attached the row to a port meanwhile
/// (the delete would fail referential integrity) or detached it from one (the row would be
/// left unreferenced: QoS is a root table), the transaction is planned again.
fn push_qos_destroy(plan: &mut Plan, cache: &Cache, qos: Option<Uuid>, changed: Uuid) {
    let Some(qos) = qos else {
        return;
    };
    let others: Vec<Row> = cache
        .qos_users(qos)
        .filter(|port| *port != changed)
        .map(|port| row([("_uuid", Datum::atom(port))]))
        .collect();
    let destroy = others.is_empty();
    plan.guard(guard_rows(
        "Port",
        vec![Condition::eq("qos", qos)],
        &["_uuid"],
        others,
    ));
    if destroy {
        plan.push(Operation::Delete {
            table: "QoS".into(),
            conditions: vec![Condition::uuid(qos)],
        });
    }
}

fn plan_controller(cache: &Cache, bridge: &str, targets: &[&str]) -> Result<Option<Plan>> {
    let (_, current) = cache
        .find("Bridge", bridge)
        .ok_or_else(|| Error::NotFound {
            table: "Bridge".into(),
            record: bridge.to_string(),
        })?;
    let current: Vec<(String, Option<String>)> = current
        .get("controller")
        .map(|d| {
            d.uuids()
                .filter_map(|uuid| cache.row("Controller", uuid))
                .map(|c| {
                    (
                        c.get("target")
                            .and_then(Datum::as_str)
                            .unwrap_or_default()
                            .to_string(),
                        c.get("connection_mode")
                            .and_then(Datum::as_str)
                            .map(str::to_string),
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    let mut wanted: Vec<(String, Option<String>)> = targets
        .iter()
        .map(|t| (t.to_string(), Some("out-of-band".to_string())))
        .collect();
    wanted.sort();
    wanted.dedup();
    let mut sorted_current = current;
    sorted_current.sort();
    if sorted_current == wanted {
        return Ok(None);
    }
    let mut plan = Plan::new();
    let mut refs = Vec::new();
    for (i, (target, _)) in wanted.iter().enumerate() {
        let name = format!("controller{i}");
        plan.push(insert(
            "Controller",
            &name,
            row([
                ("target", target.as_str().into()),
                ("connection_mode", "out-of-band".into()),
            ]),
        ));
        refs.push(Atom::NamedUuid(name));
    }
    // Controller rows are not a root table: the ones no bridge refers to any more are
    // garbage-collected at commit.
    plan.touch_one(
        Operation::Update {
            table: "Bridge".into(),
            conditions: vec![named(bridge)],
            row: row([("controller", Datum::Set(refs.into_iter().collect()))]),
        },
        "Bridge",
        bridge,
    );
    Ok(Some(plan))
}

/// After ovs-vswitchd applied the configuration: the interface's OpenFlow port, or why there
/// is none.
pub(super) fn check_interface(cache: &Cache, name: &str, requested: Option<u16>) -> Result<u16> {
    let (_, iface) = cache
        .find("Interface", name)
        .ok_or_else(|| Error::NotFound {
            table: "Interface".into(),
            record: name.to_string(),
        })?;
    let ofport = iface.get("ofport").and_then(Datum::as_i64);
    let error = iface.get("error").and_then(Datum::as_str);
    let assigned = match ofport {
        Some(port) if port > 0 => port,
        _ => {
            return Err(Error::Interface {
                name: name.to_string(),
                error: error
                    .unwrap_or("ovs-vswitchd assigned no OpenFlow port")
                    .to_string(),
            })
        }
    };
    if let Some(requested) = requested.filter(|r| i64::from(*r) != assigned) {
        return Err(Error::OfportMismatch {
            name: name.to_string(),
            requested,
            assigned,
        });
    }
    u16::try_from(assigned).map_err(|_| {
        Error::Protocol(format!(
            "interface {name} has OpenFlow port {assigned}, beyond 16 bits"
        ))
    })
}

fn insert(table: &str, uuid_name: &str, row: Row) -> Operation {
    Operation::Insert {
        table: table.to_string(),
        row,
        uuid_name: Some(uuid_name.to_string()),
    }
}

fn named_uuid(name: &str) -> Datum {
    Datum::atom(Atom::NamedUuid(name.to_string()))
}

fn mutate_set(table: &str, name: &str, column: &str, mutator: Mutator, value: Datum) -> Operation {
    Operation::Mutate {
        table: table.to_string(),
        conditions: vec![named(name)],
        mutations: vec![Mutation::new(column, mutator, value)],
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ovsdb::monitor::parse_table_updates;
    use serde_json::json;

    const BR: &str = "10000000-0000-4000-8000-000000000001";
    const PORT: &str = "10000000-0000-4000-8000-000000000002";
    const IFACE: &str = "10000000-0000-4000-8000-000000000003";
    const QOS: &str = "10000000-0000-4000-8000-000000000004";

    fn cache_with_port(qos: serde_json::Value) -> Cache {
        Cache::from_initial(
            &parse_table_updates(&json!({
                "Bridge": {BR: {"new": {"name": "br0", "ports": ["uuid", PORT]}}},
                "Port": {PORT: {"new": {"name": "p1", "interfaces": ["uuid", IFACE], "qos": qos}}},
                "Interface": {IFACE: {"new": {"name": "p1", "ofport": 3, "error": ["set", []]}}},
                "QoS": {QOS: {"new": {"type": "linux-htb", "other_config": ["map", [["max-rate", "1000"]]],
                                      "queues": ["map", []]}}},
            }))
            .unwrap(),
        )
    }

    fn spec(name: &str) -> PortSpec {
        PortSpec {
            bridge: "br0".into(),
            name: name.into(),
            ..PortSpec::default()
        }
    }

    #[test]
    fn new_port_mutates_bridge_ports_never_rewrites_them() {
        let cache = cache_with_port(json!(["set", []]));
        let plan = plan_add_port(&cache, &spec("p2"), &Row::new()).unwrap();
        let json: Vec<_> = plan.ops.iter().map(Operation::to_json).collect();
        assert_eq!(json[0]["op"], "wait");
        let bridge_ops: Vec<_> = json.iter().filter(|op| op["table"] == "Bridge").collect();
        assert_eq!(bridge_ops.len(), 1);
        assert_eq!(bridge_ops[0]["op"], "mutate");
        assert_eq!(bridge_ops[0]["mutations"][0][1], "insert");
    }

    #[test]
    fn existing_port_on_another_bridge_is_a_conflict() {
        let cache = cache_with_port(json!(["set", []]));
        let mut other = spec("p1");
        other.bridge = "br1".into();
        assert!(matches!(
            plan_add_port(&cache, &other, &Row::new()),
            Err(Error::NotFound { .. })
        ));
        let mut merged = cache;
        merged.apply(&parse_table_updates(&json!({"Bridge": {
            "20000000-0000-4000-8000-000000000001": {"new": {"name": "br1", "ports": ["set", []]}}}})).unwrap());
        assert!(matches!(
            plan_add_port(&merged, &other, &Row::new()),
            Err(Error::Conflict(_))
        ));
    }

    #[test]
    fn qos_replace_destroys_the_old_row_in_the_same_transaction() {
        let cache = cache_with_port(json!(["uuid", QOS]));
        let plan = plan_qos(&cache, "p1", Some(2000), 0).unwrap().unwrap();
        let ops: Vec<_> = plan.ops.iter().map(Operation::to_json).collect();
        assert!(ops
            .iter()
            .any(|op| op["op"] == "insert" && op["table"] == "QoS"));
        assert!(ops.iter().any(|op| op["op"] == "delete"
            && op["table"] == "QoS"
            && op["where"][0][2] == json!(["uuid", QOS])));
        // Same rate: nothing to do.
        assert!(plan_qos(&cache, "p1", Some(1000), 0).unwrap().is_none());
        // Removal: clear and destroy.
        let plan = plan_qos(&cache, "p1", None, 0).unwrap().unwrap();
        assert!(plan
            .ops
            .iter()
            .any(|op| matches!(op, Operation::Delete { table, .. } if table == "QoS")));
    }

    /// The `wait` guard of a plan on the users of the QoS row, as JSON.
    fn qos_users_guard(plan: &Plan) -> serde_json::Value {
        plan.guards
            .iter()
            .map(|i| plan.ops[*i].to_json())
            .find(|op| op["where"][0][0] == "qos")
            .expect("a guard on the QoS row's users")
    }

    #[test]
    fn qos_destroy_rests_on_a_guard_of_the_rows_other_users() {
        let cache = cache_with_port(json!(["uuid", QOS]));
        let destroys = |plan: &Plan| {
            plan.ops
                .iter()
                .any(|op| matches!(op, Operation::Delete { table, .. } if table == "QoS"))
        };
        let plan = plan_delete_port(&cache, "br0", "p1").unwrap().unwrap();
        assert_eq!(qos_users_guard(&plan)["rows"], json!([]));
        assert!(destroys(&plan));

        // Another port uses the row too: keep it, and have the server check that it still does.
        const P2: &str = "10000000-0000-4000-8000-000000000005";
        let mut shared = cache;
        shared.apply(
            &parse_table_updates(&json!({"Port": {P2: {"new": {
            "name": "p2", "interfaces": ["set", []], "qos": ["uuid", QOS]}}}}))
            .unwrap(),
        );
        for plan in [
            plan_delete_port(&shared, "br0", "p1").unwrap().unwrap(),
            plan_qos(&shared, "p1", None, 0).unwrap().unwrap(),
        ] {
            assert_eq!(
                qos_users_guard(&plan)["rows"],
                json!([{"_uuid": ["uuid", P2]}])
            );
            assert!(!destroys(&plan));
        }
    }

    #[test]
    fn port_changes_are_one_plan_with_distinct_names_and_limits_of_a_port_it_adds() {
        let cache = cache_with_port(json!(["uuid", QOS]));
        let changes = [
            PortChange::Delete {
                bridge: "br0".into(),
                name: "p1".into(),
            },
            PortChange::Add(spec("p2")),
            PortChange::Bandwidth {
                port: "p2".into(),
                max_rate_bps: Some(3000),
                policing_kbps: 7,
            },
            PortChange::Add(spec("p3")),
            PortChange::Bandwidth {
                port: "p3".into(),
                max_rate_bps: Some(4000),
                policing_kbps: 0,
            },
        ];
        let plan = plan_port_changes(&cache, &changes).unwrap().unwrap();
        let ops: Vec<_> = plan.ops.iter().map(Operation::to_json).collect();
        let mut names: Vec<_> = ops
            .iter()
            .filter_map(|op| op["uuid-name"].as_str())
            .collect();
        assert_eq!(names.len(), 6, "{ops:#?}");
        names.sort();
        names.dedup();
        assert_eq!(names.len(), 6, "named uuids are unique in the transaction");
        // p1 goes with its QoS row; p2 and p3 get theirs by the names inserted earlier.
        assert!(ops
            .iter()
            .any(|op| op["op"] == "delete" && op["table"] == "QoS"));
        for (port, qos, kbps) in [("p2", "qos2", 7), ("p3", "qos4", 0)] {
            assert!(ops.iter().any(|op| op["op"] == "update"
                && op["table"] == "Port"
                && op["where"][0][2] == port
                && op["row"]["qos"] == json!(["named-uuid", qos])));
            assert!(ops.iter().any(|op| op["op"] == "update"
                && op["table"] == "Interface"
                && op["where"][0][2] == port
                && op["row"]["ingress_policing_rate"] == kbps));
        }
        // Every guard and count check points at the operation it was made for.
        assert!(plan.guards.iter().all(|i| ops[*i]["op"] == "wait"));
        assert!(plan
            .must_touch
            .iter()
            .all(|(i, table, _)| ops[*i]["table"] == *table));
        // Nothing to change: no transaction.
        let none = [PortChange::Delete {
            bridge: "br0".into(),
            name: "gone".into(),
        }];
        assert!(plan_port_changes(&cache, &none).unwrap().is_none());
        // Limits of a port neither there nor added: the port is named.
        let orphan = [PortChange::Bandwidth {
            port: "p9".into(),
            max_rate_bps: None,
            policing_kbps: 1,
        }];
        assert!(matches!(
            plan_port_changes(&cache, &orphan),
            Err(Error::NotFound { record, .. }) if record == "p9"
        ));
    }

    #[test]
    fn delete_of_missing_port_does_nothing() {
        let cache = cache_with_port(json!(["set", []]));
        assert!(plan_delete_port(&cache, "br0", "nope").unwrap().is_none());
        assert!(plan_delete_port(&cache, "br0", "p1").unwrap().is_some());
        assert!(matches!(
            plan_delete_port(&cache, "br9", "p1"),
            Err(Error::Conflict(_))
        ));
    }

    #[test]
    fn interface_errors_and_mismatches_are_reported() {
        let cache = cache_with_port(json!(["set", []]));
        assert_eq!(check_interface(&cache, "p1", None).unwrap(), 3);
        assert!(matches!(
            check_interface(&cache, "p1", Some(4)),
            Err(Error::OfportMismatch {
                requested: 4,
                assigned: 3,
                ..
            })
        ));
        let mut failed = cache.clone();
        failed.apply(&parse_table_updates(&json!({"Interface": {IFACE: {"new": {
            "name": "p1", "ofport": -1, "error": "could not open network device p1 (No such device)"}}}}))
        .unwrap());
        assert!(matches!(check_interface(&failed, "p1", None),
            Err(Error::Interface { error, .. }) if error.contains("No such device")));
    }
}
