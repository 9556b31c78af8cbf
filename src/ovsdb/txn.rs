//! Transaction operations (RFC 7047 §5.2) and their results.

use serde_json::{json, Value};

use super::types::{row_from_json, row_to_json, Datum, FormatError, Row, Uuid};

/// A condition's function (RFC 7047 §5.1 `<function>`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Function {
    Lt,
    Le,
    Eq,
    Ne,
    Ge,
    Gt,
    Includes,
    Excludes,
}

impl Function {
    pub fn as_str(self) -> &'static str {
        match self {
            Function::Lt => "<",
            Function::Le => "<=",
            Function::Eq => "==",
            Function::Ne => "!=",
            Function::Ge => ">=",
            Function::Gt => ">",
            Function::Includes => "includes",
            Function::Excludes => "excludes",
        }
    }
}

/// `[column, function, value]`: which rows an operation applies to.
#[derive(Debug, Clone, PartialEq)]
pub struct Condition {
    pub column: String,
    pub function: Function,
    pub value: Datum,
}

impl Condition {
    pub fn new(column: &str, function: Function, value: impl Into<Datum>) -> Condition {
        Condition {
            column: column.to_string(),
            function,
            value: value.into(),
        }
    }

    /// `column == value`.
    pub fn eq(column: &str, value: impl Into<Datum>) -> Condition {
        Condition::new(column, Function::Eq, value)
    }

    /// `_uuid == uuid`.
    pub fn uuid(uuid: Uuid) -> Condition {
        Condition::eq("_uuid", uuid)
    }

    fn to_json(&self) -> Value {
        json!([self.column, self.function.as_str(), self.value.to_json()])
    }
}

/// A mutation's mutator (RFC 7047 §5.1 `<mutator>`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mutator {
    Add,
    Sub,
    Mul,
    Div,
    Mod,
    Insert,
    Delete,
}

impl Mutator {
    pub fn as_str(self) -> &'static str {
        match self {
            Mutator::Add => "+=",
            Mutator::Sub => "-=",
            Mutator::Mul => "*=",
            Mutator::Div => "/=",
            Mutator::Mod => "%=",
            Mutator::Insert => "insert",
            Mutator::Delete => "delete",
        }
    }
}

/// `[column, mutator, value]`.
#[derive(Debug, Clone, PartialEq)]
pub struct Mutation {
    pub column: String,
    pub mutator: Mutator,
    pub value: Datum,
}

impl Mutation {
    pub fn new(column: &str, mutator: Mutator, value: impl Into<Datum>) -> Mutation {
        Mutation {
            column: column.to_string(),
            mutator,
            value: value.into(),
        }
    }

    fn to_json(&self) -> Value {
        json!([self.column, self.mutator.as_str(), self.value.to_json()])
    }
}

/// What a `wait` operation waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Until {
    Equal,
    NotEqual,
}

/// One operation of a `transact`.
#[derive(Debug, Clone, PartialEq)]
pub enum Operation {
    /// Inserts a row; `uuid_name` lets later operations refer to it as `["named-uuid", name]`.
    Insert {
        table: String,
        row: Row,
        uuid_name: Option<String>,
    },
    Select {
        table: String,
        conditions: Vec<Condition>,
        columns: Option<Vec<String>>,
    },
    Update {
        table: String,
        conditions: Vec<Condition>,
        row: Row,
    },
    Mutate {
        table: String,
        conditions: Vec<Condition>,
        mutations: Vec<Mutation>,
    },
    Delete {
        table: String,
        conditions: Vec<Condition>,
    },
    /// Aborts the transaction unless the selected columns of the matching rows are (`Equal`) or
    /// are not (`NotEqual`) exactly `rows`, waiting at most `timeout_ms` (0: check once).
    Wait {
        table: String,
        conditions: Vec<Condition>,
        columns: Vec<String>,
        until: Until,
        rows: Vec<Row>,
        timeout_ms: u64,
    },
    /// Written to ovsdb-server's log with the commit.
    Comment(String),
}

impl Operation {
    pub fn to_json(&self) -> Value {
        match self {
            Operation::Insert {
                table,
                row,
                uuid_name,
            } => {
                let mut op = json!({"op": "insert", "table": table, "row": row_to_json(row)});
                if let Some(name) = uuid_name {
                    op["uuid-name"] = json!(name);
                }
                op
            }
            Operation::Select {
                table,
                conditions,
                columns,
            } => {
                let mut op =
                    json!({"op": "select", "table": table, "where": where_json(conditions)});
                if let Some(columns) = columns {
                    op["columns"] = json!(columns);
                }
                op
            }
            Operation::Update {
                table,
                conditions,
                row,
            } => json!({
                "op": "update", "table": table, "where": where_json(conditions),
                "row": row_to_json(row),
            }),
            Operation::Mutate {
                table,
                conditions,
                mutations,
            } => json!({
                "op": "mutate", "table": table, "where": where_json(conditions),
                "mutations": mutations.iter().map(Mutation::to_json).collect::<Vec<_>>(),
            }),
            Operation::Delete { table, conditions } => {
                json!({"op": "delete", "table": table, "where": where_json(conditions)})
            }
            Operation::Wait {
                table,
                conditions,
                columns,
                until,
                rows,
                timeout_ms,
            } => json!({
                "op": "wait", "table": table, "where": where_json(conditions),
                "columns": columns,
                "until": if *until == Until::Equal { "==" } else { "!=" },
                "rows": rows.iter().map(row_to_json).collect::<Vec<_>>(),
                "timeout": timeout_ms,
            }),
            Operation::Comment(text) => json!({"op": "comment", "comment": text}),
        }
    }

    /// "insert into Port", for error messages.
    pub fn describe(&self) -> String {
        match self {
            Operation::Insert { table, .. } => format!("insert into {table}"),
            Operation::Select { table, .. } => format!("select from {table}"),
            Operation::Update { table, .. } => format!("update of {table}"),
            Operation::Mutate { table, .. } => format!("mutate of {table}"),
            Operation::Delete { table, .. } => format!("delete from {table}"),
            Operation::Wait { table, .. } => format!("wait on {table}"),
            Operation::Comment(_) => "comment".to_string(),
        }
    }
}

fn where_json(conditions: &[Condition]) -> Value {
    Value::Array(conditions.iter().map(Condition::to_json).collect())
}

/// The result of one successful operation: `uuid` for insert, `rows` for select, `count` for
/// update, mutate and delete; nothing for wait and comment.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct OpResult {
    pub uuid: Option<Uuid>,
    pub rows: Option<Vec<Row>>,
    pub count: Option<u64>,
}

/// An error object in a transaction's results (RFC 7047 §4.1.3).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpError {
    /// The operation it belongs to, or `None` for the commit itself (a constraint checked at
    /// commit, such as referential integrity, is reported after the last operation).
    pub index: Option<usize>,
    pub error: String,
    pub details: String,
}

/// Splits a `transact` result into per-operation results, or the first error it holds.
pub fn parse_results(
    n_ops: usize,
    result: &Value,
) -> Result<Result<Vec<OpResult>, OpError>, FormatError> {
    let items = result
        .as_array()
        .ok_or_else(|| FormatError::new("transact result", result))?;
    for (index, item) in items.iter().enumerate() {
        if let Some(error) = item.get("error") {
            return Ok(Err(OpError {
                index: (index < n_ops).then_some(index),
                error: text_of(error),
                details: item.get("details").map(text_of).unwrap_or_default(),
            }));
        }
    }
    if items.len() < n_ops {
        return Err(FormatError::new(
            "transact result (too few results)",
            result,
        ));
    }
    items[..n_ops]
        .iter()
        .map(parse_one)
        .collect::<Result<_, _>>()
        .map(Ok)
}

fn text_of(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    }
}

fn parse_one(item: &Value) -> Result<OpResult, FormatError> {
    let bad = || FormatError::new("operation result", item);
    let object = item.as_object().ok_or_else(bad)?;
    let uuid = match object.get("uuid") {
        Some(value) => Some(Datum::from_json(value)?.as_uuid().ok_or_else(bad)?),
        None => None,
    };
    let rows = match object.get("rows") {
        Some(Value::Array(rows)) => Some(rows.iter().map(row_from_json).collect::<Result<_, _>>()?),
        Some(_) => return Err(bad()),
        None => None,
    };
    let count = match object.get("count") {
        Some(value) => Some(value.as_u64().ok_or_else(bad)?),
        None => None,
    };
    Ok(OpResult { uuid, rows, count })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn operations_encode_as_rfc7047() {
        let insert = Operation::Insert {
            table: "Port".into(),
            row: Row::from([("name".to_string(), Datum::atom("p1"))]),
            uuid_name: Some("port".into()),
        };
        assert_eq!(
            insert.to_json(),
            json!({"op": "insert", "table": "Port", "row": {"name": "p1"}, "uuid-name": "port"})
        );
        let mutate = Operation::Mutate {
            table: "Bridge".into(),
            conditions: vec![Condition::eq("name", "br0")],
            mutations: vec![Mutation::new(
                "ports",
                Mutator::Insert,
                Datum::set([super::super::types::Atom::NamedUuid("port".into())]),
            )],
        };
        assert_eq!(
            mutate.to_json(),
            json!({"op": "mutate", "table": "Bridge", "where": [["name", "==", "br0"]],
                   "mutations": [["ports", "insert", ["named-uuid", "port"]]]})
        );
    }

    #[test]
    fn results_and_errors_are_split() {
        let ok = json!([{"uuid": ["uuid", "36bfa8a5-e8f3-4b2e-bd0b-b3d1e3e0a8f1"]}, {"count": 1},
                        {"rows": [{"next_cfg": 4}]}]);
        let results = parse_results(3, &ok).unwrap().unwrap();
        assert!(results[0].uuid.is_some());
        assert_eq!(results[1].count, Some(1));
        assert_eq!(
            results[2].rows.as_ref().unwrap()[0]["next_cfg"].as_i64(),
            Some(4)
        );

        let op_failed =
            json!([{"count": 1}, {"error": "constraint violation", "details": "x"}, null]);
        let err = parse_results(3, &op_failed).unwrap().unwrap_err();
        assert_eq!(err.index, Some(1));
        assert_eq!(err.error, "constraint violation");

        let commit_failed =
            json!([{}, {"error": "referential integrity violation", "details": "y"}]);
        let err = parse_results(1, &commit_failed).unwrap().unwrap_err();
        assert_eq!(err.index, None);
        assert_eq!(err.details, "y");

        assert!(parse_results(2, &json!([{}])).is_err());
        assert!(parse_results(1, &json!({})).is_err());
    }
}
