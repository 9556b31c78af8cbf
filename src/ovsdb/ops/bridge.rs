//! Plans for the bridge and its controllers.

use super::plan::{guard_rows, insert, named, named_uuid, row, Plan};
use crate::ovsdb::error::{Error, Result};
use crate::ovsdb::monitor::Cache;
use crate::ovsdb::txn::{Mutation, Mutator, Operation};
use crate::ovsdb::types::{Atom, Datum, Row};

pub(super) fn plan_bridge(cache: &Cache, name: &str, wanted: &Row) -> Option<Plan> {
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

pub(super) fn plan_controller(
    cache: &Cache,
    bridge: &str,
    targets: &[&str],
) -> Result<Option<Plan>> {
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
