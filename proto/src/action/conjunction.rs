//! `conjunction(id,k/n)`: NXAST_CONJUNCTION, clause k of n of conjunctive match `id`.

use bytes::{BufMut, BytesMut};

use super::{nx_fixed, Action, Ctx, Kind, WireId, NXAST_CONJUNCTION};
use crate::text::error::{bad, ParseError};
use crate::text::lexer::Token;
use crate::text::value::parse_uint;
use crate::wire::Reader;
use crate::{DecodeError, EncodeError};

pub(super) static CONJUNCTION: Kind = Kind {
    wire: &[WireId::Nx(NXAST_CONJUNCTION)],
    keywords: &["conjunction"],
    decode,
    parse,
};

/// One clause of a conjunctive match: the flow matches dimension `clause` (1-based, as
/// printed) of the `n_clauses` dimensions of conjunction `id`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Conjunction {
    pub id: u32,
    /// 1 to `n_clauses`.
    pub clause: u8,
    /// 2 to 64.
    pub n_clauses: u8,
}

impl Conjunction {
    pub(super) fn encode(&self, out: &mut BytesMut) -> Result<(), EncodeError> {
        // On the wire the clause is 0-based: clause 0 has no wire form.
        let wire_clause = match (self.check(), self.clause.checked_sub(1)) {
            (Ok(()), Some(clause)) => clause,
            _ => {
                return Err(EncodeError::BadConjunction {
                    id: self.id,
                    clause: self.clause,
                    n_clauses: self.n_clauses,
                })
            }
        };
        let mut action = nx_fixed::<16>(NXAST_CONJUNCTION);
        action[10] = wire_clause;
        action[11] = self.n_clauses;
        action[12..].copy_from_slice(&self.id.to_be_bytes());
        out.put_slice(&action);
        Ok(())
    }

    pub(super) fn format(&self, out: &mut String) {
        out.push_str(&format!(
            "conjunction({},{}/{})",
            self.id, self.clause, self.n_clauses
        ));
    }

    fn check(&self) -> Result<(), &'static str> {
        if !(2..=64).contains(&self.n_clauses) {
            Err("a conjunction has 2 to 64 clauses")
        } else if self.clause == 0 || self.clause > self.n_clauses {
            Err("the clause number is 1 to the number of clauses")
        } else {
            Ok(())
        }
    }
}

fn decode(_: WireId, body: &mut Reader<'_>, _: Ctx) -> Result<Option<Action>, DecodeError> {
    let clause = body.u8()?;
    let n_clauses = body.u8()?;
    let id = body.u32()?;
    let c = Conjunction {
        id,
        clause: clause.saturating_add(1),
        n_clauses,
    };
    match (clause < n_clauses).then_some(()).and(c.check().ok()) {
        Some(()) => Ok(Some(Action::Conjunction(c))),
        None => Err(DecodeError::BadValue {
            what: "conjunction clause/clauses (NXBAC_BAD_CONJUNCTION)",
            value: u64::from(u16::from_be_bytes([clause, n_clauses])),
        }),
    }
}

/// `conjunction(ID,K/N)`.
fn parse(token: &Token<'_>, _: Ctx) -> Result<Vec<Action>, ParseError> {
    let syntax = || bad(token, "the syntax is conjunction(id,k/n)");
    let v = token.value.ok_or_else(syntax)?;
    let (id, clauses) = v.split_once(',').ok_or_else(syntax)?;
    let (k, n) = clauses.split_once('/').ok_or_else(syntax)?;
    let id = parse_uint(id.trim())
        .and_then(|id| u32::try_from(id).ok())
        .ok_or_else(syntax)?;
    let (clause, n_clauses) = match (k.trim().parse::<u8>(), n.trim().parse::<u8>()) {
        (Ok(k), Ok(n)) => (k, n),
        _ => return Err(syntax()),
    };
    let c = Conjunction {
        id,
        clause,
        n_clauses,
    };
    c.check().map_err(|reason| bad(token, reason))?;
    Ok(vec![Action::Conjunction(c)])
}

#[cfg(test)]
mod tests {
    use super::super::decode_actions;
    use super::super::tests::roundtrip;
    use super::*;
    use crate::test_util::hex;

    #[test]
    fn conjunction_from_ovs() {
        // actions=conjunction(1,2/3) (ovs-ofctl 3.1)
        roundtrip(
            "ffff0010000023200022010300000001",
            &[Action::Conjunction(Conjunction {
                id: 1,
                clause: 2,
                n_clauses: 3,
            })],
        );
        // A clause past the number of clauses, or a single clause: NXBAC_BAD_CONJUNCTION.
        for bad in [
            "ffff0010000023200022030300000001",
            "ffff0010000023200022000100000001",
        ] {
            assert!(
                decode_actions(&mut Reader::new(&hex(bad), "t")).is_err(),
                "{bad}"
            );
        }
    }
}
