//! Virtual network ids.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use super::InvalidInput;

/// A virtual network id: 24 bits, the width of a VXLAN VNI. VNID 0 is the global (admin)
/// network. Parses from decimal or `0x` hex text, (de)serialises as a JSON number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct Vnid(u32);

impl Vnid {
    pub const GLOBAL: Vnid = Vnid(0);
    pub const MAX: u32 = 0x00ff_ffff;

    pub fn new(value: u32) -> Result<Vnid, InvalidInput> {
        if value > Self::MAX {
            return Err(InvalidInput::new(
                "VNID",
                value.to_string(),
                "must fit in 24 bits (0..=16777215)",
            ));
        }
        Ok(Vnid(value))
    }

    pub const fn get(self) -> u32 {
        self.0
    }
}

impl FromStr for Vnid {
    type Err = InvalidInput;
    fn from_str(text: &str) -> Result<Self, InvalidInput> {
        let value = parse_u32(text)
            .ok_or_else(|| InvalidInput::new("VNID", text, "not a number (decimal or 0x hex)"))?;
        Vnid::new(value)
    }
}

impl fmt::Display for Vnid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

impl Serialize for Vnid {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u32(self.0)
    }
}

impl<'de> Deserialize<'de> for Vnid {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Vnid::new(u32::deserialize(d)?).map_err(serde::de::Error::custom)
    }
}

fn parse_u32(text: &str) -> Option<u32> {
    match text.strip_prefix("0x").or_else(|| text.strip_prefix("0X")) {
        Some(hex) => u32::from_str_radix(hex, 16).ok(),
        None => text.parse().ok(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn is_24_bits() {
        assert_eq!("0x10".parse::<Vnid>().unwrap().get(), 16);
        assert_eq!("16777215".parse::<Vnid>().unwrap().get(), Vnid::MAX);
        assert!("16777216".parse::<Vnid>().is_err());
        assert!("-1".parse::<Vnid>().is_err());
        assert!(serde_json::from_str::<Vnid>("16777216").is_err());
        assert_eq!(serde_json::to_string(&Vnid::new(7).unwrap()).unwrap(), "7");
    }
}
