//! The plans, made from a cache without a server.

use super::*;
use crate::ovsdb::monitor::parse_table_updates;
use crate::ovsdb::txn::Operation;
use crate::ovsdb::types::Row;
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
    merged.apply(
        &parse_table_updates(&json!({"Bridge": {
        "20000000-0000-4000-8000-000000000001": {"new": {"name": "br1", "ports": ["set", []]}}}}))
        .unwrap(),
    );
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
