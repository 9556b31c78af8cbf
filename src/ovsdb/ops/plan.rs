//! A planned OVSDB transaction and the building blocks plans are made of.

use std::collections::BTreeMap;

use crate::ovsdb::txn::{Condition, Mutation, Mutator, Operation, Until};
use crate::ovsdb::types::{Atom, Datum, Row};

/// A transaction and what its results must show.
pub(in crate::ovsdb) struct Plan {
    pub(super) ops: Vec<Operation>,
    /// The `wait` operations that check the cache's view; a failure of one means "plan again".
    pub(super) guards: Vec<usize>,
    /// Operations (by index) that must have changed exactly one row, with the table and record.
    pub(super) must_touch: Vec<(usize, &'static str, String)>,
}

impl Plan {
    pub(super) fn new() -> Plan {
        Plan {
            ops: Vec::new(),
            guards: Vec::new(),
            must_touch: Vec::new(),
        }
    }

    pub(super) fn push(&mut self, op: Operation) -> usize {
        self.ops.push(op);
        self.ops.len() - 1
    }

    pub(super) fn guard(&mut self, op: Operation) {
        let index = self.push(op);
        self.guards.push(index);
    }

    pub(super) fn touch_one(&mut self, op: Operation, table: &'static str, record: &str) {
        let index = self.push(op);
        self.must_touch.push((index, table, record.to_string()));
    }

    /// `other`'s operations after this plan's, with their checks.
    pub(super) fn append(&mut self, other: Plan) {
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
pub(super) fn guard_rows(
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

pub(super) fn named(name: &str) -> Condition {
    Condition::eq("name", name)
}

pub(super) fn row<const N: usize>(columns: [(&str, Datum); N]) -> Row {
    columns
        .into_iter()
        .map(|(column, datum)| (column.to_string(), datum))
        .collect()
}

pub(super) fn str_map(map: &BTreeMap<String, String>) -> Datum {
    Datum::map(map.iter().map(|(k, v)| (k.as_str(), v.as_str())))
}

pub(super) fn insert(table: &str, uuid_name: &str, row: Row) -> Operation {
    Operation::Insert {
        table: table.to_string(),
        row,
        uuid_name: Some(uuid_name.to_string()),
    }
}

pub(super) fn named_uuid(name: &str) -> Datum {
    Datum::atom(Atom::NamedUuid(name.to_string()))
}

pub(super) fn mutate_set(
    table: &str,
    name: &str,
    column: &str,
    mutator: Mutator,
    value: Datum,
) -> Operation {
    Operation::Mutate {
        table: table.to_string(),
        conditions: vec![named(name)],
        mutations: vec![Mutation::new(column, mutator, value)],
    }
}
