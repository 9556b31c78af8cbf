//! A log line, in either format. The JSON fields (stable; absent never, null when unknown):
//!
//! | field | meaning |
//! |---|---|
//! | `time` | when the first of the folded events was seen, UTC, RFC 3339 with microseconds |
//! | `node` | the node's name |
//! | `direction` | `ingress` or `egress`: the side of the pod the rule judges |
//! | `tier` | `admin`, `networkpolicy` or `baseline` |
//! | `namespace`, `policy` | the policy (null where the tier has none, or the rule is unknown) |
//! | `rule` | `ingress[0]`, an admin rule's name, `default-deny`, or `key=0x…` when unknown |
//! | `verdict` | `allow`, `deny` or `pass` |
//! | `protocol` | `tcp`, `udp`, `sctp`, `icmp`, or the IP protocol number |
//! | `src_ip`, `src_port`, `dst_ip`, `dst_port` | ports null without TCP/UDP/SCTP |
//! | `icmp_type`, `icmp_code` | only for ICMP |
//! | `src_pod`, `dst_pod` | `namespace/name` of the pod holding the address, or null |
//! | `count` | identical events folded into this line within its second |
//! | `isolated_by` | only for `default-deny`: the policies isolating that side |
//!
//! The line for what was lost: `{"time":…,"node":…,"dropped":N,"switch_channel":A,"queue":B}`
//! (N = A + B since the previous such line).

use std::fmt::Write;
use std::time::{SystemTime, UNIX_EPOCH};

use serde::Serialize;

use super::config::LineFormat;
use super::names::{Names, RuleNames};
use super::window::Folded;
use crate::sdn::audit::{AuditTier, RuleRef, Verdict};

/// A folded event and the names found for it.
#[derive(Debug, Clone, Copy)]
pub struct Line<'a> {
    pub folded: &'a Folded,
    pub names: &'a Names,
    pub node: &'a str,
}

#[derive(Serialize)]
struct JsonLine<'a> {
    time: String,
    node: &'a str,
    direction: &'static str,
    tier: &'static str,
    namespace: Option<&'a str>,
    policy: Option<&'a str>,
    rule: String,
    verdict: &'static str,
    protocol: String,
    src_ip: String,
    src_port: Option<u16>,
    dst_ip: String,
    dst_port: Option<u16>,
    #[serde(skip_serializing_if = "Option::is_none")]
    icmp_type: Option<u8>,
    #[serde(skip_serializing_if = "Option::is_none")]
    icmp_code: Option<u8>,
    src_pod: Option<&'a str>,
    dst_pod: Option<&'a str>,
    count: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    isolated_by: Option<&'a [String]>,
}

impl<'a> Line<'a> {
    fn rule_names(&self) -> Option<&'a RuleNames> {
        self.names.rules.get(&self.folded.event.rule.key())
    }

    fn rule_label(&self) -> String {
        match self.rule_names() {
            // An admin rule is known by its own name where it has one.
            Some(names) => names
                .rule_name
                .clone()
                .unwrap_or_else(|| names.rule.clone()),
            None => format!("key={:#010x}", self.folded.event.rule.key()),
        }
    }

    fn pod(&self, ip: std::net::Ipv4Addr) -> Option<&'a str> {
        self.names.pods.get(&ip).map(String::as_str)
    }

    pub fn render(&self, format: LineFormat) -> String {
        match format {
            LineFormat::Json => self.json(),
            LineFormat::Text => self.text(),
        }
    }

    pub fn json(&self) -> String {
        let Folded {
            event,
            first_seen,
            count,
        } = self.folded;
        let (rule, t) = (event.rule, event.tuple);
        let names = self.rule_names();
        let isolated_by =
            is_isolation(rule).then(|| names.map_or(&[][..], |n| n.isolated_by.as_slice()));
        let line = JsonLine {
            time: rfc3339(*first_seen),
            node: self.node,
            direction: rule.dir.as_str(),
            tier: rule.tier.as_str(),
            namespace: names.and_then(|n| n.namespace.as_deref()),
            policy: names.and_then(|n| n.policy.as_deref()),
            rule: self.rule_label(),
            verdict: rule.verdict.as_str(),
            protocol: t.protocol.name(),
            src_ip: t.src.to_string(),
            src_port: t.src_port,
            dst_ip: t.dst.to_string(),
            dst_port: t.dst_port,
            icmp_type: t.icmp.map(|(ty, _)| ty),
            icmp_code: t.icmp.map(|(_, code)| code),
            src_pod: self.pod(t.src),
            dst_pod: self.pod(t.dst),
            count: *count,
            isolated_by,
        };
        serde_json::to_string(&line).unwrap_or_default()
    }

    /// `2026/12/06 21:40:00.123456 node-1 ingress networkpolicy ns2/web ingress[0] allow tcp
    /// 10.128.0.5:34567 ns1/a -> 10.128.1.7:80 ns2/b count=1`; `-` for what is unknown.
    pub fn text(&self) -> String {
        let Folded {
            event,
            first_seen,
            count,
        } = self.folded;
        let (rule, t) = (event.rule, event.tuple);
        let names = self.rule_names();
        let policy = match names {
            Some(n) if n.namespace.is_some() || n.policy.is_some() => format!(
                "{}{}",
                n.namespace
                    .as_deref()
                    .map_or(String::new(), |ns| format!("{ns}/")),
                n.policy.as_deref().unwrap_or("-")
            ),
            _ => "-".to_string(),
        };
        let endpoint = |ip: std::net::Ipv4Addr, port: Option<u16>| match port {
            Some(port) => format!("{ip}:{port} {}", self.pod(ip).unwrap_or("-")),
            None => format!("{ip} {}", self.pod(ip).unwrap_or("-")),
        };
        let mut out = format!(
            "{} {} {} {} {policy} {} {} {} {} -> {}",
            text_time(*first_seen),
            self.node,
            rule.dir.as_str(),
            rule.tier.as_str(),
            self.rule_label(),
            rule.verdict.as_str(),
            t.protocol.name(),
            endpoint(t.src, t.src_port),
            endpoint(t.dst, t.dst_port),
        );
        if let Some((ty, code)) = t.icmp {
            let _ = write!(out, " icmp_type={ty} icmp_code={code}");
        }
        let _ = write!(out, " count={count}");
        if let Some(n) = names.filter(|n| !n.isolated_by.is_empty()) {
            let _ = write!(out, " isolated_by={}", n.isolated_by.join(","));
        }
        out
    }
}

/// NetworkPolicy's drop of what no policy allowed (its `isolated_by` says which isolate).
fn is_isolation(rule: RuleRef) -> bool {
    rule.tier == AuditTier::NetworkPolicy && rule.verdict == Verdict::Deny
}

/// What was lost since the last such line: in the switch's channel and in the line queue.
pub fn dropped(
    format: LineFormat,
    now: SystemTime,
    node: &str,
    switch_channel: u64,
    queue: u64,
) -> String {
    let total = switch_channel + queue;
    match format {
        LineFormat::Json => format!(
            "{{\"time\":\"{}\",\"node\":{},\"dropped\":{total},\"switch_channel\":{switch_channel},\"queue\":{queue}}}",
            rfc3339(now),
            serde_json::to_string(node).unwrap_or_default()
        ),
        LineFormat::Text => format!(
            "{} {node} dropped={total} switch_channel={switch_channel} queue={queue}",
            text_time(now)
        ),
    }
}

/// The UTC calendar date and time of `t`: (year, month, day, hour, minute, second, micros).
fn civil(t: SystemTime) -> (i64, u32, u32, u64, u64, u64, u32) {
    let since = t.duration_since(UNIX_EPOCH).unwrap_or_default();
    let secs = since.as_secs();
    let (days, rem) = (secs / 86_400, secs % 86_400);
    // Howard Hinnant's days-to-civil, for days since 1970-01-01.
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (
        year,
        month,
        day,
        rem / 3600,
        rem % 3600 / 60,
        rem % 60,
        since.subsec_micros(),
    )
}

/// `2026-12-06T21:40:00.123456Z`.
pub fn rfc3339(t: SystemTime) -> String {
    let (y, mo, d, h, mi, s, us) = civil(t);
    format!("{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{s:02}.{us:06}Z")
}

/// `2026/12/06 21:40:00.123456` (UTC).
fn text_time(t: SystemTime) -> String {
    let (y, mo, d, h, mi, s, us) = civil(t);
    format!("{y:04}/{mo:02}/{d:02} {h:02}:{mi:02}:{s:02}.{us:06}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sdn::audit::Dir;
    use crate::sdn::audit_log::packet::{parse, tests::frame, tests::tcp};
    use crate::sdn::audit_log::window::Event;
    use std::time::Duration;

    /// 2026-12-06T21:40:00.123456Z.
    fn when() -> SystemTime {
        UNIX_EPOCH + Duration::from_micros(1_796_593_200_123_456)
    }

    fn rule(verdict: Verdict, id: u32) -> RuleRef {
        RuleRef {
            tier: AuditTier::NetworkPolicy,
            dir: Dir::Ingress,
            verdict,
            id,
        }
    }

    fn names() -> Names {
        let mut names = Names::default();
        names.rules.insert(
            rule(Verdict::Allow, 1).key(),
            RuleNames {
                namespace: Some("ns2".into()),
                policy: Some("web".into()),
                rule: "ingress[0]".into(),
                ..RuleNames::unnamed(rule(Verdict::Allow, 1))
            },
        );
        names.rules.insert(
            rule(Verdict::Deny, 12).key(),
            RuleNames {
                namespace: Some("ns2".into()),
                policy: None,
                rule: "default-deny".into(),
                isolated_by: vec!["ns2/web".into(), "ns2/db".into()],
                ..RuleNames::unnamed(rule(Verdict::Deny, 12))
            },
        );
        names
            .pods
            .insert("10.128.0.5".parse().unwrap(), "ns1/a".into());
        names
            .pods
            .insert("10.128.1.7".parse().unwrap(), "ns2/b".into());
        names
    }

    fn folded(rule: RuleRef, packet: &[u8], count: u64) -> Folded {
        Folded {
            event: Event {
                rule,
                tuple: parse(packet).unwrap(),
            },
            first_seen: when(),
            count,
        }
    }

    #[test]
    fn the_time_is_utc_with_microseconds() {
        assert_eq!(rfc3339(when()), "2026-12-06T21:40:00.123456Z");
        assert_eq!(rfc3339(UNIX_EPOCH), "1970-01-01T00:00:00.000000Z");
        // A leap day.
        let leap = UNIX_EPOCH + Duration::from_secs(951_782_400);
        assert_eq!(text_time(leap), "2000/02/29 00:00:00.000000");
    }

    #[test]
    fn the_json_line_is_the_documented_one() {
        let names = names();
        let f = folded(rule(Verdict::Allow, 1), &tcp(34567, 80), 1);
        let line = Line {
            folded: &f,
            names: &names,
            node: "node-1",
        };
        assert_eq!(
            line.json(),
            r#"{"time":"2026-12-06T21:40:00.123456Z","node":"node-1","direction":"ingress","tier":"networkpolicy","namespace":"ns2","policy":"web","rule":"ingress[0]","verdict":"allow","protocol":"tcp","src_ip":"10.128.0.5","src_port":34567,"dst_ip":"10.128.1.7","dst_port":80,"src_pod":"ns1/a","dst_pod":"ns2/b","count":1}"#
        );
        assert_eq!(
            line.text(),
            "2026/12/06 21:40:00.123456 node-1 ingress networkpolicy ns2/web ingress[0] allow tcp 10.128.0.5:34567 ns1/a -> 10.128.1.7:80 ns2/b count=1"
        );
    }

    #[test]
    fn an_isolation_drop_names_the_policies_isolating() {
        let names = names();
        let f = folded(rule(Verdict::Deny, 12), &tcp(1, 81), 7);
        let line = Line {
            folded: &f,
            names: &names,
            node: "n",
        };
        let json: serde_json::Value = serde_json::from_str(&line.json()).unwrap();
        assert_eq!(json["policy"], serde_json::Value::Null);
        assert_eq!(json["rule"], "default-deny");
        assert_eq!(
            json["isolated_by"],
            serde_json::json!(["ns2/web", "ns2/db"])
        );
        assert_eq!(json["count"], 7);
        assert!(line
            .text()
            .ends_with("ns2/- default-deny deny tcp 10.128.0.5:1 ns1/a -> 10.128.1.7:81 ns2/b count=7 isolated_by=ns2/web,ns2/db"),
            "{}", line.text());
    }

    #[test]
    fn unknown_names_and_icmp_are_said_plainly() {
        let names = Names::default();
        let icmp = frame(1, [10, 128, 0, 5], [192, 0, 2, 1], &[8, 0, 0, 0]);
        let f = folded(rule(Verdict::Allow, 99), &icmp, 2);
        let line = Line {
            folded: &f,
            names: &names,
            node: "n",
        };
        let json: serde_json::Value = serde_json::from_str(&line.json()).unwrap();
        assert_eq!(
            json["rule"],
            format!("key={:#010x}", rule(Verdict::Allow, 99).key())
        );
        assert_eq!(json["src_port"], serde_json::Value::Null);
        assert_eq!(
            (json["icmp_type"].clone(), json["icmp_code"].clone()),
            (8.into(), 0.into())
        );
        assert_eq!(json["src_pod"], serde_json::Value::Null);
        assert!(line.text().contains(" - key=0x"), "{}", line.text());
        assert!(line
            .text()
            .ends_with("allow icmp 10.128.0.5 - -> 192.0.2.1 - icmp_type=8 icmp_code=0 count=2"));
    }

    #[test]
    fn the_dropped_line_in_both_formats() {
        let json = dropped(LineFormat::Json, when(), "node-1", 3, 4);
        let v: serde_json::Value = serde_json::from_str(&json).unwrap();
        assert_eq!(v["dropped"], 7);
        assert_eq!(
            (v["switch_channel"].clone(), v["queue"].clone()),
            (3.into(), 4.into())
        );
        assert_eq!(
            dropped(LineFormat::Text, when(), "node-1", 0, 5),
            "2026/12/06 21:40:00.123456 node-1 dropped=5 switch_channel=0 queue=5"
        );
    }
}
