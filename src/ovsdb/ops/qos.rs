//! Plans for a port's QoS row and its interface's policing.

use super::plan::{guard_rows, insert, named, named_uuid, row, Plan};
use crate::ovsdb::error::{Error, Result};
use crate::ovsdb::monitor::Cache;
use crate::ovsdb::txn::{Condition, Operation};
use crate::ovsdb::types::{Datum, Row, Uuid};

/// `tag` keeps the new QoS row's named uuid apart from other changes' in one transaction.
pub(super) fn plan_qos(
    cache: &Cache,
    port: &str,
    max_rate: Option<u64>,
    tag: usize,
) -> Result<Option<Plan>> {
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

pub(super) fn plan_bandwidth(
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
pub(super) fn push_qos_destroy(plan: &mut Plan, cache: &Cache, qos: Option<Uuid>, changed: Uuid) {
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
