//! The local cache of the tables the node uses, kept by an OVSDB `monitor` (RFC 7047 §4.1.5).
//!
//! After every (re)connection the client sends a fresh `monitor`; its reply holds every row and
//! replaces the cache, and `update` notifications keep it current. Monitor version 1 sends the
//! whole new row (all monitored columns) for an insert or modify, so applying an update is a plain
//! replace.

use std::collections::BTreeMap;

use serde_json::{json, Map, Value};

use super::types::{row_from_json, Datum, FormatError, Row, Uuid};

/// What ofnode knows about a table: its name, the column that names a record (as ovs-vsctl
/// lets one name a Bridge or Port), and the columns the cache follows (none: not cached).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TableSpec {
    pub name: &'static str,
    pub key: Option<&'static str>,
    pub monitored: &'static [&'static str],
}

/// One place per table. Monitored columns leave out what ovs-vswitchd rewrites on its own every
/// few seconds (statistics, status, link state), which would only churn the cache.
pub const TABLES: &[TableSpec] = &[
    TableSpec {
        name: "Open_vSwitch",
        key: None,
        monitored: &[
            "bridges",
            "cur_cfg",
            "next_cfg",
            "ovs_version",
            "other_config",
            "external_ids",
        ],
    },
    TableSpec {
        name: "Bridge",
        key: Some("name"),
        monitored: &[
            "name",
            "ports",
            "controller",
            "fail_mode",
            "protocols",
            "datapath_type",
            "other_config",
            // Not external_ids: under HA they hold the replicated desired state (megabytes at
            // 10,000 pods), which this monitor would send whole, old and new, at every batch;
            // whoever needs them selects them.
        ],
    },
    TableSpec {
        name: "Port",
        key: Some("name"),
        monitored: &[
            "name",
            "interfaces",
            "qos",
            "tag",
            "other_config",
            "external_ids",
        ],
    },
    TableSpec {
        name: "Interface",
        key: Some("name"),
        monitored: &[
            "name",
            "type",
            "options",
            "ofport",
            "ofport_request",
            "error",
            "ingress_policing_rate",
            "ingress_policing_burst",
            "mtu_request",
            "other_config",
            "external_ids",
        ],
    },
    TableSpec {
        name: "QoS",
        key: None,
        monitored: &["type", "other_config", "queues", "external_ids"],
    },
    TableSpec {
        name: "Controller",
        key: None,
        monitored: &["target", "connection_mode", "external_ids"],
    },
    TableSpec {
        name: "Queue",
        key: None,
        monitored: &[],
    },
    TableSpec {
        name: "Manager",
        key: Some("target"),
        monitored: &[],
    },
    TableSpec {
        name: "Mirror",
        key: Some("name"),
        monitored: &[],
    },
    TableSpec {
        name: "Flow_Table",
        key: Some("name"),
        monitored: &[],
    },
];

/// The spec of a table named in any letter case ("port", "qos"), as ovs-vsctl accepts them.
pub fn table_spec(name: &str) -> Option<&'static TableSpec> {
    TABLES
        .iter()
        .find(|spec| spec.name.eq_ignore_ascii_case(name))
}

/// The `monitor` request's parameters for every cached table.
pub fn monitor_params(database: &str, monitor_id: &str) -> Value {
    let requests: Map<String, Value> = TABLES
        .iter()
        .filter(|spec| !spec.monitored.is_empty())
        .map(|spec| (spec.name.to_string(), json!({"columns": spec.monitored})))
        .collect();
    json!([database, monitor_id, requests])
}

/// One row's change: `new` absent means deleted, `old` absent means inserted.
#[derive(Debug, Clone, PartialEq)]
pub struct RowUpdate {
    pub old: Option<Row>,
    pub new: Option<Row>,
}

/// table → row uuid → change.
pub type TableUpdates = BTreeMap<String, BTreeMap<Uuid, RowUpdate>>;

pub fn parse_table_updates(value: &Value) -> Result<TableUpdates, FormatError> {
    let tables = value
        .as_object()
        .ok_or_else(|| FormatError::new("table-updates", value))?;
    tables
        .iter()
        .map(|(table, rows)| Ok((table.clone(), parse_table_update(rows)?)))
        .collect()
}

fn parse_table_update(value: &Value) -> Result<BTreeMap<Uuid, RowUpdate>, FormatError> {
    let rows = value
        .as_object()
        .ok_or_else(|| FormatError::new("table-update", value))?;
    rows.iter()
        .map(|(uuid, change)| {
            let uuid = Uuid::parse_str(uuid)
                .map_err(|_| FormatError::new("row uuid", &Value::String(uuid.clone())))?;
            let optional_row = |key: &str| change.get(key).map(row_from_json).transpose();
            if !change.is_object() {
                return Err(FormatError::new("row-update", change));
            }
            Ok((
                uuid,
                RowUpdate {
                    old: optional_row("old")?,
                    new: optional_row("new")?,
                },
            ))
        })
        .collect()
}

#[derive(Debug, Clone, Default, PartialEq)]
struct TableCache {
    rows: BTreeMap<Uuid, Row>,
    /// key column value → row, for tables whose spec names a key column.
    by_key: BTreeMap<String, Uuid>,
}

impl TableCache {
    fn remove(&mut self, uuid: &Uuid, key: Option<&str>) {
        if let (Some(old), Some(key)) = (self.rows.remove(uuid), key) {
            if let Some(name) = old.get(key).and_then(Datum::as_str) {
                if self.by_key.get(name) == Some(uuid) {
                    self.by_key.remove(name);
                }
            }
        }
    }

    fn insert(&mut self, uuid: Uuid, row: Row, key: Option<&str>) {
        self.remove(&uuid, key);
        if let Some(name) = key.and_then(|key| row.get(key)).and_then(Datum::as_str) {
            self.by_key.insert(name.to_string(), uuid);
        }
        self.rows.insert(uuid, row);
    }
}

/// The cached rows of the monitored tables.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Cache {
    tables: BTreeMap<String, TableCache>,
}

impl Cache {
    /// A cache holding exactly the rows of a monitor reply.
    pub fn from_initial(updates: &TableUpdates) -> Cache {
        let mut cache = Cache::default();
        cache.apply(updates);
        cache
    }

    pub fn apply(&mut self, updates: &TableUpdates) {
        for (table, rows) in updates {
            let key = table_spec(table).and_then(|spec| spec.key);
            let cached = self.tables.entry(table.clone()).or_default();
            for (uuid, change) in rows {
                match &change.new {
                    Some(new) => cached.insert(*uuid, new.clone(), key),
                    None => cached.remove(uuid, key),
                }
            }
        }
    }

    /// Every cached row of `table`.
    pub fn rows(&self, table: &str) -> impl Iterator<Item = (Uuid, &Row)> {
        self.tables
            .get(table)
            .into_iter()
            .flat_map(|cached| cached.rows.iter().map(|(uuid, row)| (*uuid, row)))
    }

    pub fn row(&self, table: &str, uuid: Uuid) -> Option<&Row> {
        self.tables.get(table)?.rows.get(&uuid)
    }

    /// The row of `table` whose key column (Bridge/Port/Interface `name`) is `name`.
    pub fn find(&self, table: &str, name: &str) -> Option<(Uuid, &Row)> {
        let cached = self.tables.get(table)?;
        let uuid = *cached.by_key.get(name)?;
        cached.rows.get(&uuid).map(|row| (uuid, row))
    }

    /// A column of the row found by [`Cache::find`].
    pub fn column(&self, table: &str, name: &str, column: &str) -> Option<&Datum> {
        self.find(table, name)?.1.get(column)
    }

    /// The OpenFlow port number ovs-vswitchd gave an interface (-1 when it failed, `None` while
    /// not yet assigned or when the interface does not exist).
    pub fn ofport(&self, iface: &str) -> Option<i64> {
        self.column("Interface", iface, "ofport")?.as_i64()
    }

    /// The single Open_vSwitch row.
    pub fn open_vswitch(&self) -> Option<(Uuid, &Row)> {
        self.rows("Open_vSwitch").next()
    }

    /// The configuration generation ovs-vswitchd has applied.
    pub fn cur_cfg(&self) -> Option<i64> {
        self.open_vswitch()?.1.get("cur_cfg")?.as_i64()
    }

    /// The version ovs-vswitchd wrote at its start (`"3.1.0"`); `None` before it has.
    pub fn ovs_version(&self) -> Option<&str> {
        self.open_vswitch()?.1.get("ovs_version")?.as_str()
    }

    /// The name of the bridge whose `ports` holds `port`.
    pub fn bridge_of_port(&self, port: Uuid) -> Option<&str> {
        self.rows("Bridge")
            .find(|(_, row)| {
                row.get("ports")
                    .is_some_and(|ports| ports.uuids().any(|p| p == port))
            })
            .and_then(|(_, row)| row.get("name")?.as_str())
    }

    /// The ports that refer to a QoS row.
    pub fn qos_users(&self, qos: Uuid) -> impl Iterator<Item = Uuid> + '_ {
        self.rows("Port")
            .filter(move |(_, row)| row.get("qos").and_then(Datum::as_uuid) == Some(qos))
            .map(|(uuid, _)| uuid)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const P1: &str = "11111111-1111-4111-8111-111111111111";
    const I1: &str = "22222222-2222-4222-8222-222222222222";

    fn updates(value: Value) -> TableUpdates {
        parse_table_updates(&value).unwrap()
    }

    #[test]
    fn initial_rows_then_modify_and_delete() {
        let mut cache = Cache::from_initial(&updates(json!({
            "Port": {P1: {"new": {"name": "p1", "interfaces": ["uuid", I1], "qos": ["set", []]}}},
            "Interface": {I1: {"new": {"name": "p1", "ofport": ["set", []]}}},
        })));
        assert_eq!(cache.ofport("p1"), None);
        cache.apply(&updates(json!({
            "Interface": {I1: {"old": {"ofport": ["set", []]}, "new": {"name": "p1", "ofport": 5}}},
        })));
        assert_eq!(cache.ofport("p1"), Some(5));
        // A rename moves the name index.
        cache.apply(&updates(json!({
            "Interface": {I1: {"old": {"name": "p1"}, "new": {"name": "p2", "ofport": 5}}},
        })));
        assert_eq!(cache.ofport("p1"), None);
        assert_eq!(cache.ofport("p2"), Some(5));
        cache.apply(&updates(
            json!({"Interface": {I1: {"old": {"name": "p2"}}}}),
        ));
        assert_eq!(cache.ofport("p2"), None);
        assert_eq!(cache.rows("Interface").count(), 0);
        assert!(cache.find("Port", "p1").is_some());
    }

    #[test]
    fn ovs_version_appears_once_ovs_vswitchd_wrote_it() {
        const OVS: &str = "33333333-3333-4333-8333-333333333333";
        let mut cache = Cache::from_initial(&updates(json!({
            "Open_vSwitch": {OVS: {"new": {"cur_cfg": 0, "ovs_version": ["set", []]}}},
        })));
        assert_eq!(cache.ovs_version(), None);
        cache.apply(&updates(json!({
            "Open_vSwitch": {OVS: {"old": {"ovs_version": ["set", []]}, "new": {"cur_cfg": 1, "ovs_version": "3.1.0"}}},
        })));
        assert_eq!(cache.ovs_version(), Some("3.1.0"));
    }

    #[test]
    fn malformed_updates_are_errors() {
        for bad in [
            json!([]),
            json!({"Port": []}),
            json!({"Port": {"not-a-uuid": {}}}),
            json!({"Port": {P1: 1}}),
            json!({"Port": {P1: {"new": 1}}}),
        ] {
            assert!(parse_table_updates(&bad).is_err(), "{bad} accepted");
        }
    }

    #[test]
    fn monitor_request_names_every_cached_table() {
        let params = monitor_params("Open_vSwitch", "ofnode");
        for table in [
            "Open_vSwitch",
            "Bridge",
            "Port",
            "Interface",
            "QoS",
            "Controller",
        ] {
            assert!(
                params[2][table]["columns"].is_array(),
                "{table} not monitored"
            );
        }
        assert!(params[2].get("Queue").is_none());
    }
}
