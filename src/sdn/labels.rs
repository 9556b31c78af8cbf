//! Labels and label selectors as Kubernetes defines them, the checks of names and labels, and
//! the error that names a refused input's field. Namespaces, pods and every policy tier use
//! them; they depend on nothing of the node's.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::value::dns::{self, Case};

/// Labels of a namespace or pod.
pub type Labels = BTreeMap<String, String>;

/// Why an input was refused: the field (a JSON path) and the reason.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{path}: {reason}")]
pub struct FieldError {
    pub path: String,
    pub reason: String,
}

impl FieldError {
    pub fn new(path: impl Into<String>, reason: impl Into<String>) -> FieldError {
        FieldError {
            path: path.into(),
            reason: reason.into(),
        }
    }
}

pub type Checked<T> = Result<T, FieldError>;

/// A label selector: matchLabels AND every matchExpression. Empty matches everything.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Selector {
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub match_labels: Labels,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub match_expressions: Vec<Expression>,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Expression {
    pub key: String,
    pub operator: Operator,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub values: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Operator {
    In,
    NotIn,
    Exists,
    DoesNotExist,
}

impl Selector {
    pub fn is_empty(&self) -> bool {
        self.match_labels.is_empty() && self.match_expressions.is_empty()
    }

    pub fn matches(&self, labels: &Labels) -> bool {
        self.matches_with(|key| labels.get(key).map(String::as_str))
    }

    /// Whether labels looked up by `label` (key → value) are selected: for label sets that
    /// are not one map (a namespace's own labels plus its implicit name label).
    pub fn matches_with<'a>(&self, label: impl Fn(&str) -> Option<&'a str>) -> bool {
        self.match_labels
            .iter()
            .all(|(k, v)| label(k) == Some(v.as_str()))
            && self
                .match_expressions
                .iter()
                .all(|e| e.matches(label(&e.key)))
    }

    /// The same selector in one spelling: expressions sorted, each one's values sorted and
    /// deduplicated (equal selectors then compare and hash equal).
    pub fn canonical(&self) -> Selector {
        let mut match_expressions: Vec<Expression> = self
            .match_expressions
            .iter()
            .map(|e| {
                let mut values = e.values.clone();
                values.sort();
                values.dedup();
                Expression {
                    values,
                    ..e.clone()
                }
            })
            .collect();
        match_expressions.sort();
        match_expressions.dedup();
        Selector {
            match_labels: self.match_labels.clone(),
            match_expressions,
        }
    }
}

impl Expression {
    fn matches(&self, value: Option<&str>) -> bool {
        let listed = || value.is_some_and(|v| self.values.iter().any(|w| w == v));
        match self.operator {
            Operator::In => listed(),
            Operator::NotIn => !listed(),
            Operator::Exists => value.is_some(),
            Operator::DoesNotExist => value.is_none(),
        }
    }
}

fn alnum(c: char) -> bool {
    c.is_ascii_alphanumeric()
}

/// A DNS-1123 label: 1-63 lowercase alphanumerics or '-', alphanumeric at both ends.
pub fn check_dns_label(path: &str, name: &str) -> Checked<()> {
    match dns::label_error(name, Case::Lower) {
        None => Ok(()),
        Some(why) => Err(FieldError::new(path, why)),
    }
}

/// A DNS-1123 subdomain: up to 253 characters, dot-separated labels.
pub fn check_dns_subdomain(path: &str, name: &str) -> Checked<()> {
    match dns::name_error(name, Case::Lower) {
        None => Ok(()),
        Some(why) => Err(FieldError::new(path, why)),
    }
}

/// A label name or value's shape: up to 63 of alphanumerics, '-', '_', '.', alphanumeric at
/// both ends.
fn label_word(word: &str) -> bool {
    word.len() <= 63
        && word
            .chars()
            .all(|c| alnum(c) || matches!(c, '-' | '_' | '.'))
        && (word.is_empty() || (word.starts_with(alnum) && word.ends_with(alnum)))
}

pub fn check_label_key(path: &str, key: &str) -> Checked<()> {
    let (prefix, name) = match key.split_once('/') {
        Some((prefix, name)) => (Some(prefix), name),
        None => (None, key),
    };
    if let Some(prefix) = prefix {
        check_dns_subdomain(path, prefix).map_err(|_| {
            FieldError::new(path, format!("{key:?}: the prefix must be a DNS subdomain"))
        })?;
    }
    if name.is_empty() || !label_word(name) {
        return Err(FieldError::new(
            path,
            format!("{key:?} is not a label key ([prefix/]name, name 1-63 of alphanumerics, '-', '_', '.')"),
        ));
    }
    Ok(())
}

pub fn check_label_value(path: &str, value: &str) -> Checked<()> {
    if label_word(value) {
        Ok(())
    } else {
        Err(FieldError::new(
            path,
            format!("{value:?} is not a label value (up to 63 of alphanumerics, '-', '_', '.')"),
        ))
    }
}

/// Checks every key and value of `labels`; the error names `path.key`.
pub fn check_labels(path: &str, labels: &Labels) -> Checked<()> {
    for (key, value) in labels {
        check_label_key(&format!("{path}.{key}"), key)?;
        check_label_value(&format!("{path}.{key}"), value)?;
    }
    Ok(())
}

/// A container port's name as Kubernetes checks it (an IANA service name): 1-15 lowercase
/// alphanumerics or '-', at least one letter, no '-' at either end or twice in a row.
pub fn check_port_name(path: &str, name: &str) -> Checked<()> {
    let ok = (1..=15).contains(&name.len())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && name.chars().any(|c| c.is_ascii_lowercase())
        && !name.starts_with('-')
        && !name.ends_with('-')
        && !name.contains("--");
    if ok {
        return Ok(());
    }
    Err(FieldError::new(
        path,
        format!(
            "{name:?} is not a port name (1-15 of a-z, 0-9, '-', a letter at least, no '-' at an end or twice in a row)"
        ),
    ))
}
