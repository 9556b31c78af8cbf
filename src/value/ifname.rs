//! Linux interface names.

use std::fmt;
use std::str::FromStr;

use super::{text_serde, InvalidInput};

/// Linux's IFNAMSIZ is 16 bytes including the terminating NUL.
pub const MAX_IFNAME_LEN: usize = 15;

/// Why a string cannot be a Linux interface name (the kernel's `dev_valid_name` rules, plus
/// control characters, which no tool can show).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IfNameError {
    Empty,
    TooLong {
        len: usize,
    },
    /// `.` and `..`.
    Reserved,
    /// `/`, `:`, whitespace or a control character. The name also becomes a /proc/sys path
    /// component, which is why `/` must never pass.
    BadCharacter,
}

impl IfNameError {
    pub fn reason(self) -> String {
        match self {
            IfNameError::Empty => "it is empty".into(),
            IfNameError::TooLong { len } => {
                format!("it is {len} bytes; Linux allows at most {MAX_IFNAME_LEN}")
            }
            IfNameError::Reserved => "`.` and `..` are reserved".into(),
            IfNameError::BadCharacter => {
                "it contains `/`, `:`, whitespace or a control character".into()
            }
        }
    }
}

/// A Linux interface name: 1 to 15 bytes, no `/`, `:`, whitespace or control characters, not
/// `.` or `..`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct IfName(String);

impl IfName {
    /// Checks `name` against the rules without keeping it.
    pub fn check(name: &str) -> Result<(), IfNameError> {
        if name.is_empty() {
            return Err(IfNameError::Empty);
        }
        if name.len() > MAX_IFNAME_LEN {
            return Err(IfNameError::TooLong { len: name.len() });
        }
        if name == "." || name == ".." {
            return Err(IfNameError::Reserved);
        }
        if name
            .chars()
            .any(|c| c == '/' || c == ':' || c.is_whitespace() || c.is_control())
        {
            return Err(IfNameError::BadCharacter);
        }
        Ok(())
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl FromStr for IfName {
    type Err = InvalidInput;
    fn from_str(text: &str) -> Result<Self, InvalidInput> {
        IfName::check(text).map_err(|e| InvalidInput::new("interface name", text, e.reason()))?;
        Ok(IfName(text.to_string()))
    }
}

impl fmt::Display for IfName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

text_serde!(IfName);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_kernels_rules() {
        assert!("veth1234567890a".parse::<IfName>().is_ok());
        assert_eq!(
            IfName::check("veth1234567890ab"),
            Err(IfNameError::TooLong { len: 16 })
        );
        assert_eq!(IfName::check(""), Err(IfNameError::Empty));
        for name in [".", ".."] {
            assert_eq!(IfName::check(name), Err(IfNameError::Reserved));
        }
        for name in ["a/b", "a b", "a:b", "a\tb", "a\u{1}b"] {
            assert_eq!(
                IfName::check(name),
                Err(IfNameError::BadCharacter),
                "{name:?}"
            );
        }
        let err = "a/b".parse::<IfName>().unwrap_err();
        assert_eq!(err.what, "interface name");
        assert!(serde_json::from_str::<IfName>("\"a/b\"").is_err());
    }
}
