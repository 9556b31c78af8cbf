//! Names and labels, as Kubernetes validates them.

use super::model::{Checked, Labels, NetPolError};
use crate::value::dns::{self, Case};

fn alnum(c: char) -> bool {
    c.is_ascii_alphanumeric()
}

/// A DNS-1123 label: 1-63 lowercase alphanumerics or '-', alphanumeric at both ends.
pub fn check_dns_label(path: &str, name: &str) -> Checked<()> {
    match dns::label_error(name, Case::Lower) {
        None => Ok(()),
        Some(why) => Err(NetPolError::new(path, why)),
    }
}

/// A DNS-1123 subdomain: up to 253 characters, dot-separated labels.
pub fn check_dns_subdomain(path: &str, name: &str) -> Checked<()> {
    match dns::name_error(name, Case::Lower) {
        None => Ok(()),
        Some(why) => Err(NetPolError::new(path, why)),
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
            NetPolError::new(path, format!("{key:?}: the prefix must be a DNS subdomain"))
        })?;
    }
    if name.is_empty() || !label_word(name) {
        return Err(NetPolError::new(
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
        Err(NetPolError::new(
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
