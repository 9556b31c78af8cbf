//! OVSDB values (RFC 7047 §5.1): atoms, sets, maps and rows, with their JSON encoding.
//!
//! A set is kept as a `BTreeSet` and a map as a `BTreeMap`, so two data that OVSDB considers equal
//! compare equal here whatever order the server sent their elements in.

use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use serde_json::{json, Value};

pub use uuid::Uuid;

/// A value from the server did not have the shape RFC 7047 gives it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("malformed OVSDB {what}: {found}")]
pub struct FormatError {
    /// What was being decoded ("atom", "row", "table-updates", …).
    pub what: &'static str,
    /// The offending JSON, shortened.
    pub found: String,
}

impl FormatError {
    pub(crate) fn new(what: &'static str, found: &Value) -> FormatError {
        const MAX: usize = 200;
        let mut text = found.to_string();
        if text.len() > MAX {
            let cut = (0..=MAX)
                .rev()
                .find(|i| text.is_char_boundary(*i))
                .unwrap_or(0);
            text.truncate(cut);
            text.push('…');
        }
        FormatError { what, found: text }
    }
}

/// One OVSDB atom. `NamedUuid` names a row inserted earlier in the same transaction.
#[derive(Debug, Clone)]
pub enum Atom {
    Integer(i64),
    Real(f64),
    Boolean(bool),
    String(String),
    Uuid(Uuid),
    NamedUuid(String),
}

impl Atom {
    pub fn string(text: impl Into<String>) -> Atom {
        Atom::String(text.into())
    }

    pub fn as_str(&self) -> Option<&str> {
        match self {
            Atom::String(text) => Some(text),
            _ => None,
        }
    }

    pub fn as_i64(&self) -> Option<i64> {
        match self {
            Atom::Integer(n) => Some(*n),
            _ => None,
        }
    }

    pub fn as_uuid(&self) -> Option<Uuid> {
        match self {
            Atom::Uuid(uuid) => Some(*uuid),
            _ => None,
        }
    }

    /// Orders atoms of different kinds by kind, so that a set of mixed atoms still has one order.
    fn kind_rank(&self) -> u8 {
        match self {
            Atom::Integer(_) => 0,
            Atom::Real(_) => 1,
            Atom::Boolean(_) => 2,
            Atom::String(_) => 3,
            Atom::Uuid(_) => 4,
            Atom::NamedUuid(_) => 5,
        }
    }

    pub fn to_json(&self) -> Value {
        match self {
            Atom::Integer(n) => json!(n),
            // NaN and infinities have no JSON form; OVSDB never holds them.
            Atom::Real(x) => serde_json::Number::from_f64(*x).map_or(Value::Null, Value::Number),
            Atom::Boolean(b) => json!(b),
            Atom::String(text) => json!(text),
            Atom::Uuid(uuid) => json!(["uuid", uuid.hyphenated().to_string()]),
            Atom::NamedUuid(name) => json!(["named-uuid", name]),
        }
    }

    pub fn from_json(value: &Value) -> Result<Atom, FormatError> {
        let bad = || FormatError::new("atom", value);
        match value {
            Value::Bool(b) => Ok(Atom::Boolean(*b)),
            Value::String(text) => Ok(Atom::String(text.clone())),
            Value::Number(n) => n
                .as_i64()
                .map(Atom::Integer)
                // OVSDB integers are 64-bit signed: a larger integer is malformed, not a real.
                .or_else(|| (!n.is_u64()).then(|| n.as_f64().map(Atom::Real)).flatten())
                .ok_or_else(bad),
            Value::Array(pair) => match pair.as_slice() {
                [Value::String(tag), Value::String(text)] if tag == "uuid" => {
                    Uuid::parse_str(text).map(Atom::Uuid).map_err(|_| bad())
                }
                [Value::String(tag), Value::String(name)] if tag == "named-uuid" => {
                    Ok(Atom::NamedUuid(name.clone()))
                }
                _ => Err(bad()),
            },
            Value::Null | Value::Object(_) => Err(bad()),
        }
    }
}

impl Ord for Atom {
    fn cmp(&self, other: &Atom) -> Ordering {
        match (self, other) {
            (Atom::Integer(a), Atom::Integer(b)) => a.cmp(b),
            (Atom::Real(a), Atom::Real(b)) => a.total_cmp(b),
            (Atom::Boolean(a), Atom::Boolean(b)) => a.cmp(b),
            (Atom::String(a), Atom::String(b)) => a.cmp(b),
            (Atom::Uuid(a), Atom::Uuid(b)) => a.cmp(b),
            (Atom::NamedUuid(a), Atom::NamedUuid(b)) => a.cmp(b),
            _ => self.kind_rank().cmp(&other.kind_rank()),
        }
    }
}

impl PartialOrd for Atom {
    fn partial_cmp(&self, other: &Atom) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for Atom {
    fn eq(&self, other: &Atom) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Atom {}

impl fmt::Display for Atom {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Atom::Integer(n) => write!(f, "{n}"),
            Atom::Real(x) => write!(f, "{x}"),
            Atom::Boolean(b) => write!(f, "{b}"),
            Atom::String(text) => write!(f, "{text:?}"),
            Atom::Uuid(uuid) => write!(f, "{uuid}"),
            Atom::NamedUuid(name) => write!(f, "@{name}"),
        }
    }
}

impl From<&str> for Atom {
    fn from(text: &str) -> Atom {
        Atom::String(text.to_string())
    }
}

impl From<String> for Atom {
    fn from(text: String) -> Atom {
        Atom::String(text)
    }
}

impl From<i64> for Atom {
    fn from(n: i64) -> Atom {
        Atom::Integer(n)
    }
}

impl From<bool> for Atom {
    fn from(b: bool) -> Atom {
        Atom::Boolean(b)
    }
}

impl From<Uuid> for Atom {
    fn from(uuid: Uuid) -> Atom {
        Atom::Uuid(uuid)
    }
}

/// The value of a column: a set of atoms (a scalar is a set of one) or a map.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Datum {
    Set(BTreeSet<Atom>),
    Map(BTreeMap<Atom, Atom>),
}

impl Datum {
    /// The empty set, which also clears an optional or map column.
    pub fn empty() -> Datum {
        Datum::Set(BTreeSet::new())
    }

    pub fn atom(atom: impl Into<Atom>) -> Datum {
        Datum::Set(BTreeSet::from([atom.into()]))
    }

    /// A set of zero or one atom: how an optional column holds "maybe a value".
    pub fn optional(atom: Option<impl Into<Atom>>) -> Datum {
        Datum::Set(atom.map(Into::into).into_iter().collect())
    }

    pub fn set<A: Into<Atom>>(atoms: impl IntoIterator<Item = A>) -> Datum {
        Datum::Set(atoms.into_iter().map(Into::into).collect())
    }

    pub fn map<K: Into<Atom>, V: Into<Atom>>(pairs: impl IntoIterator<Item = (K, V)>) -> Datum {
        Datum::Map(
            pairs
                .into_iter()
                .map(|(k, v)| (k.into(), v.into()))
                .collect(),
        )
    }

    pub fn is_empty(&self) -> bool {
        match self {
            Datum::Set(atoms) => atoms.is_empty(),
            Datum::Map(pairs) => pairs.is_empty(),
        }
    }

    /// The single atom of a scalar (or one-element set) column.
    pub fn as_atom(&self) -> Option<&Atom> {
        match self {
            Datum::Set(atoms) if atoms.len() == 1 => atoms.first(),
            _ => None,
        }
    }

    pub fn as_i64(&self) -> Option<i64> {
        self.as_atom().and_then(Atom::as_i64)
    }

    pub fn as_str(&self) -> Option<&str> {
        self.as_atom().and_then(Atom::as_str)
    }

    pub fn as_uuid(&self) -> Option<Uuid> {
        self.as_atom().and_then(Atom::as_uuid)
    }

    /// The atoms of a set column (empty for a map).
    pub fn atoms(&self) -> impl Iterator<Item = &Atom> {
        let atoms = match self {
            Datum::Set(atoms) => Some(atoms),
            Datum::Map(_) => None,
        };
        atoms.into_iter().flatten()
    }

    pub fn uuids(&self) -> impl Iterator<Item = Uuid> + '_ {
        self.atoms().filter_map(Atom::as_uuid)
    }

    pub fn strings(&self) -> impl Iterator<Item = &str> {
        self.atoms().filter_map(Atom::as_str)
    }

    /// A string→string map column as Rust strings (entries of other kinds are skipped).
    pub fn string_map(&self) -> BTreeMap<String, String> {
        match self {
            Datum::Map(pairs) => pairs
                .iter()
                .filter_map(|(k, v)| Some((k.as_str()?.to_string(), v.as_str()?.to_string())))
                .collect(),
            Datum::Set(_) => BTreeMap::new(),
        }
    }

    /// RFC 7047 §5.1: a one-element set is sent as its atom, any other as `["set", [...]]`.
    pub fn to_json(&self) -> Value {
        match self {
            Datum::Set(atoms) if atoms.len() == 1 => {
                atoms.first().map_or(Value::Null, Atom::to_json)
            }
            Datum::Set(atoms) => {
                json!(["set", atoms.iter().map(Atom::to_json).collect::<Vec<_>>()])
            }
            Datum::Map(pairs) => json!([
                "map",
                pairs
                    .iter()
                    .map(|(k, v)| json!([k.to_json(), v.to_json()]))
                    .collect::<Vec<_>>()
            ]),
        }
    }

    pub fn from_json(value: &Value) -> Result<Datum, FormatError> {
        let bad = || FormatError::new("datum", value);
        if let Value::Array(parts) = value {
            match parts.as_slice() {
                [Value::String(tag), Value::Array(items)] if tag == "set" => {
                    return items
                        .iter()
                        .map(Atom::from_json)
                        .collect::<Result<_, _>>()
                        .map(Datum::Set);
                }
                [Value::String(tag), Value::Array(items)] if tag == "map" => {
                    return items
                        .iter()
                        .map(map_entry)
                        .collect::<Result<_, _>>()
                        .map(Datum::Map);
                }
                [Value::String(tag), _] if tag == "set" || tag == "map" => return Err(bad()),
                _ => {}
            }
        }
        Atom::from_json(value).map(Datum::atom).map_err(|_| bad())
    }
}

fn map_entry(entry: &Value) -> Result<(Atom, Atom), FormatError> {
    match entry.as_array().map(Vec::as_slice) {
        Some([key, value]) => Ok((Atom::from_json(key)?, Atom::from_json(value)?)),
        _ => Err(FormatError::new("map entry", entry)),
    }
}

impl fmt::Display for Datum {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Datum::Set(atoms) if atoms.len() == 1 => {
                atoms.first().map_or(Ok(()), |atom| write!(f, "{atom}"))
            }
            Datum::Set(atoms) => {
                f.write_str("[")?;
                for (i, atom) in atoms.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{atom}")?;
                }
                f.write_str("]")
            }
            Datum::Map(pairs) => {
                f.write_str("{")?;
                for (i, (k, v)) in pairs.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{k}={v}")?;
                }
                f.write_str("}")
            }
        }
    }
}

impl<A: Into<Atom>> From<A> for Datum {
    fn from(atom: A) -> Datum {
        Datum::atom(atom)
    }
}

/// A row: column name → value. Only the columns that were sent or selected are present.
pub type Row = BTreeMap<String, Datum>;

pub fn row_to_json(row: &Row) -> Value {
    Value::Object(
        row.iter()
            .map(|(column, datum)| (column.clone(), datum.to_json()))
            .collect(),
    )
}

pub fn row_from_json(value: &Value) -> Result<Row, FormatError> {
    let object = value
        .as_object()
        .ok_or_else(|| FormatError::new("row", value))?;
    object
        .iter()
        .map(|(column, datum)| Ok((column.clone(), Datum::from_json(datum)?)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const UUID: &str = "36bfa8a5-e8f3-4b2e-bd0b-b3d1e3e0a8f1";

    #[test]
    fn atoms_round_trip_through_json() {
        let uuid = Uuid::parse_str(UUID).unwrap();
        for atom in [
            Atom::Integer(-7),
            Atom::Real(1.5),
            Atom::Boolean(true),
            Atom::string("br0"),
            Atom::Uuid(uuid),
            Atom::NamedUuid("row1".into()),
        ] {
            assert_eq!(Atom::from_json(&atom.to_json()).unwrap(), atom);
        }
        assert_eq!(Atom::Uuid(uuid).to_json(), json!(["uuid", UUID]));
    }

    #[test]
    fn datum_encoding_follows_rfc7047() {
        assert_eq!(Datum::atom(5).to_json(), json!(5));
        assert_eq!(Datum::empty().to_json(), json!(["set", []]));
        assert_eq!(
            Datum::set(["OpenFlow13", "OpenFlow10"]).to_json(),
            json!(["set", ["OpenFlow10", "OpenFlow13"]])
        );
        assert_eq!(
            Datum::map([("key", "flow"), ("remote_ip", "flow")]).to_json(),
            json!(["map", [["key", "flow"], ["remote_ip", "flow"]]])
        );
    }

    #[test]
    fn datum_decoding_is_order_insensitive() {
        let a = Datum::from_json(&json!(["set", [3, 1, 2]])).unwrap();
        let b = Datum::from_json(&json!(["set", [1, 2, 3]])).unwrap();
        assert_eq!(a, b);
        let m = Datum::from_json(&json!(["map", [["b", "2"], ["a", "1"]]])).unwrap();
        assert_eq!(m.string_map().into_iter().next().unwrap().0, "a");
        assert_eq!(Datum::from_json(&json!("x")).unwrap().as_str(), Some("x"));
    }

    #[test]
    fn malformed_data_are_errors() {
        for bad in [
            json!(null),
            json!({"a": 1}),
            json!(["set", 1]),
            json!(["map", [[1]]]),
            json!(["uuid", "not-a-uuid"]),
            json!(["bogus", "x"]),
            json!(18446744073709551615u64),
        ] {
            assert!(Datum::from_json(&bad).is_err(), "{bad} accepted");
        }
    }
}
