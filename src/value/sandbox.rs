//! Pod sandbox (container) ids.

use std::fmt;
use std::str::FromStr;

use super::{text_serde, InvalidInput};

/// A pod sandbox (container) id: 64 hex digits, i.e. 32 bytes, as the seed's getPodNote
/// demands and as container runtimes hand it to CNI plugins.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SandboxId([u8; 32]);

impl SandboxId {
    pub fn bytes(&self) -> &[u8; 32] {
        &self.0
    }

    /// The seed's getPodNote: the bytes as dot-separated hex pairs (ovs-ofctl's `note:` text).
    pub fn note(&self) -> String {
        let hex: Vec<String> = self.0.iter().map(|b| format!("{b:02x}")).collect();
        hex.join(".")
    }
}

impl FromStr for SandboxId {
    type Err = InvalidInput;
    fn from_str(text: &str) -> Result<Self, InvalidInput> {
        let invalid = |reason: &str| InvalidInput::new("sandbox id", text, reason);
        if text.len() != 64 {
            return Err(invalid(&format!(
                "expected 64 hex digits (32 bytes), got {} characters",
                text.len()
            )));
        }
        let mut bytes = [0u8; 32];
        for (i, byte) in bytes.iter_mut().enumerate() {
            let pair = text
                .get(2 * i..2 * i + 2)
                .ok_or_else(|| invalid("not ASCII hex"))?;
            let not_hex = || invalid(&format!("{pair:?} at offset {} is not hex", 2 * i));
            if !pair.chars().all(|c| c.is_ascii_hexdigit()) {
                return Err(not_hex());
            }
            *byte = u8::from_str_radix(pair, 16).map_err(|_| not_hex())?;
        }
        Ok(SandboxId(bytes))
    }
}

impl fmt::Display for SandboxId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.iter().try_for_each(|b| write!(f, "{b:02x}"))
    }
}

text_serde!(SandboxId);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn needs_64_hex_digits() {
        let good = "ab".repeat(32);
        let id = good.parse::<SandboxId>().unwrap();
        assert_eq!(id.to_string(), good);
        assert!(id.note().starts_with("ab.ab."));
        assert!("ab".repeat(31).parse::<SandboxId>().is_err());
        assert!(format!("zz{}", "ab".repeat(31))
            .parse::<SandboxId>()
            .is_err());
        assert!("é".repeat(32).parse::<SandboxId>().is_err());
        assert!("+a".repeat(32).parse::<SandboxId>().is_err());
    }
}
