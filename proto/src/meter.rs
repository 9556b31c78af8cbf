//! OpenFlow 1.3 meters: OFPT_METER_MOD (add, modify, delete a meter of drop or DSCP-remark
//! bands) and the meter statistics, configuration and features multiparts, as Open vSwitch
//! 3.1 reads and checks them (lib/ofp-meter.c). A flow uses a meter through the `meter:N`
//! instruction ([`crate::Instruction::Meter`]); a `controller(...,meter_id=N)` action through
//! its own meter id. OVS 3.1 does not take a meter mod inside a bundle.

use bytes::{BufMut, BytesMut};

use crate::wire::{put_zeros, LengthSlot, Reader};
use crate::{DecodeError, EncodeError};

/// The last meter a flow may use; the numbers above are the virtual meters and "all".
pub const OFPM_MAX: u32 = 0xffff_0000;
/// The meter of the slow datapath (a virtual meter).
pub const OFPM_SLOWPATH: u32 = 0xffff_fffd;
/// The meter of the packets sent to controllers (a virtual meter).
pub const OFPM_CONTROLLER: u32 = 0xffff_fffe;
/// Every meter (in a delete, a statistics or configuration request).
pub const OFPM_ALL: u32 = 0xffff_ffff;

/// Meter flags (`enum ofp13_meter_flags`): rates in kilobits or packets per second, bursts,
/// statistics.
pub const OFPMF_KBPS: u16 = 1 << 0;
pub const OFPMF_PKTPS: u16 = 1 << 1;
pub const OFPMF_BURST: u16 = 1 << 2;
pub const OFPMF_STATS: u16 = 1 << 3;

/// Band types (`enum ofp13_meter_band_type`).
pub const OFPMBT_DROP: u16 = 1;
pub const OFPMBT_DSCP_REMARK: u16 = 2;

/// Every band OVS knows is 16 bytes long on the wire.
const BAND_LEN: usize = 16;
const METER_STATS_FIXED_LEN: usize = 40;
const BAND_STATS_LEN: usize = 16;

/// What a meter mod does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MeterCommand {
    Add,
    Modify,
    Delete,
}

impl MeterCommand {
    pub fn to_u16(self) -> u16 {
        match self {
            MeterCommand::Add => 0,
            MeterCommand::Modify => 1,
            MeterCommand::Delete => 2,
        }
    }

    pub fn from_u16(v: u16) -> Option<Self> {
        Some(match v {
            0 => MeterCommand::Add,
            1 => MeterCommand::Modify,
            2 => MeterCommand::Delete,
            _ => return None,
        })
    }
}

/// What a band does to the packets over its rate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BandType {
    /// Drop them.
    Drop,
    /// Raise their drop precedence (the DSCP) by `prec_level`.
    DscpRemark { prec_level: u8 },
}

impl BandType {
    pub fn to_u16(self) -> u16 {
        match self {
            BandType::Drop => OFPMBT_DROP,
            BandType::DscpRemark { .. } => OFPMBT_DSCP_REMARK,
        }
    }
}

/// One band of a meter: above `rate` (kb/s or packets/s, as the meter's flags say), with
/// `burst_size` (when the meter has OFPMF_BURST), do `band_type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct MeterBand {
    pub band_type: BandType,
    pub rate: u32,
    pub burst_size: u32,
}

impl MeterBand {
    /// A drop band: packets above `rate` are dropped.
    pub fn drop(rate: u32, burst_size: u32) -> MeterBand {
        MeterBand {
            band_type: BandType::Drop,
            rate,
            burst_size,
        }
    }

    fn encode(&self, out: &mut BytesMut) {
        let mut band = [0u8; BAND_LEN];
        band[..2].copy_from_slice(&self.band_type.to_u16().to_be_bytes());
        band[2..4].copy_from_slice(&(BAND_LEN as u16).to_be_bytes());
        band[4..8].copy_from_slice(&self.rate.to_be_bytes());
        band[8..12].copy_from_slice(&self.burst_size.to_be_bytes());
        if let BandType::DscpRemark { prec_level } = self.band_type {
            band[12] = prec_level;
        }
        out.put_slice(&band);
    }

    /// ofputil_pull_bands: every band 16 bytes, of a type OVS knows (the rest of a drop band,
    /// and of a DSCP-remark band after its prec_level, is padding OVS does not read).
    fn decode(r: &mut Reader<'_>) -> Result<MeterBand, DecodeError> {
        let mut b = r.sub(BAND_LEN, "meter band")?;
        let raw_type = b.u16()?;
        let len = usize::from(b.u16()?);
        if len != BAND_LEN {
            return Err(DecodeError::BadLength {
                what: "meter band",
                length: len,
                reason: "every band is 16 bytes (OFPBRC_BAD_LEN)",
            });
        }
        let rate = b.u32()?;
        let burst_size = b.u32()?;
        let band_type = match raw_type {
            OFPMBT_DROP => BandType::Drop,
            OFPMBT_DSCP_REMARK => BandType::DscpRemark {
                prec_level: b.u8()?,
            },
            other => {
                return Err(DecodeError::BadValue {
                    what: "meter band type (OFPMMFC_BAD_BAND)",
                    value: u64::from(other),
                })
            }
        };
        b.rest();
        Ok(MeterBand {
            band_type,
            rate,
            burst_size,
        })
    }
}

/// Whether a meter may be added or modified under this id (handle_meter_mod): 1 to
/// [`OFPM_MAX`], or a virtual meter other than "all".
pub(crate) fn settable(meter_id: u32) -> bool {
    (1..=OFPM_MAX).contains(&meter_id) || matches!(meter_id, OFPM_SLOWPATH | OFPM_CONTROLLER)
}

fn encode_bands(bands: &[MeterBand], out: &mut BytesMut) {
    bands.iter().for_each(|b| b.encode(out));
}

/// Bands until `r` is exhausted; a tail shorter than a band is an error.
fn decode_bands(r: &mut Reader<'_>) -> Result<Vec<MeterBand>, DecodeError> {
    let mut bands = Vec::with_capacity(r.remaining() / BAND_LEN);
    while !r.is_empty() {
        bands.push(MeterBand::decode(r)?);
    }
    Ok(bands)
}

/// OFPT_METER_MOD.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct MeterMod {
    pub command: MeterCommand,
    /// 1 to [`OFPM_MAX`], a virtual meter, or (a delete) [`OFPM_ALL`].
    pub meter_id: u32,
    /// `OFPMF_*`; none for a delete.
    pub flags: u16,
    /// None for a delete.
    pub bands: Vec<MeterBand>,
}

/// Bytes of `ofp13_meter_mod` after the header.
const METER_MOD_FIXED_LEN: usize = 8;

impl MeterMod {
    /// Adds meter `meter_id` with `flags` (one of OFPMF_KBPS and OFPMF_PKTPS, and more) and
    /// `bands`.
    pub fn add(meter_id: u32, flags: u16, bands: Vec<MeterBand>) -> MeterMod {
        MeterMod {
            command: MeterCommand::Add,
            meter_id,
            flags,
            bands,
        }
    }

    /// Deletes meter `meter_id` ([`OFPM_ALL`]: every meter); the flows that use it go too.
    pub fn delete(meter_id: u32) -> MeterMod {
        MeterMod {
            command: MeterCommand::Delete,
            meter_id,
            flags: 0,
            bands: Vec::new(),
        }
    }

    pub(crate) fn encode(&self, out: &mut BytesMut) -> Result<(), EncodeError> {
        if self.command == MeterCommand::Delete && (self.flags != 0 || !self.bands.is_empty()) {
            // OVS reads neither in a delete: they would not be what the switch does.
            return Err(EncodeError::BadValue {
                what: "meter delete",
                value: u128::from(self.flags),
                reason: "a delete carries no flags or bands (OVS ignores them)",
            });
        }
        out.put_u16(self.command.to_u16());
        out.put_u16(self.flags);
        out.put_u32(self.meter_id);
        encode_bands(&self.bands, out);
        Ok(())
    }

    /// ofputil_decode_meter_mod and handle_meter_mod: a command OVS knows; for an add or
    /// modify, a meter id a meter may have, not both rate units, and bands as OVS reads them; a
    /// delete's flags and bands are not read (as in OVS).
    pub(crate) fn decode(r: &mut Reader<'_>) -> Result<MeterMod, DecodeError> {
        let mut fixed = r.sub(METER_MOD_FIXED_LEN, "meter_mod")?;
        let raw_command = fixed.u16()?;
        let flags = fixed.u16()?;
        let meter_id = fixed.u32()?;
        let command = MeterCommand::from_u16(raw_command).ok_or(DecodeError::BadValue {
            what: "meter mod command (OFPMMFC_BAD_COMMAND)",
            value: u64::from(raw_command),
        })?;
        if command == MeterCommand::Delete {
            if r.remaining() % 8 != 0 {
                return Err(DecodeError::BadLength {
                    what: "meter_mod",
                    length: r.remaining() + METER_MOD_FIXED_LEN,
                    reason: "not 8 bytes plus a multiple of 8 (OFPBRC_BAD_LEN)",
                });
            }
            r.rest();
            return Ok(MeterMod::delete(meter_id));
        }
        if !settable(meter_id) {
            return Err(DecodeError::BadValue {
                what: "meter id of an add or modify (OFPMMFC_INVALID_METER)",
                value: u64::from(meter_id),
            });
        }
        if flags & OFPMF_KBPS != 0 && flags & OFPMF_PKTPS != 0 {
            return Err(DecodeError::BadValue {
                what: "meter flags: both kbps and pktps (OFPMMFC_BAD_FLAGS)",
                value: u64::from(flags),
            });
        }
        Ok(MeterMod {
            command,
            meter_id,
            flags,
            bands: decode_bands(r)?,
        })
    }
}

/// One meter of a meter configuration reply (OFPMP_METER_CONFIG, `dump-meters`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct MeterConfig {
    pub meter_id: u32,
    pub flags: u16,
    pub bands: Vec<MeterBand>,
}

impl MeterConfig {
    pub(crate) fn encode(&self, out: &mut BytesMut) -> Result<(), EncodeError> {
        let slot = LengthSlot::new(out, 0, "meter configuration");
        out.put_u16(0);
        out.put_u16(self.flags);
        out.put_u32(self.meter_id);
        encode_bands(&self.bands, out);
        slot.finish(out, false).map(|_| ())
    }

    pub(crate) fn decode(r: &mut Reader<'_>) -> Result<MeterConfig, DecodeError> {
        let mut peek = r.child(r.peek_rest(), "meter configuration");
        let len = usize::from(peek.u16()?);
        if len < 8 {
            return Err(DecodeError::BadLength {
                what: "meter configuration",
                length: len,
                reason: "shorter than its 8-byte fixed part",
            });
        }
        let mut c = r.sub(len, "meter configuration")?;
        c.skip(2)?;
        let flags = c.u16()?;
        let meter_id = c.u32()?;
        Ok(MeterConfig {
            meter_id,
            flags,
            bands: decode_bands(&mut c)?,
        })
    }
}

/// A band's counters in a meter statistics reply.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct MeterBandStats {
    pub packet_count: u64,
    pub byte_count: u64,
}

/// One meter of a meter statistics reply (OFPMP_METER, `meter-stats`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct MeterStats {
    pub meter_id: u32,
    /// Flows that use the meter.
    pub flow_count: u32,
    /// Packets and bytes the meter saw.
    pub packet_in_count: u64,
    pub byte_in_count: u64,
    pub duration_sec: u32,
    pub duration_nsec: u32,
    /// Per band, in the meter's band order: the packets and bytes over its rate.
    pub bands: Vec<MeterBandStats>,
}

impl MeterStats {
    pub(crate) fn encode(&self, out: &mut BytesMut) -> Result<(), EncodeError> {
        let slot = LengthSlot::new(out, 4, "meter statistics");
        out.put_u32(self.meter_id);
        out.put_u16(0);
        put_zeros(out, 6);
        out.put_u32(self.flow_count);
        out.put_u64(self.packet_in_count);
        out.put_u64(self.byte_in_count);
        out.put_u32(self.duration_sec);
        out.put_u32(self.duration_nsec);
        for band in &self.bands {
            out.put_u64(band.packet_count);
            out.put_u64(band.byte_count);
        }
        slot.finish(out, false).map(|_| ())
    }

    pub(crate) fn decode(r: &mut Reader<'_>) -> Result<MeterStats, DecodeError> {
        let mut peek = r.child(r.peek_rest(), "meter statistics");
        peek.skip(4)?;
        let len = usize::from(peek.u16()?);
        if len < METER_STATS_FIXED_LEN || (len - METER_STATS_FIXED_LEN) % BAND_STATS_LEN != 0 {
            return Err(DecodeError::BadLength {
                what: "meter statistics",
                length: len,
                reason: "not 40 bytes plus 16 per band",
            });
        }
        let mut s = r.sub(len, "meter statistics")?;
        let meter_id = s.u32()?;
        s.skip(8)?;
        let flow_count = s.u32()?;
        let packet_in_count = s.u64()?;
        let byte_in_count = s.u64()?;
        let duration_sec = s.u32()?;
        let duration_nsec = s.u32()?;
        let mut bands = Vec::with_capacity(s.remaining() / BAND_STATS_LEN);
        while !s.is_empty() {
            bands.push(MeterBandStats {
                packet_count: s.u64()?,
                byte_count: s.u64()?,
            });
        }
        Ok(MeterStats {
            meter_id,
            flow_count,
            packet_in_count,
            byte_in_count,
            duration_sec,
            duration_nsec,
            bands,
        })
    }
}

/// What meters a switch has (OFPMP_METER_FEATURES, `meter-features`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct MeterFeatures {
    pub max_meter: u32,
    /// Bit `1 << OFPMBT_*` for each band type supported.
    pub band_types: u32,
    /// `OFPMF_*` flags supported.
    pub capabilities: u32,
    pub max_bands: u8,
    pub max_color: u8,
}

impl MeterFeatures {
    pub(crate) fn encode(&self, out: &mut BytesMut) {
        out.put_u32(self.max_meter);
        out.put_u32(self.band_types);
        out.put_u32(self.capabilities);
        out.put_u8(self.max_bands);
        out.put_u8(self.max_color);
        put_zeros(out, 2);
    }

    pub(crate) fn decode(r: &mut Reader<'_>) -> Result<MeterFeatures, DecodeError> {
        let features = MeterFeatures {
            max_meter: r.u32()?,
            band_types: r.u32()?,
            capabilities: r.u32()?,
            max_bands: r.u8()?,
            max_color: r.u8()?,
        };
        r.skip(2)?;
        Ok(features)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_util::hex;

    fn decode(bytes: &str) -> Result<MeterMod, DecodeError> {
        let bytes = hex(bytes);
        let mut r = Reader::new(&bytes, "t");
        let mm = MeterMod::decode(&mut r)?;
        r.finish()?;
        Ok(mm)
    }

    #[test]
    fn refuses_what_ovs_refuses() {
        for bad in [
            // command 3 (OFPMMFC_BAD_COMMAND)
            "0003000100000001 0001001000000064 0000000000000000",
            // kbps and pktps (OFPMMFC_BAD_FLAGS)
            "0000000300000001 0001001000000064 0000000000000000",
            // an experimenter band (OFPMMFC_BAD_BAND)
            "0000000100000001 ffff001000000064 0000000000002320",
            // meter 0, meter "all" (OFPMMFC_INVALID_METER)
            "0000000100000000 0001001000000064 0000000000000000",
            "00000001ffffffff 0001001000000064 0000000000000000",
            // a band of 24 bytes, a band cut short
            "0000000100000001 0001001800000064 0000000000000000 0000000000000000",
            "0000000100000001 0001001000000064 00000000",
        ] {
            assert!(decode(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_delete_reads_neither_flags_nor_bands_as_ovs() {
        let mm = decode("0002000f00000007 0005001000000064 0000000000000000").unwrap();
        assert_eq!(mm, MeterMod::delete(7));
        assert!(decode("0002000000000007 0000").is_err());
        // A delete with flags or bands is not written: the switch would not read them.
        let mut out = BytesMut::new();
        let with_bands = MeterMod {
            bands: vec![MeterBand::drop(1, 0)],
            ..MeterMod::delete(7)
        };
        assert!(with_bands.encode(&mut out).is_err());
    }

    #[test]
    fn a_dscp_remark_band_keeps_its_level() {
        let mm = decode("0000000100000003 0002001000000064 0000000001000000").unwrap();
        assert_eq!(
            mm.bands,
            vec![MeterBand {
                band_type: BandType::DscpRemark { prec_level: 1 },
                rate: 100,
                burst_size: 0,
            }]
        );
        let mut out = BytesMut::new();
        mm.encode(&mut out).unwrap();
        assert_eq!(
            out.to_vec(),
            hex("0000000100000003 0002001000000064 0000000001000000")
        );
    }
}
