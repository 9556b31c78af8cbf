//! DNS names: the one place their shape is checked. A label is 1-63 letters, digits or '-',
//! not beginning or ending with '-'; a name is labels joined by dots, at most 253 characters.
//! Kubernetes names (namespaces, pods) are the lowercase form (DNS-1123); egress policies'
//! `dnsName` takes either case.

/// Which letters a name may have.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Case {
    /// Lowercase only (Kubernetes' DNS-1123 names).
    Lower,
    /// Either case (host names, which DNS compares without case).
    Any,
}

/// Why `label` is not a DNS label, if it is not one.
pub fn label_error(label: &str, case: Case) -> Option<String> {
    let letter_ok = |c: char| match case {
        Case::Lower => c.is_ascii_lowercase() || c.is_ascii_digit(),
        Case::Any => c.is_ascii_alphanumeric(),
    };
    let ok = (1..=63).contains(&label.len())
        && label.chars().all(|c| letter_ok(c) || c == '-')
        && !label.starts_with('-')
        && !label.ends_with('-');
    if ok {
        return None;
    }
    let letters = match case {
        Case::Lower => "a-z, 0-9",
        Case::Any => "letters, digits",
    };
    Some(format!(
        "{label:?} is not a DNS label (1-63 of {letters} or '-', alphanumeric at both ends)"
    ))
}

/// Why `name` is not a DNS name of dot-separated labels (at most 253 characters).
pub fn name_error(name: &str, case: Case) -> Option<String> {
    if name.is_empty() || name.len() > 253 {
        return Some(format!("{name:?} is not a DNS name (1 to 253 characters)"));
    }
    name.split('.')
        .find_map(|label| label_error(label, case))
        .map(|why| format!("{name:?} is not a DNS name: {why}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_and_names_in_both_cases() {
        assert_eq!(label_error("web-0", Case::Lower), None);
        assert!(label_error("Web", Case::Lower).is_some());
        assert_eq!(label_error("Web", Case::Any), None);
        for bad in ["", "-a", "a-", "a_b", &"a".repeat(64)] {
            assert!(label_error(bad, Case::Any).is_some(), "{bad:?}");
        }
        assert_eq!(name_error("a.b-c.d", Case::Lower), None);
        assert!(name_error("a..b", Case::Lower).is_some());
        assert!(name_error(&format!("{}.a", "a".repeat(252)), Case::Any).is_some());
    }
}
