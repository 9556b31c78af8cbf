//! What ofnode needs from the database schema (RFC 7047 §3.2): which columns are maps.
//!
//! JSON alone cannot say whether an empty value is an empty set or an empty map, and the server
//! rejects the wrong one (`expected ["map", <array>]`), so clearing a column needs the schema.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use super::types::{Datum, FormatError};

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Schema {
    pub name: String,
    pub version: String,
    /// table → its map-typed columns.
    map_columns: BTreeMap<String, BTreeSet<String>>,
}

impl Schema {
    pub fn from_json(value: &Value) -> Result<Schema, FormatError> {
        let bad = || FormatError::new("schema", value);
        let tables = value
            .get("tables")
            .and_then(Value::as_object)
            .ok_or_else(bad)?;
        let mut map_columns = BTreeMap::new();
        for (table, spec) in tables {
            let columns = spec
                .get("columns")
                .and_then(Value::as_object)
                .ok_or_else(bad)?;
            let maps = columns
                .iter()
                .filter(|(_, column)| column.get("type").and_then(|t| t.get("value")).is_some())
                .map(|(name, _)| name.clone())
                .collect();
            map_columns.insert(table.clone(), maps);
        }
        let text = |key: &str| {
            value
                .get(key)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string()
        };
        Ok(Schema {
            name: text("name"),
            version: text("version"),
            map_columns,
        })
    }

    pub fn has_table(&self, table: &str) -> bool {
        self.map_columns.contains_key(table)
    }

    pub fn is_map(&self, table: &str, column: &str) -> bool {
        self.map_columns
            .get(table)
            .is_some_and(|maps| maps.contains(column))
    }

    /// The empty value of a column, in the form the server accepts for it.
    pub fn empty_value(&self, table: &str, column: &str) -> Datum {
        if self.is_map(table, column) {
            Datum::Map(BTreeMap::new())
        } else {
            Datum::empty()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn map_columns_are_known() {
        let schema = Schema::from_json(&json!({
            "name": "Open_vSwitch", "version": "8.3.1",
            "tables": {"Bridge": {"columns": {
                "external_ids": {"type": {"key": "string", "value": "string", "min": 0, "max": "unlimited"}},
                "ports": {"type": {"key": {"type": "uuid"}, "min": 0, "max": "unlimited"}},
                "name": {"type": "string"},
            }}}
        }))
        .unwrap();
        assert!(schema.is_map("Bridge", "external_ids"));
        assert!(!schema.is_map("Bridge", "ports"));
        assert_eq!(
            schema.empty_value("Bridge", "external_ids").to_json(),
            json!(["map", []])
        );
        assert_eq!(
            schema.empty_value("Bridge", "ports").to_json(),
            json!(["set", []])
        );
        assert!(Schema::from_json(&json!({"tables": 1})).is_err());
    }
}
