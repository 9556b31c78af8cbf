//! Plans for ports and their interfaces, and what ovs-vswitchd made of an interface.

use super::plan::{guard_rows, insert, mutate_set, named, named_uuid, row, str_map, Plan};
use super::qos::{plan_bandwidth, push_qos_destroy};
use super::{PortChange, PortSpec, MAX_OFPORT_REQUEST};
use crate::ovsdb::error::{Error, Result};
use crate::ovsdb::monitor::Cache;
use crate::ovsdb::txn::{Condition, Mutator, Operation};
use crate::ovsdb::types::{Datum, Row, Uuid};

pub(in crate::ovsdb) fn validate_port_spec(spec: &PortSpec) -> Result<()> {
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
pub(in crate::ovsdb) fn interface_row(spec: &PortSpec) -> Row {
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
pub(in crate::ovsdb) fn plan_add_ports(cache: &Cache, ports: &[(PortSpec, Row)]) -> Result<Plan> {
    let mut plan = Plan::new();
    for (tag, (spec, iface)) in ports.iter().enumerate() {
        plan_port_into(&mut plan, cache, spec, iface, tag)?;
    }
    Ok(plan)
}

/// The operations adding one port; `tag` keeps its named uuids apart from other ports'.
pub(super) fn plan_port_into(
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
            attach_port(plan, &spec.bridge, Datum::atom(port_uuid));
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
            attach_port(plan, &spec.bridge, named_uuid(&port_id));
        }
    }
    Ok(())
}

/// Adds `port` to `bridge`'s ports (`Bridge.ports` is mutated, never rewritten); the bridge
/// must exist.
fn attach_port(plan: &mut Plan, bridge: &str, port: Datum) {
    plan.touch_one(
        mutate_set("Bridge", bridge, "ports", Mutator::Insert, port),
        "Bridge",
        bridge,
    );
}

/// The plan of [`Client::change_ports`]; the index of each change is its tag for named uuids.
pub(super) fn plan_port_changes(cache: &Cache, changes: &[PortChange]) -> Result<Option<Plan>> {
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
pub(super) fn plan_new_port_bandwidth(
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

pub(super) fn plan_delete_port(cache: &Cache, bridge: &str, name: &str) -> Result<Option<Plan>> {
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

/// After ovs-vswitchd applied the configuration: the interface's OpenFlow port, or why there
/// is none.
pub(in crate::ovsdb) fn check_interface(
    cache: &Cache,
    name: &str,
    requested: Option<u16>,
) -> Result<u16> {
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
