//! The identities the store keys its objects by: a pod is `namespace/name`, as Kubernetes
//! names it (never its IP, which a pod may have several of, or none yet).

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

use super::dns::{self, Case};
use super::{text_serde, InvalidInput};

/// A pod's identity, `namespace/name`: a DNS-1123 label, a slash, a DNS-1123 subdomain.
/// Cheap to clone (the text is shared), compared, ordered and hashed as its text (so a map
/// of pods can be looked up, and ranged over a namespace, by `&str`).
#[derive(Clone)]
pub struct PodKey {
    text: Arc<str>,
    slash: usize,
}

impl PodKey {
    /// The key of pod `name` in `namespace`, both checked as Kubernetes checks them (a
    /// DNS-1123 label and subdomain).
    pub fn new(namespace: &str, name: &str) -> Result<PodKey, InvalidInput> {
        let text = || format!("{namespace}/{name}");
        if let Some(why) = dns::label_error(namespace, Case::Lower) {
            return Err(InvalidInput::new("pod", text(), format!("namespace {why}")));
        }
        if let Some(why) = dns::name_error(name, Case::Lower) {
            return Err(InvalidInput::new("pod", text(), format!("name {why}")));
        }
        Ok(PodKey {
            text: Arc::from(format!("{namespace}/{name}")),
            slash: namespace.len(),
        })
    }

    pub fn namespace(&self) -> &str {
        &self.text[..self.slash]
    }

    pub fn name(&self) -> &str {
        &self.text[self.slash + 1..]
    }

    pub fn as_str(&self) -> &str {
        &self.text
    }
}

impl PartialEq for PodKey {
    fn eq(&self, other: &PodKey) -> bool {
        self.text == other.text
    }
}

impl Eq for PodKey {}

impl PartialOrd for PodKey {
    fn partial_cmp(&self, other: &PodKey) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for PodKey {
    fn cmp(&self, other: &PodKey) -> std::cmp::Ordering {
        self.text.cmp(&other.text)
    }
}

impl std::hash::Hash for PodKey {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.text.hash(state)
    }
}

impl std::borrow::Borrow<str> for PodKey {
    fn borrow(&self) -> &str {
        &self.text
    }
}

impl FromStr for PodKey {
    type Err = InvalidInput;

    fn from_str(text: &str) -> Result<PodKey, InvalidInput> {
        match text.split_once('/') {
            Some((namespace, name)) => PodKey::new(namespace, name),
            None => Err(InvalidInput::new("pod", text, "expected NAMESPACE/NAME")),
        }
    }
}

impl fmt::Display for PodKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl fmt::Debug for PodKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "PodKey({})", self.text)
    }
}

text_serde!(PodKey);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_is_namespace_slash_name_checked_as_kubernetes_does() {
        let key: PodKey = "x/web-0.a".parse().unwrap();
        assert_eq!((key.namespace(), key.name()), ("x", "web-0.a"));
        assert_eq!(key.to_string(), "x/web-0.a");
        assert_eq!(serde_json::to_string(&key).unwrap(), "\"x/web-0.a\"");
        let back: PodKey = serde_json::from_str("\"x/web-0.a\"").unwrap();
        assert_eq!(back, key);
        for bad in [
            "x",
            "/a",
            "x/",
            "X/a",
            "x/A",
            "x/a/b",
            "x.y/a",
            &format!("x/{}", "a".repeat(254)),
        ] {
            let err = bad.parse::<PodKey>().unwrap_err();
            assert!(err.to_string().contains("invalid pod"), "{bad:?}: {err}");
        }
        assert!(serde_json::from_str::<PodKey>("\"x\"").is_err());
    }
}
