//! The policy audit's vocabulary, each fact once: what an operator may ask to audit
//! ([`AuditSet`], the `ofnode.io/audit` annotation), and how a policy rule's verdict is named on
//! the switch ([`RuleRef`]): one 32-bit key that is at once the verdict flow's cookie (with a
//! tag), the rule's meter id, and the userdata its `controller(...)` action sends back in the
//! NXT_PACKET_IN2, so a packet-in, a flow stats reply and a trace all name the same rule.
//!
//! ```text
//! key:    tier(2) | dir(1) | verdict(2) | id(27)
//! cookie: 0x4f41 (tag) << 48 | key
//! userdata: b"ofA1" ++ key (big-endian)
//! ```
//!
//! `id` is, for a NetworkPolicy rule, the conjunction id of its first part (a rule's named
//! part shares it); for NetworkPolicy's isolation drop, the VNID of the isolated pod's
//! namespace; for an admin tier rule, the conjunction id of its first part.
//!
//! An audited verdict flow loads the key into reg4 (`layout::REG_AUDIT_KEY`) and resubmits to
//! table 24 (`layout::POLICY_AUDIT`), where the rule's flow sends a new connection's first
//! packet to ofnode through the rule's meter.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// The annotation (on a Namespace, NetworkPolicy, AdminNetworkPolicy or
/// BaselineAdminNetworkPolicy) that turns the audit on, e.g. `ofnode.io/audit: allow,deny`.
pub const AUDIT_ANNOTATION: &str = "ofnode.io/audit";

/// Which side of a pod a rule judges.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Dir {
    Ingress,
    Egress,
}

impl Dir {
    pub fn as_str(self) -> &'static str {
        match self {
            Dir::Ingress => "ingress",
            Dir::Egress => "egress",
        }
    }
}

/// The policy layer a rule belongs to, in the order a packet meets them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AuditTier {
    /// AdminNetworkPolicy.
    Admin,
    /// Kubernetes NetworkPolicy (and its isolation of the pods it selects).
    #[serde(rename = "networkpolicy")]
    NetworkPolicy,
    /// BaselineAdminNetworkPolicy.
    Baseline,
}

impl AuditTier {
    pub fn as_str(self) -> &'static str {
        match self {
            AuditTier::Admin => "admin",
            AuditTier::NetworkPolicy => "networkpolicy",
            AuditTier::Baseline => "baseline",
        }
    }

    fn bits(self) -> u32 {
        match self {
            AuditTier::NetworkPolicy => 0,
            AuditTier::Admin => 1,
            AuditTier::Baseline => 2,
        }
    }

    fn of_bits(bits: u32) -> Option<AuditTier> {
        match bits {
            0 => Some(AuditTier::NetworkPolicy),
            1 => Some(AuditTier::Admin),
            2 => Some(AuditTier::Baseline),
            _ => None,
        }
    }
}

/// What a rule does with the packets it matches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    Allow,
    Deny,
    /// An AdminNetworkPolicy's Pass: on to NetworkPolicy.
    Pass,
}

impl Verdict {
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Allow => "allow",
            Verdict::Deny => "deny",
            Verdict::Pass => "pass",
        }
    }

    fn bits(self) -> u32 {
        match self {
            Verdict::Allow => 0,
            Verdict::Deny => 1,
            Verdict::Pass => 2,
        }
    }

    fn of_bits(bits: u32) -> Option<Verdict> {
        match bits {
            0 => Some(Verdict::Allow),
            1 => Some(Verdict::Deny),
            2 => Some(Verdict::Pass),
            _ => None,
        }
    }
}

/// The verdicts an operator audits: the value of [`AUDIT_ANNOTATION`], a comma-separated list
/// of `allow`, `deny`, `pass`, or `none` (also the empty string: nothing audited).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct AuditSet {
    pub allow: bool,
    pub deny: bool,
    pub pass: bool,
}

/// An audit setting that is not a list of the known verdicts.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "{AUDIT_ANNOTATION}: unknown value {value:?} in {setting:?} (expected a comma-separated \
     list of allow, deny, pass, or none)"
)]
pub struct AuditSetError {
    pub setting: String,
    pub value: String,
}

impl AuditSet {
    pub const NONE: AuditSet = AuditSet {
        allow: false,
        deny: false,
        pass: false,
    };

    pub fn is_empty(&self) -> bool {
        *self == AuditSet::NONE
    }

    /// Whether rules with `verdict` are audited.
    pub fn audits(self, verdict: Verdict) -> bool {
        match verdict {
            Verdict::Allow => self.allow,
            Verdict::Deny => self.deny,
            Verdict::Pass => self.pass,
        }
    }
}

impl FromStr for AuditSet {
    type Err = AuditSetError;

    fn from_str(setting: &str) -> Result<AuditSet, AuditSetError> {
        let mut set = AuditSet::NONE;
        let words = setting.split(',').map(str::trim).filter(|w| !w.is_empty());
        for word in words {
            match word.to_ascii_lowercase().as_str() {
                "allow" => set.allow = true,
                "deny" => set.deny = true,
                "pass" => set.pass = true,
                "none" => {}
                _ => {
                    return Err(AuditSetError {
                        setting: setting.to_string(),
                        value: word.to_string(),
                    })
                }
            }
        }
        Ok(set)
    }
}

impl fmt::Display for AuditSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let words: Vec<&str> = [
            (self.allow, "allow"),
            (self.deny, "deny"),
            (self.pass, "pass"),
        ]
        .into_iter()
        .filter_map(|(on, word)| on.then_some(word))
        .collect();
        if words.is_empty() {
            f.write_str("none")
        } else {
            f.write_str(&words.join(","))
        }
    }
}

impl Serialize for AuditSet {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for AuditSet {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<AuditSet, D::Error> {
        let text = String::deserialize(deserializer)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

/// The audit setting an object's annotations carry (None: no [`AUDIT_ANNOTATION`]); a bad
/// value is refused, naming the annotation.
pub fn annotated(
    annotations: Option<&BTreeMap<String, String>>,
) -> Result<Option<AuditSet>, crate::sdn::labels::FieldError> {
    annotations
        .and_then(|a| a.get(AUDIT_ANNOTATION))
        .map(|value| value.parse())
        .transpose()
        .map_err(|e: AuditSetError| {
            crate::sdn::labels::FieldError::new(
                format!("metadata.annotations[{AUDIT_ANNOTATION:?}]"),
                e.to_string(),
            )
        })
}

/// The cookie tag of a verdict flow (`OA`), in the cookie's top 16 bits.
pub const COOKIE_TAG: u64 = 0x4f41 << 48;
/// The mask that selects verdict flows in a flow stats request.
pub const COOKIE_TAG_MASK: u64 = 0xffff << 48;
/// The first bytes of a `controller(userdata=...)` the audit sends.
pub const USERDATA_MAGIC: [u8; 4] = *b"ofA1";

const ID_BITS: u32 = 27;
const ID_MASK: u32 = (1 << ID_BITS) - 1;

/// The rule (or isolation) that decided a packet's verdict, as the switch names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct RuleRef {
    pub tier: AuditTier,
    pub dir: Dir,
    pub verdict: Verdict,
    /// See the module's documentation; below 2^27.
    pub id: u32,
}

impl RuleRef {
    /// The 32-bit key: also the rule's meter id (never 0: a NetworkPolicy rule's conjunction
    /// id and a namespace's VNID are not, and the other tiers set a high bit).
    pub fn key(self) -> u32 {
        self.tier.bits() << 30
            | u32::from(self.dir == Dir::Egress) << 29
            | self.verdict.bits() << ID_BITS
            | (self.id & ID_MASK)
    }

    pub fn of_key(key: u32) -> Option<RuleRef> {
        let tier = AuditTier::of_bits(key >> 30)?;
        let dir = if key >> 29 & 1 == 1 {
            Dir::Egress
        } else {
            Dir::Ingress
        };
        let verdict = Verdict::of_bits(key >> ID_BITS & 3)?;
        Some(RuleRef {
            tier,
            dir,
            verdict,
            id: key & ID_MASK,
        })
    }

    /// The verdict flow's cookie.
    pub fn cookie(self) -> u64 {
        COOKIE_TAG | u64::from(self.key())
    }

    /// The rule a verdict flow's cookie names (None: not a verdict flow's).
    pub fn of_cookie(cookie: u64) -> Option<RuleRef> {
        if cookie & COOKIE_TAG_MASK != COOKIE_TAG || cookie >> 32 & 0xffff != 0 {
            return None;
        }
        RuleRef::of_key(cookie as u32)
    }

    /// The `controller(userdata=...)` bytes of the rule's audit flow.
    pub fn userdata(self) -> [u8; 8] {
        let mut data = [0; 8];
        data[..4].copy_from_slice(&USERDATA_MAGIC);
        data[4..].copy_from_slice(&self.key().to_be_bytes());
        data
    }

    /// The rule an audit packet-in's userdata names (None: not the audit's).
    pub fn of_userdata(data: &[u8]) -> Option<RuleRef> {
        let (magic, key) = data.split_first_chunk::<4>()?;
        let key: [u8; 4] = key.try_into().ok()?;
        (*magic == USERDATA_MAGIC)
            .then(|| RuleRef::of_key(u32::from_be_bytes(key)))
            .flatten()
    }
}

impl fmt::Display for RuleRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} {} {} #{}",
            self.tier.as_str(),
            self.dir.as_str(),
            self.verdict.as_str(),
            self.id
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn every_rule() -> impl Iterator<Item = RuleRef> {
        let tiers = [
            AuditTier::NetworkPolicy,
            AuditTier::Admin,
            AuditTier::Baseline,
        ];
        let verdicts = [Verdict::Allow, Verdict::Deny, Verdict::Pass];
        tiers.into_iter().flat_map(move |tier| {
            [Dir::Ingress, Dir::Egress]
                .into_iter()
                .flat_map(move |dir| {
                    verdicts.into_iter().flat_map(move |verdict| {
                        [1, 4096, ID_MASK].into_iter().map(move |id| RuleRef {
                            tier,
                            dir,
                            verdict,
                            id,
                        })
                    })
                })
        })
    }

    #[test]
    fn a_rule_survives_its_key_cookie_and_userdata() {
        for rule in every_rule() {
            assert_eq!(RuleRef::of_key(rule.key()), Some(rule), "{rule}");
            assert_eq!(RuleRef::of_cookie(rule.cookie()), Some(rule), "{rule}");
            assert_eq!(RuleRef::of_userdata(&rule.userdata()), Some(rule), "{rule}");
            // A meter id OpenFlow 1.3 allows (1..=OFPM_MAX).
            assert!(rule.key() != 0 && rule.key() <= 0xffff_0000, "{rule}");
        }
    }

    /// The API and the log spell a tier, direction and verdict as `as_str` does.
    #[test]
    fn serde_spells_the_words_as_str_does() {
        for rule in every_rule() {
            let json = serde_json::to_value(rule).unwrap();
            assert_eq!(json["tier"], rule.tier.as_str());
            assert_eq!(json["dir"], rule.dir.as_str());
            assert_eq!(json["verdict"], rule.verdict.as_str());
        }
    }

    #[test]
    fn foreign_cookies_and_userdata_name_no_rule() {
        assert_eq!(RuleRef::of_cookie(0), None);
        assert_eq!(RuleRef::of_cookie(0x4f41_0001_0000_0001), None);
        assert_eq!(RuleRef::of_userdata(b"ofA1"), None);
        assert_eq!(RuleRef::of_userdata(b"xxxx\0\0\0\x01"), None);
        assert_eq!(RuleRef::of_userdata(b"ofA1\0\0\0\x01\0"), None);
        // Tier bits 3 are no tier.
        assert_eq!(RuleRef::of_key(0xc000_0001), None);
    }

    #[test]
    fn audit_settings_parse_and_refuse_unknown_words() {
        let set: AuditSet = "allow, Deny".parse().unwrap();
        assert_eq!(
            set,
            AuditSet {
                allow: true,
                deny: true,
                pass: false
            }
        );
        assert_eq!(set.to_string(), "allow,deny");
        assert_eq!("".parse::<AuditSet>().unwrap(), AuditSet::NONE);
        assert_eq!("none".parse::<AuditSet>().unwrap().to_string(), "none");
        let err = "allow,drop".parse::<AuditSet>().unwrap_err();
        assert_eq!(err.value, "drop");
        assert!(err.to_string().contains("expected a comma-separated list"));
    }
}
