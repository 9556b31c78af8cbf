//! `resubmit`: NXAST_RESUBMIT, NXAST_RESUBMIT_TABLE and NXAST_RESUBMIT_TABLE_CT — look the
//! packet up again, as if it came in on another port, in another table, or with the
//! conntrack original-direction fields (`resubmit:3`, `resubmit(,30)`, `resubmit(3,30,ct)`).

use bytes::{BufMut, BytesMut};

use super::output::{port16, port32};
use super::{
    must_be_zero, nx_fixed, Action, Ctx, Kind, WireId, NXAST_RESUBMIT, NXAST_RESUBMIT_TABLE,
    NXAST_RESUBMIT_TABLE_CT,
};
use crate::field::Prereq;
use crate::oxm::Match;
use crate::text::error::{bad, number, ParseError};
use crate::text::lexer::Token;
use crate::text::value::{format_port, parse_port};
use crate::wire::Reader;
use crate::{DecodeError, EncodeError, OFPP_IN_PORT};

pub(super) static RESUBMIT: Kind = Kind {
    wire: &[
        WireId::Nx(NXAST_RESUBMIT),
        WireId::Nx(NXAST_RESUBMIT_TABLE),
        WireId::Nx(NXAST_RESUBMIT_TABLE_CT),
    ],
    keywords: &["resubmit"],
    decode,
    parse,
};

/// No table: the current one.
const TABLE_CURRENT: u8 = 0xff;
/// A resubmit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Resubmit {
    /// The port to look up as (`OFPP_IN_PORT`: the packet's own).
    pub in_port: u32,
    /// The table to look up in (`None`: the current one).
    pub table: Option<u8>,
    /// Look up with the conntrack original-direction fields (NXAST_RESUBMIT_TABLE_CT).
    pub ct: bool,
    /// Came as the original NXAST_RESUBMIT (port only), which is sent back the same way;
    /// ovs-ofctl itself always sends NXAST_RESUBMIT_TABLE.
    pub legacy: bool,
}

impl Resubmit {
    pub(super) fn encode(&self, out: &mut BytesMut) -> Result<(), EncodeError> {
        // The wire form has 16 bits of port (reserved ports in OpenFlow 1.0 numbers).
        let port = port16(self.in_port).ok_or(EncodeError::BadValue {
            what: "resubmit port",
            value: u128::from(self.in_port),
            reason: "NXAST_RESUBMIT holds a port below 0xff00 or a reserved port",
        })?;
        let legacy = self.legacy && self.table.is_none() && !self.ct;
        let subtype = match (legacy, self.ct) {
            (true, _) => NXAST_RESUBMIT,
            (false, true) => NXAST_RESUBMIT_TABLE_CT,
            (false, false) => NXAST_RESUBMIT_TABLE,
        };
        let mut action = nx_fixed::<16>(subtype);
        action[10..12].copy_from_slice(&port.to_be_bytes());
        if !legacy {
            action[12] = self.table.unwrap_or(TABLE_CURRENT);
        }
        out.put_slice(&action);
        Ok(())
    }

    /// format_RESUBMIT: `resubmit:PORT` for a port alone, else `resubmit([PORT],[TABLE][,ct])`.
    pub(super) fn format(&self, out: &mut String) {
        let port = (self.in_port != OFPP_IN_PORT).then(|| format_port(self.in_port));
        match (port, self.table) {
            (Some(port), None) if !self.ct => out.push_str(&format!("resubmit:{port}")),
            (port, table) => {
                let table = table.map(|t| t.to_string()).unwrap_or_default();
                let ct = if self.ct { ",ct" } else { "" };
                out.push_str(&format!(
                    "resubmit({},{table}{ct})",
                    port.unwrap_or_default()
                ));
            }
        }
    }

    /// check_RESUBMIT: the ct form needs a match that implies a connection.
    pub(super) fn check(&self, m: &Match) -> Result<(), String> {
        if self.ct && !Prereq::CtValid.is_met(m) {
            return Err(format!(
                "resubmit(...,ct) needs `{}`",
                Prereq::CtValid.describe()
            ));
        }
        Ok(())
    }
}

fn decode(id: WireId, body: &mut Reader<'_>, _: Ctx) -> Result<Option<Action>, DecodeError> {
    let in_port = port32(body.u16()?);
    let legacy = id == WireId::Nx(NXAST_RESUBMIT);
    let table = if legacy {
        TABLE_CURRENT
    } else {
        let table = body.u8()?;
        must_be_zero(body.rest(), "resubmit padding (OFPBAC_BAD_ARGUMENT)")?;
        table
    };
    Ok(Some(Action::Resubmit(Resubmit {
        in_port,
        table: (table != TABLE_CURRENT).then_some(table),
        ct: id == WireId::Nx(NXAST_RESUBMIT_TABLE_CT),
        legacy,
    })))
}

/// `resubmit:PORT`, `resubmit([PORT],[TABLE][,ct])`.
fn parse(token: &Token<'_>, _: Ctx) -> Result<Vec<Action>, ParseError> {
    let v = token
        .value
        .ok_or_else(|| bad(token, "resubmit needs a port or a table"))?;
    let mut parts = v.split(',');
    let port = parts.next().unwrap_or("").trim();
    let table = parts.next().unwrap_or("").trim();
    let ct = match parts.next().map(str::trim) {
        None | Some("") => false,
        Some("ct") => true,
        Some(other) => {
            return Err(bad(
                token,
                format!("`{other}`: the third argument can only be ct"),
            ))
        }
    };
    if parts.next().is_some() {
        return Err(bad(token, "resubmit takes at most port, table and ct"));
    }
    let in_port = if port.is_empty() {
        OFPP_IN_PORT
    } else {
        parse_port(port).ok_or_else(|| bad(token, format!("`{port}` is not a valid port")))?
    };
    let table = if table.is_empty() {
        None
    } else {
        Some(number::<u8>(token, table)?).filter(|t| *t != TABLE_CURRENT)
    };
    if in_port == OFPP_IN_PORT && table.is_none() {
        return Err(bad(token, "resubmit needs a port or a table"));
    }
    Ok(vec![Action::Resubmit(Resubmit {
        in_port,
        table,
        ct,
        legacy: false,
    })])
}

#[cfg(test)]
mod tests {
    use super::super::format_list;
    use super::super::tests::roundtrip;
    use super::*;

    #[test]
    fn resubmit_from_ovs() {
        // tests/ofp-actions.at and ovs-ofctl 3.1 captures, with what OVS prints.
        for (bytes, text) in [
            ("ffff0010000023200001000500000000", "resubmit:5"),
            ("ffff001000002320000e000a05000000", "resubmit(10,5)"),
            ("ffff001000002320002c000a05000000", "resubmit(10,5,ct)"),
            ("ffff001000002320000efff81e000000", "resubmit(,30)"),
            ("ffff001000002320000e0003ff000000", "resubmit:3"),
            ("ffff001000002320002cfff81e000000", "resubmit(,30,ct)"),
        ] {
            let decoded =
                super::super::decode_actions(&mut Reader::new(&crate::test_util::hex(bytes), "t"))
                    .unwrap();
            let mut printed = String::new();
            format_list(&decoded, &mut printed);
            assert_eq!(printed, text);
            roundtrip(bytes, &decoded);
        }
    }
}
