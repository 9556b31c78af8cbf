//! Writing fields: `set_field` (OFPAT_SET_FIELD; also `mod_dl_src`/`mod_dl_dst`, which OVS
//! sends as set_field in OpenFlow 1.3), `load` (NXAST_REG_LOAD) and `move` (NXAST_REG_MOVE),
//! and the bit-range syntax (`NXM_NX_REG0[0..15]`) they and output:REG share.

use bytes::{BufMut, BytesMut};

use super::{
    must_be_zero, nx_fixed, std_header, Action, Ctx, Kind, WireId, NXAST_REG_LOAD, NXAST_REG_MOVE,
    OFPAT_SET_FIELD,
};
use crate::field::{Access, Field, FieldRange, TlvHeader, OFPXMC_EXPERIMENTER};
use crate::oxm::Match;
use crate::text::error::{bad, number, ParseError};
use crate::text::lexer::Token;
use crate::text::value::{alt_hex, format_set_field_value, parse_field_value, parse_wide};
use crate::wire::{be_uint, put_uint, Reader};
use crate::{DecodeError, EncodeError};

pub(super) static SET_FIELD: Kind = Kind {
    wire: &[WireId::Std(OFPAT_SET_FIELD)],
    keywords: &["set_field", "mod_dl_src", "mod_dl_dst"],
    decode: decode_set_field,
    parse: parse_set_field,
};

pub(super) static LOAD: Kind = Kind {
    wire: &[WireId::Nx(NXAST_REG_LOAD)],
    keywords: &["load"],
    decode: decode_load,
    parse: parse_load,
};

pub(super) static MOVE: Kind = Kind {
    wire: &[WireId::Nx(NXAST_REG_MOVE)],
    keywords: &["move"],
    decode: decode_move,
    parse: parse_move,
};

pub(super) fn encode_set_field(
    field: Field,
    value: u128,
    out: &mut BytesMut,
) -> Result<(), EncodeError> {
    let info = field.info();
    let id = info.set_field_id();
    let value = if field == Field::InPort {
        // in_port goes as the 16-bit NXM_OF_IN_PORT: reserved ports in OpenFlow 1.0 numbers.
        let port = u32::try_from(value).ok().and_then(super::output::port16);
        u128::from(port.ok_or(EncodeError::BadValue {
            what: "set_field of in_port",
            value,
            reason: "NXM_OF_IN_PORT holds a port below 0xff00 or a reserved port",
        })?)
    } else if value & !info.significant != 0 {
        return Err(EncodeError::BadValue {
            what: "set_field value",
            value,
            reason: "it has bits the field does not have",
        });
    } else {
        value
    };
    let slot = std_header(out, OFPAT_SET_FIELD, "set_field action");
    out.put_u32(id.header(false));
    if id.is_experimenter() {
        out.put_u32(id.experimenter);
    }
    put_uint(out, value, usize::from(id.bytes));
    slot.finish(out, true).map(|_| ())
}

pub(super) fn encode_load(
    dst: &FieldRange,
    value: u64,
    out: &mut BytesMut,
) -> Result<(), EncodeError> {
    let ofs_nbits = dst.ofs_nbits("load action")?;
    if dst.n_bits < 64 && value >> dst.n_bits != 0 {
        return Err(EncodeError::BadValue {
            what: "load value",
            value: u128::from(value),
            reason: "wider than its destination range",
        });
    }
    let mut action = nx_fixed::<24>(NXAST_REG_LOAD);
    action[10..12].copy_from_slice(&ofs_nbits.to_be_bytes());
    action[12..16].copy_from_slice(&dst.field.info().action_id().header(false).to_be_bytes());
    action[16..].copy_from_slice(&value.to_be_bytes());
    out.put_slice(&action);
    Ok(())
}

pub(super) fn encode_move(
    src: &FieldRange,
    dst: &FieldRange,
    out: &mut BytesMut,
) -> Result<(), EncodeError> {
    src.check_sendable("move source")?;
    dst.check_sendable("move destination")?;
    if src.n_bits != dst.n_bits {
        // The wire form has one width: the destination would silently take the source's.
        return Err(EncodeError::BadFieldRange {
            what: "move destination",
            range: *dst,
            reason: "not as wide as the source",
        });
    }
    let mut action = nx_fixed::<24>(NXAST_REG_MOVE);
    action[10..12].copy_from_slice(&src.n_bits.to_be_bytes());
    action[12..14].copy_from_slice(&src.ofs.to_be_bytes());
    action[14..16].copy_from_slice(&dst.ofs.to_be_bytes());
    action[16..20].copy_from_slice(&src.field.info().action_id().header(false).to_be_bytes());
    action[20..24].copy_from_slice(&dst.field.info().action_id().header(false).to_be_bytes());
    out.put_slice(&action);
    Ok(())
}

pub(super) fn format_set_field(field: Field, value: u128, out: &mut String) {
    let info = field.info();
    out.push_str(&format!(
        "set_field:{}->{}",
        format_set_field_value(info, value),
        info.names[0]
    ));
}

pub(super) fn format_load(dst: &FieldRange, value: u64, out: &mut String) {
    out.push_str(&format!("load:{}->{dst}", alt_hex(u128::from(value))));
}

pub(super) fn format_move(src: &FieldRange, dst: &FieldRange, out: &mut String) {
    out.push_str(&format!("move:{src}->{dst}"));
}

/// Whether the match lets an action touch `field`: its packet type must have it
/// (OFPBAC_MATCH_INCONSISTENT otherwise).
pub(super) fn check_has(m: &Match, field: Field) -> Result<(), String> {
    let prereq = field.info().prereq;
    if prereq.is_met(m) {
        Ok(())
    } else {
        Err(format!(
            "{field} needs `{}` in the match",
            prereq.describe()
        ))
    }
}

/// The error for writing a field that may not be written where it is.
fn not_writable(field: Field, ctx: Ctx) -> String {
    match (field.info().access, ctx.inside_ct) {
        (Access::ReadOnly, _) => format!("{field} is read-only"),
        (Access::InsideCt, false) => format!("{field} can only be set inside ct(commit,exec(...))"),
        _ => format!("ct(...,exec(...)) sets only ct_mark and ct_label, not {field}"),
    }
}

fn decode_not_writable(field: Field, what: &'static str) -> DecodeError {
    DecodeError::BadFieldValue {
        what,
        field,
        value: 0,
    }
}

fn decode_set_field(
    _: WireId,
    body: &mut Reader<'_>,
    ctx: Ctx,
) -> Result<Option<Action>, DecodeError> {
    let h = TlvHeader::from_u32(body.u32()?);
    let experimenter = if h.class == OFPXMC_EXPERIMENTER {
        body.u32()?
    } else {
        0
    };
    let Some((field, id)) = Field::from_id(h.class, h.field, experimenter) else {
        return Ok(None);
    };
    if h.masked {
        return Err(DecodeError::BadValue {
            what: "set_field (masked in OpenFlow 1.3: OFPBAC_BAD_SET_MASK)",
            value: u64::from(h.len),
        });
    }
    let value_len = usize::from(h.len).saturating_sub(if id.is_experimenter() { 4 } else { 0 });
    if value_len != usize::from(id.bytes) {
        return Err(DecodeError::BadLength {
            what: "set_field value",
            length: value_len,
            reason: "differs from the field's width (OFPBAC_BAD_SET_LEN)",
        });
    }
    let info = field.info();
    let mut value = be_uint(body.take(value_len)?);
    must_be_zero(body.rest(), "set_field padding")?;
    if field == Field::InPort && id != info.set_field_id() {
        // OpenFlow forbids setting OXM_OF_IN_PORT (OVS: OFPBAC_BAD_SET_ARGUMENT).
        return Err(decode_not_writable(field, "set_field of OXM_OF_IN_PORT"));
    }
    if id.bytes < info.bytes {
        // NXM_OF_IN_PORT: 16 bits, reserved ports in OpenFlow 1.0 numbers.
        value = u16::try_from(value).map_or(value, |p| u128::from(super::output::port32(p)));
    }
    if !info.writable(ctx.inside_ct) {
        return Err(decode_not_writable(
            field,
            "set_field destination (not writable here)",
        ));
    }
    if value & !info.significant != 0 {
        return Err(DecodeError::BadFieldValue {
            what: "set_field",
            field,
            value,
        });
    }
    Ok(Some(Action::SetField { field, value }))
}

fn decode_load(_: WireId, body: &mut Reader<'_>, ctx: Ctx) -> Result<Option<Action>, DecodeError> {
    let ofs_nbits = body.u16()?;
    let header = body.u32()?;
    let value = body.u64()?;
    let Some(dst) = decode_range(header, ofs_nbits, "load destination")? else {
        return Ok(None);
    };
    if !dst.field.info().writable(ctx.inside_ct) {
        return Err(decode_not_writable(
            dst.field,
            "load destination (not writable here)",
        ));
    }
    if dst.n_bits < 64 && value >> dst.n_bits != 0 {
        return Err(DecodeError::BadValue {
            what: "load value (wider than its destination: OFPBAC_BAD_ARGUMENT)",
            value,
        });
    }
    Ok(Some(Action::RegLoad { dst, value }))
}

fn decode_move(_: WireId, body: &mut Reader<'_>, ctx: Ctx) -> Result<Option<Action>, DecodeError> {
    let n_bits = body.u16()?;
    let src_ofs = body.u16()?;
    let dst_ofs = body.u16()?;
    let (src, dst) = (body.u32()?, body.u32()?);
    must_be_zero(body.rest(), "move padding")?;
    let (Some(src_field), Some(dst_field)) = (field_of_header(src), field_of_header(dst)) else {
        return Ok(None);
    };
    let src = checked(range(src_field, src_ofs, n_bits), "move source")?;
    let dst = checked(range(dst_field, dst_ofs, n_bits), "move destination")?;
    if !dst.field.info().writable(ctx.inside_ct) {
        return Err(decode_not_writable(
            dst.field,
            "move destination (not writable here)",
        ));
    }
    Ok(Some(Action::RegMove { src, dst }))
}

/// The range an NX `ofs_nbits` and field header give, `None` for a field this crate does not
/// know at the width NX actions address it (the action is then kept verbatim).
pub(super) fn decode_range(
    header: u32,
    ofs_nbits: u16,
    what: &'static str,
) -> Result<Option<FieldRange>, DecodeError> {
    match field_of_header(header) {
        Some(field) => checked(FieldRange::from_ofs_nbits(field, ofs_nbits), what).map(Some),
        None => Ok(None),
    }
}

fn range(field: Field, ofs: u16, n_bits: u16) -> FieldRange {
    FieldRange { field, ofs, n_bits }
}

/// The field an unmasked NXM/OXM header names, if it is in the table at the action width.
fn field_of_header(header: u32) -> Option<Field> {
    let h = TlvHeader::from_u32(header);
    if h.masked || h.class == OFPXMC_EXPERIMENTER {
        return None;
    }
    let (field, id) = Field::from_id(h.class, h.field, 0)?;
    (h.len == id.bytes && id == field.info().action_id()).then_some(field)
}

fn checked(range: FieldRange, what: &'static str) -> Result<FieldRange, DecodeError> {
    if range.is_valid() {
        Ok(range)
    } else {
        Err(DecodeError::BadFieldRange {
            what,
            field: range.field,
            ofs: range.ofs,
            n_bits: range.n_bits,
        })
    }
}

fn split_arrow<'t>(token: &Token<'_>, v: &'t str) -> Result<(&'t str, &'t str), ParseError> {
    v.split_once("->")
        .ok_or_else(|| bad(token, "expected `SOURCE->DESTINATION`"))
}

fn check_writable(token: &Token<'_>, field: Field, ctx: Ctx) -> Result<(), ParseError> {
    if field.info().writable(ctx.inside_ct) {
        Ok(())
    } else {
        Err(bad(token, not_writable(field, ctx)))
    }
}

/// `set_field:VALUE[/MASK]->FIELD`, `mod_dl_src:MAC`, `mod_dl_dst:MAC`. A masked set_field
/// becomes one load per run of mask bits, as ovs-ofctl sends it in OpenFlow 1.3.
fn parse_set_field(token: &Token<'_>, ctx: Ctx) -> Result<Vec<Action>, ParseError> {
    let v = token.value.ok_or_else(|| bad(token, "missing value"))?;
    // The keyword matched case-insensitively (see `kind_of_keyword`).
    let (value, name) = match token.key.to_ascii_lowercase().as_str() {
        "mod_dl_src" => (v, "eth_src"),
        "mod_dl_dst" => (v, "eth_dst"),
        _ => split_arrow(token, v)?,
    };
    let field =
        Field::from_name(name).ok_or_else(|| bad(token, format!("unknown field `{name}`")))?;
    check_writable(token, field, ctx)?;
    let info = field.info();
    let (value, mask) = parse_field_value(info, value).map_err(|r| bad(token, r))?;
    if mask == info.full_mask() {
        Ok(vec![Action::SetField { field, value }])
    } else {
        Ok(loads(field, value, mask))
    }
}

/// `load:VALUE->FIELD[RANGE]`; a range wider than 64 bits is loaded 64 bits at a time.
fn parse_load(token: &Token<'_>, ctx: Ctx) -> Result<Vec<Action>, ParseError> {
    let v = token.value.ok_or_else(|| bad(token, "missing value"))?;
    let (value, dst) = split_arrow(token, v)?;
    let dst = parse_subfield(token, dst)?;
    check_writable(token, dst.field, ctx)?;
    let value = parse_wide(value)
        .ok_or_else(|| bad(token, format!("`{value}` is not a number in range")))?;
    if dst.n_bits < 128 && value >> dst.n_bits != 0 {
        return Err(bad(
            token,
            format!("value does not fit in {} bits", dst.n_bits),
        ));
    }
    let ones = if dst.n_bits >= 128 {
        u128::MAX
    } else {
        (1u128 << dst.n_bits) - 1
    };
    Ok(loads(dst.field, value << dst.ofs, ones << dst.ofs))
}

fn parse_move(token: &Token<'_>, ctx: Ctx) -> Result<Vec<Action>, ParseError> {
    let v = token.value.ok_or_else(|| bad(token, "missing value"))?;
    let (src, dst) = split_arrow(token, v)?;
    let src = parse_subfield(token, src)?;
    let dst = parse_subfield(token, dst)?;
    check_writable(token, dst.field, ctx)?;
    if src.n_bits != dst.n_bits {
        return Err(bad(
            token,
            format!(
                "source is {} bits wide but destination {}",
                src.n_bits, dst.n_bits
            ),
        ));
    }
    Ok(vec![Action::RegMove { src, dst }])
}

/// The loads that write `value` under `mask` into `field`: one per run of contiguous mask
/// bits, at most 64 bits each (OVS's next_load_segment).
fn loads(field: Field, value: u128, mask: u128) -> Vec<Action> {
    let width = u32::from(FieldRange::whole(field).n_bits);
    let mut out = Vec::new();
    let mut bit = 0;
    while bit < width {
        if mask >> bit & 1 == 0 {
            bit += 1;
            continue;
        }
        let start = bit;
        while bit < width && bit - start < 64 && mask >> bit & 1 == 1 {
            bit += 1;
        }
        let n_bits = bit - start;
        let bits = if n_bits >= 128 {
            u128::MAX
        } else {
            (1u128 << n_bits) - 1
        };
        out.push(Action::RegLoad {
            dst: FieldRange {
                field,
                ofs: start as u16,
                n_bits: n_bits as u16,
            },
            value: ((value >> start) & bits) as u64,
        });
    }
    out
}

/// `NXM_NX_REG0[]`, `NXM_NX_TUN_ID[0..31]`, `reg1[5]`, or a bare field name.
pub(super) fn parse_subfield(token: &Token<'_>, text: &str) -> Result<FieldRange, ParseError> {
    let (name, bits) = match text.split_once('[') {
        Some((name, rest)) => {
            let inner = rest
                .strip_suffix(']')
                .ok_or_else(|| bad(token, format!("`{text}`: missing `]`")))?;
            (name, Some(inner))
        }
        None => (text, None),
    };
    let (field, _) = Field::from_subfield_name(name)
        .ok_or_else(|| bad(token, format!("unknown field `{name}`")))?;
    let range = match bits {
        None | Some("") => FieldRange::whole(field),
        Some(inner) => {
            let (start, end) = inner.split_once("..").unwrap_or((inner, inner));
            let start: u16 = number(token, start)?;
            let end: u16 = number(token, end)?;
            if end < start {
                return Err(bad(token, format!("`{text}`: range ends before it starts")));
            }
            FieldRange::bits(field, start, end)
        }
    };
    if !range.is_valid() {
        return Err(bad(
            token,
            format!("`{text}` reaches past the end of the field"),
        ));
    }
    Ok(range)
}

#[cfg(test)]
mod tests {
    use super::super::decode_actions;
    use super::super::tests::roundtrip;
    use super::*;
    use crate::test_util::hex;

    // Each byte string below is the action list ovs-ofctl 3.1 sent in a flow_mod for the text
    // in the test name's comment (captured over a unix socket).

    #[test]
    fn move_tun_id_to_reg0() {
        // actions=move:NXM_NX_TUN_ID[0..31]->NXM_NX_REG0[]
        roundtrip(
            "ffff00180000232000060020000000000001200800010004",
            &[Action::RegMove {
                src: FieldRange::bits(Field::TunId, 0, 31),
                dst: FieldRange::whole(Field::Reg(0)),
            }],
        );
    }

    #[test]
    fn load_reg0() {
        // actions=load:0x2a->NXM_NX_REG0[]
        roundtrip(
            "ffff0018000023200007001f00010004000000000000002a",
            &[Action::RegLoad {
                dst: FieldRange::whole(Field::Reg(0)),
                value: 0x2a,
            }],
        );
    }

    #[test]
    fn set_field_tun_dst_and_output() {
        // actions=set_field:192.0.2.2->tun_dst,output:1 (after a move)
        roundtrip(
            "0019001000014004c00002020000000000000010000000010000000000000000",
            &[
                Action::SetField {
                    field: Field::TunDst,
                    value: 0xc000_0202,
                },
                Action::output(1),
            ],
        );
    }

    #[test]
    fn load_tun_id_bits() {
        // actions=load:0x1234->NXM_NX_TUN_ID[0..31]
        roundtrip(
            "ffff0018000023200007001f000120080000000000001234",
            &[Action::RegLoad {
                dst: FieldRange::bits(Field::TunId, 0, 31),
                value: 0x1234,
            }],
        );
    }

    #[test]
    fn set_field_in_port_goes_as_the_16_bit_nxm_field() {
        // actions=set_field:5->in_port
        roundtrip(
            "00190010000000020005000000000000",
            &[Action::SetField {
                field: Field::InPort,
                value: 5,
            }],
        );
        // set_field:5->in_port_oxm: OVS refuses OXM_OF_IN_PORT in set_field.
        assert!(decode_actions(&mut Reader::new(
            &hex("00190010800000040000000500000000"),
            "t"
        ))
        .is_err());
    }

    #[test]
    fn a_masked_set_field_is_loads_per_run_of_mask_bits() {
        // set_field:0x5/0x5->pkt_mark: ovs-ofctl 3.1 sends load:0x1->NXM_NX_PKT_MARK[0],
        // load:0x1->NXM_NX_PKT_MARK[2].
        assert_eq!(
            loads(Field::PktMark, 5, 5),
            vec![
                Action::RegLoad {
                    dst: FieldRange::bits(Field::PktMark, 0, 0),
                    value: 1
                },
                Action::RegLoad {
                    dst: FieldRange::bits(Field::PktMark, 2, 2),
                    value: 1
                },
            ]
        );
        // load:0x100000000000000000->NXM_NX_CT_LABEL[]: 0 into bits 0..63, 0x10 into 64..127.
        assert_eq!(
            loads(Field::CtLabel, 0x10 << 64, u128::MAX),
            vec![
                Action::RegLoad {
                    dst: FieldRange::bits(Field::CtLabel, 0, 63),
                    value: 0
                },
                Action::RegLoad {
                    dst: FieldRange::bits(Field::CtLabel, 64, 127),
                    value: 0x10
                },
            ]
        );
    }

    #[test]
    fn refuses_what_ovs_refuses() {
        for bad in [
            // load:0x1f->NXM_NX_REG0[0..3]: the value does not fit (OFPBAC_BAD_ARGUMENT).
            "ffff0018000023200007000300010004000000000000001f",
            // load into NXM_NX_REG0[30..33]: past the end of a 32-bit register
            "ffff00180000232000070783000100040000000000000001",
            // load:0xf009->NXM_NX_CT_MARK[] outside ct (tests/ofp-actions.at).
            "ffff0018000023200007001f0001d604000000000000f009",
            // set_field:0x800->eth_type: read-only.
            "0019001080000a020800000000000000",
            // move with non-zero padding (NXBRC_MUST_BE_ZERO).
            "ffff002000002320000600200000000000012008000100040000000000000001",
        ] {
            assert!(
                decode_actions(&mut Reader::new(&hex(bad), "t")).is_err(),
                "{bad}"
            );
        }
    }
}
