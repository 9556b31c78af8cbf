//! `output`: OFPAT_OUTPUT to a port (`output:3`, `LOCAL`, `CONTROLLER:65535`) and
//! NXAST_OUTPUT_REG to the port a field holds (`output:NXM_NX_REG2[]`). The `controller`
//! keyword, which gives an output to CONTROLLER when it says no more, is read in
//! controller.rs.

use bytes::{BufMut, BytesMut};

use super::fields::{decode_range, parse_subfield};
use super::{
    must_be_zero, nx_fixed, std_fixed, Action, Ctx, Kind, WireId, NXAST_OUTPUT_REG, OFPAT_OUTPUT,
    OFPCML_NO_BUFFER,
};
use crate::field::FieldRange;
use crate::text::error::{bad, ParseError};
use crate::text::lexer::Token;
use crate::text::value::{format_port, parse_port};
use crate::wire::Reader;
use crate::{
    DecodeError, EncodeError, OFPP_ALL, OFPP_CONTROLLER, OFPP_FLOOD, OFPP_IN_PORT, OFPP_LOCAL,
    OFPP_MAX, OFPP_NORMAL, OFPP_TABLE,
};

pub(super) static OUTPUT: Kind = Kind {
    wire: &[WireId::Std(OFPAT_OUTPUT)],
    keywords: &["output"],
    decode: decode_output,
    parse: parse_output,
};

pub(super) static OUTPUT_REG: Kind = Kind {
    wire: &[WireId::Nx(NXAST_OUTPUT_REG)],
    // Written as `output:FIELD[...]`, parsed with OUTPUT.
    keywords: &[],
    decode: decode_output_reg,
    parse: parse_output,
};

/// Reserved ports an output may name (OFPP_ANY is not one: ofpact_check_output_port).
const OUTPUT_RESERVED: [u32; 7] = [
    OFPP_IN_PORT,
    OFPP_TABLE,
    OFPP_NORMAL,
    OFPP_FLOOD,
    OFPP_ALL,
    OFPP_CONTROLLER,
    OFPP_LOCAL,
];

/// OpenFlow 1.1+ reserved ports are the OpenFlow 1.0 (16-bit) ones plus this offset.
const OFPP11_OFFSET: u32 = 0xffff_0000;

/// A port in the 16 bits NX actions (resubmit, set_field of NXM_OF_IN_PORT) carry: a port
/// below 0xff00 as it is, a reserved port in OpenFlow 1.0 numbers; `None` for the ports in
/// between, which 16 bits cannot say (cutting them would name another port).
pub(super) fn port16(port: u32) -> Option<u16> {
    if port < OFPP_MAX_16 {
        u16::try_from(port).ok()
    } else {
        port.checked_sub(OFPP11_OFFSET)
            .filter(|p| *p >= OFPP_MAX_16)
            .and_then(|p| u16::try_from(p).ok())
    }
}

/// The OpenFlow 1.3 port a 16-bit port names (the inverse of [`port16`]).
pub(super) fn port32(port: u16) -> u32 {
    let port = u32::from(port);
    if port >= OFPP_MAX_16 {
        port + OFPP11_OFFSET
    } else {
        port
    }
}

/// `output:port` with ovs-ofctl's max_len (65535 for CONTROLLER, else 0).
pub(super) fn output(port: u32) -> Action {
    let max_len = if port == OFPP_CONTROLLER {
        OFPCML_NO_BUFFER
    } else {
        0
    };
    Action::Output { port, max_len }
}

pub(super) fn encode_output(
    port: u32,
    max_len: u16,
    out: &mut BytesMut,
) -> Result<(), EncodeError> {
    let mut action = std_fixed::<16>(OFPAT_OUTPUT);
    action[4..8].copy_from_slice(&port.to_be_bytes());
    action[8..10].copy_from_slice(&max_len.to_be_bytes());
    out.put_slice(&action);
    Ok(())
}

pub(super) fn encode_output_reg(
    src: &FieldRange,
    max_len: u16,
    out: &mut BytesMut,
) -> Result<(), EncodeError> {
    let ofs_nbits = src.ofs_nbits("output:REG action")?;
    let mut action = nx_fixed::<24>(NXAST_OUTPUT_REG);
    action[10..12].copy_from_slice(&ofs_nbits.to_be_bytes());
    action[12..16].copy_from_slice(&src.field.info().action_id().header(false).to_be_bytes());
    action[16..18].copy_from_slice(&max_len.to_be_bytes());
    out.put_slice(&action);
    Ok(())
}

/// Whether OVS accepts an output to `port`: a port number below 0xff00 or a reserved port
/// other than ANY.
pub(super) fn check_port(port: u32) -> Result<(), String> {
    if port < OFPP_MAX_16 || OUTPUT_RESERVED.contains(&port) {
        Ok(())
    } else {
        Err(format!(
            "{} is not a port a packet can be output to",
            format_port(port)
        ))
    }
}

/// The first 32-bit number of the reserved range, in OpenFlow 1.0 terms (0xff00).
const OFPP_MAX_16: u32 = 0xff00;

fn decode_output(_: WireId, body: &mut Reader<'_>, _: Ctx) -> Result<Option<Action>, DecodeError> {
    let port = body.u32()?;
    let max_len = body.u16()?;
    if body.remaining() != 6 {
        return Err(DecodeError::BadLength {
            what: "output action",
            length: body.remaining() + 10,
            reason: "must be 16 bytes",
        });
    }
    // Numbers from 0xff00 up that are not a named reserved port (OFPP_ANY included) are no
    // port a packet can go to: OFPBAC_BAD_OUT_PORT.
    if check_port(port).is_err() {
        return Err(DecodeError::BadValue {
            what: "output port",
            value: u64::from(port),
        });
    }
    Ok(Some(Action::Output { port, max_len }))
}

fn decode_output_reg(
    _: WireId,
    body: &mut Reader<'_>,
    _: Ctx,
) -> Result<Option<Action>, DecodeError> {
    let ofs_nbits = body.u16()?;
    let header = body.u32()?;
    let max_len = body.u16()?;
    must_be_zero(body.rest(), "output:REG padding")?;
    let Some(src) = decode_range(header, ofs_nbits, "output:REG source")? else {
        return Ok(None);
    };
    Ok(Some(Action::OutputReg { src, max_len }))
}

pub(super) fn format_output(port: u32, max_len: u16, out: &mut String) {
    let name = format_port(port);
    if port == OFPP_CONTROLLER {
        out.push_str(&format!("{name}:{max_len}"));
    } else if port >= OFPP_MAX {
        out.push_str(&name);
    } else {
        out.push_str(&format!("output:{name}"));
    }
}

pub(super) fn format_output_reg(src: &FieldRange, out: &mut String) {
    out.push_str(&format!("output:{src}"));
}

/// `output:PORT`, `output:FIELD[...]`.
fn parse_output(token: &Token<'_>, _: Ctx) -> Result<Vec<Action>, ParseError> {
    let value = token.value.ok_or_else(|| bad(token, "missing port"))?;
    if value.contains('[') {
        let src = parse_subfield(token, value)?;
        if src.n_bits > 64 {
            return Err(bad(token, "output:FIELD[...] reads at most 64 bits"));
        }
        return Ok(vec![Action::OutputReg {
            src,
            max_len: OFPCML_NO_BUFFER,
        }]);
    }
    let port = parse_port(value).ok_or_else(|| bad(token, "not a valid port"))?;
    Ok(vec![output(port)])
}

/// A bare port (`2`, `LOCAL`, `IN_PORT`) is an output to it.
pub(super) fn parse_bare_port(token: &Token<'_>) -> Result<Vec<Action>, ParseError> {
    match (token.value, parse_port(token.key)) {
        (None, Some(port)) => Ok(vec![output(port)]),
        _ => Err(ParseError::UnknownAction(token.text.to_string())),
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::roundtrip;
    use super::*;
    use crate::test_util::hex;
    use crate::Field;

    #[test]
    fn sixteen_bit_ports_are_exact_or_refused() {
        for (port, wire) in [
            (0, Some(0)),
            (0xfeff, Some(0xfeff)),
            (0xff00, None),
            (0x1_0005, None),
            (0xffff_feff, None),
            (0xffff_ff00, Some(0xff00)),
            (OFPP_LOCAL, Some(0xfffe)),
        ] {
            assert_eq!(port16(port), wire, "{port:#x}");
            if let Some(w) = wire {
                assert_eq!(port32(w), port);
            }
        }
    }

    // Captured from ovs-ofctl 3.1 (see the test names' comments).

    #[test]
    fn output_reg() {
        // actions=output:NXM_NX_REG2[]
        roundtrip(
            "ffff001800002320000f001f00010404ffff000000000000",
            &[Action::OutputReg {
                src: FieldRange::whole(Field::Reg(2)),
                max_len: 0xffff,
            }],
        );
    }

    #[test]
    fn reserved_ports() {
        // actions=output:IN_PORT,LOCAL,CONTROLLER
        roundtrip(
            "00000010fffffff8000000000000000000000010fffffffe000000000000000000000010fffffffdffff000000000000",
            &[
                Action::output(OFPP_IN_PORT),
                Action::output(OFPP_LOCAL),
                Action::output(OFPP_CONTROLLER),
            ],
        );
    }

    #[test]
    fn refuses_what_ovs_refuses() {
        // tests/ofp-actions.at: output to OFPP_ANY is OFPBAC_BAD_OUT_PORT; so is an unnamed
        // reserved number; output:REG with non-zero padding is NXBRC_MUST_BE_ZERO.
        for bad in [
            "00000010ffffffff000000000000",
            "00000010ffffffff0000000000000000",
            "00000010ffffff500000000000000000",
            "00000010ffffff000000000000000000",
            "ffff001800002320000f001f00010404ffff000000000001",
        ] {
            assert!(
                super::super::decode_actions(&mut Reader::new(&hex(bad), "t")).is_err(),
                "{bad}"
            );
        }
    }
}
