//! OpenFlow 1.3 instructions.

use bytes::{BufMut, BytesMut};

use crate::action::{decode_actions, encode_actions, Action};
use crate::wire::{put_raw, put_zeros, LengthSlot, Reader};
use crate::{DecodeError, EncodeError, OFPM_MAX};

pub const OFPIT_GOTO_TABLE: u16 = 1;
pub const OFPIT_WRITE_METADATA: u16 = 2;
pub const OFPIT_WRITE_ACTIONS: u16 = 3;
pub const OFPIT_APPLY_ACTIONS: u16 = 4;
pub const OFPIT_CLEAR_ACTIONS: u16 = 5;
pub const OFPIT_METER: u16 = 6;

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Instruction {
    /// `meter:N`: the packet goes through meter N (1 to [`OFPM_MAX`]) first.
    Meter(u32),
    GotoTable(u8),
    ApplyActions(Vec<Action>),
    WriteActions(Vec<Action>),
    ClearActions,
    /// A write-metadata instruction (this crate does not interpret it), header included, kept
    /// verbatim.
    Unknown(Vec<u8>),
}

impl Instruction {
    pub fn encode(&self, out: &mut BytesMut) -> Result<(), EncodeError> {
        match self {
            Instruction::Meter(meter_id) => {
                if !meter_in_range(*meter_id) {
                    return Err(EncodeError::BadValue {
                        what: "meter instruction",
                        value: u128::from(*meter_id),
                        reason: "a flow's meter is 1 to 4294901760 (OFPMMFC_INVALID_METER)",
                    });
                }
                out.put_u16(OFPIT_METER);
                out.put_u16(8);
                out.put_u32(*meter_id);
            }
            Instruction::GotoTable(table) => {
                out.put_u16(OFPIT_GOTO_TABLE);
                out.put_u16(8);
                out.put_u8(*table);
                put_zeros(out, 3);
            }
            Instruction::ApplyActions(actions) => {
                encode_with_actions(OFPIT_APPLY_ACTIONS, actions, out)?
            }
            Instruction::WriteActions(actions) => {
                encode_with_actions(OFPIT_WRITE_ACTIONS, actions, out)?
            }
            Instruction::ClearActions => {
                out.put_u16(OFPIT_CLEAR_ACTIONS);
                out.put_u16(8);
                put_zeros(out, 4);
            }
            Instruction::Unknown(raw) => put_raw(out, raw, "unknown instruction")?,
        }
        Ok(())
    }

    pub(crate) fn decode(r: &mut Reader<'_>) -> Result<Instruction, DecodeError> {
        let mut head = Reader::new(r.peek_rest(), "instruction header");
        let inst_type = head.u16()?;
        let len = usize::from(head.u16()?);
        if len < 8 || len % 8 != 0 {
            return Err(DecodeError::BadLength {
                what: "instruction",
                length: len,
                reason: "must be a non-zero multiple of 8",
            });
        }
        let raw = r.take(len)?;
        let fixed_len = match inst_type {
            OFPIT_GOTO_TABLE | OFPIT_CLEAR_ACTIONS | OFPIT_METER => Some(8),
            OFPIT_WRITE_METADATA => Some(24),
            OFPIT_WRITE_ACTIONS | OFPIT_APPLY_ACTIONS => None,
            other => {
                // OVS refuses experimenter and unassigned instructions (OFPBIC_UNKNOWN_INST,
                // OFPBIC_BAD_EXPERIMENTER).
                return Err(DecodeError::BadValue {
                    what: "instruction type",
                    value: u64::from(other),
                });
            }
        };
        if fixed_len.is_some_and(|fixed| fixed != len) {
            return Err(DecodeError::BadLength {
                what: "instruction",
                length: len,
                reason: "differs from the instruction type's fixed length",
            });
        }
        let mut body = r.child(&raw[4..], "instruction");
        Ok(match inst_type {
            OFPIT_METER => {
                let meter_id = body.u32()?;
                match (meter_in_range(meter_id), r.is_lenient()) {
                    (true, _) => Instruction::Meter(meter_id),
                    (false, true) => Instruction::Unknown(raw.to_vec()),
                    (false, false) => {
                        return Err(DecodeError::BadValue {
                            what: "meter instruction (OFPMMFC_INVALID_METER)",
                            value: u64::from(meter_id),
                        })
                    }
                }
            }
            OFPIT_GOTO_TABLE => Instruction::GotoTable(body.u8()?),
            OFPIT_APPLY_ACTIONS => {
                body.skip(4)?;
                Instruction::ApplyActions(decode_actions(&mut body)?)
            }
            OFPIT_WRITE_ACTIONS => {
                body.skip(4)?;
                let actions = decode_actions(&mut body)?;
                if !r.is_lenient() && !actions.iter().all(Action::allowed_in_action_set) {
                    return Err(DecodeError::BadValue {
                        what: "write_actions: an action OVS does not take in an action set (OFPBAC_BAD_TYPE)",
                        value: 0,
                    });
                }
                Instruction::WriteActions(actions)
            }
            OFPIT_CLEAR_ACTIONS => Instruction::ClearActions,
            _ => Instruction::Unknown(raw.to_vec()),
        })
    }

    /// The instruction's type number.
    pub fn inst_type(&self) -> u16 {
        match self {
            Instruction::Meter(_) => OFPIT_METER,
            Instruction::GotoTable(_) => OFPIT_GOTO_TABLE,
            Instruction::ApplyActions(_) => OFPIT_APPLY_ACTIONS,
            Instruction::WriteActions(_) => OFPIT_WRITE_ACTIONS,
            Instruction::ClearActions => OFPIT_CLEAR_ACTIONS,
            Instruction::Unknown(raw) => match raw.get(..2) {
                Some(&[hi, lo]) => u16::from_be_bytes([hi, lo]),
                _ => 0,
            },
        }
    }

    /// Position in the order OVS executes and prints instructions whatever order they came
    /// in: meter, apply-actions, clear-actions, write-actions, write-metadata, goto-table.
    pub fn canonical_rank(&self) -> u8 {
        match self.inst_type() {
            OFPIT_METER => 0,
            OFPIT_APPLY_ACTIONS => 1,
            OFPIT_CLEAR_ACTIONS => 2,
            OFPIT_WRITE_ACTIONS => 3,
            OFPIT_WRITE_METADATA => 4,
            _ => 5,
        }
    }
}

/// Whether a flow may use meter `meter_id` (check_METER: not 0, not a virtual meter).
pub(crate) fn meter_in_range(meter_id: u32) -> bool {
    (1..=OFPM_MAX).contains(&meter_id)
}

fn encode_with_actions(
    inst_type: u16,
    actions: &[Action],
    out: &mut BytesMut,
) -> Result<(), EncodeError> {
    let slot = LengthSlot::new(out, 2, "instruction");
    out.put_u16(inst_type);
    out.put_u16(0);
    put_zeros(out, 4);
    encode_actions(actions, out)?;
    slot.finish(out, false)?;
    Ok(())
}

pub fn encode_instructions(
    instructions: &[Instruction],
    out: &mut BytesMut,
) -> Result<(), EncodeError> {
    for inst in instructions {
        inst.encode(out)?;
    }
    Ok(())
}

/// Decodes instructions until `r` is exhausted; each type may appear once (OFPBIC_DUP_INST).
pub(crate) fn decode_instructions(r: &mut Reader<'_>) -> Result<Vec<Instruction>, DecodeError> {
    let mut out: Vec<Instruction> = Vec::with_capacity(2);
    while !r.is_empty() {
        let inst = Instruction::decode(r)?;
        if out.iter().any(|seen| seen.inst_type() == inst.inst_type()) {
            return Err(DecodeError::DuplicateInstruction {
                inst_type: inst.inst_type(),
            });
        }
        out.push(inst);
    }
    check_conjunctions(&out).map_err(|_| DecodeError::BadValue {
        what: "conjunction beside other actions or instructions (NXBAC_BAD_CONJUNCTION)",
        value: 0,
    })?;
    Ok(out)
}

/// OVS's rule for conjunction actions (ofpacts_verify): a flow that has one has nothing but
/// conjunctions and notes in one apply-actions.
pub(crate) fn check_conjunctions(instructions: &[Instruction]) -> Result<(), String> {
    let actions = || {
        instructions.iter().flat_map(|inst| match inst {
            Instruction::ApplyActions(a) | Instruction::WriteActions(a) => a.as_slice(),
            _ => &[],
        })
    };
    if !actions().any(|a| matches!(a, Action::Conjunction(_))) {
        return Ok(());
    }
    let only_apply = instructions
        .iter()
        .all(|inst| matches!(inst, Instruction::ApplyActions(_)));
    let only_conj_and_notes =
        actions().all(|a| matches!(a, Action::Conjunction(_) | Action::Note(_)));
    if only_apply && only_conj_and_notes {
        Ok(())
    } else {
        Err("conjunction actions may be used along with note but not any other action or instruction".into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::field::{Field, FieldRange};
    use crate::test_util::hex;

    #[test]
    fn apply_then_goto_from_ovs() {
        // actions=move:NXM_NX_TUN_ID[0..31]->NXM_NX_REG0[],goto_table:10 (ovs-ofctl 3.1)
        let bytes =
            hex("0004002000000000ffff00180000232000060020000000000001200800010004000100080a000000");
        let decoded = decode_instructions(&mut Reader::new(&bytes, "t")).unwrap();
        assert_eq!(
            decoded,
            vec![
                Instruction::ApplyActions(vec![Action::RegMove {
                    src: FieldRange::bits(Field::TunId, 0, 31),
                    dst: FieldRange::whole(Field::Reg(0)),
                }]),
                Instruction::GotoTable(10),
            ]
        );
        let mut out = BytesMut::new();
        encode_instructions(&decoded, &mut out).unwrap();
        assert_eq!(&out[..], &bytes[..]);
    }

    #[test]
    fn write_and_clear_actions_decode() {
        let bytes = hex("0003001800000000000000100000000200000000000000000005000800000000");
        let decoded = decode_instructions(&mut Reader::new(&bytes, "t")).unwrap();
        assert_eq!(
            decoded,
            vec![
                Instruction::WriteActions(vec![Action::output(2)]),
                Instruction::ClearActions
            ]
        );
        let mut out = BytesMut::new();
        encode_instructions(&decoded, &mut out).unwrap();
        assert_eq!(&out[..], &bytes[..]);
    }

    #[test]
    fn rejects_truncated() {
        for bad in ["0001", "00010008", "000100100a000000", "0004000400000000"] {
            assert!(
                decode_instructions(&mut Reader::new(&hex(bad), "t")).is_err(),
                "{bad}"
            );
        }
    }
}
