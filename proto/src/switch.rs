//! Session and switch-wide messages: HELLO, FEATURES, GET/SET_CONFIG, ROLE, GET/SET_ASYNC.

use bytes::{BufMut, BytesMut};

use crate::wire::{pad8, put_zeros, Reader};
use crate::DecodeError;

pub const OFPHET_VERSIONBITMAP: u16 = 1;

/// HELLO: the OpenFlow versions the sender supports. A HELLO without a version bitmap means
/// "every version up to the header's" and decodes as `1..=header version`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Hello {
    /// Supported versions, ascending.
    pub versions: Vec<u8>,
}

impl Default for Hello {
    fn default() -> Self {
        Hello {
            versions: vec![crate::OFP_VERSION],
        }
    }
}

impl Hello {
    /// The version to put in the HELLO header: the highest supported.
    pub(crate) fn header_version(&self) -> u8 {
        self.versions
            .iter()
            .copied()
            .max()
            .unwrap_or(crate::OFP_VERSION)
    }

    /// Whether the peer announced OpenFlow 1.3.
    pub fn supports_of13(&self) -> bool {
        self.versions.contains(&crate::OFP_VERSION)
    }

    /// Always writes a version bitmap (even an empty one): without it a HELLO would mean
    /// "every version up to the header's", which is not what an empty list says.
    pub(crate) fn encode(&self, out: &mut BytesMut) {
        let words = usize::from(self.header_version()) / 32 + 1;
        let mut bitmap = vec![0u32; words];
        for &v in &self.versions {
            bitmap[usize::from(v) / 32] |= 1 << (v % 32);
        }
        let len = 4 + 4 * words;
        out.put_u16(OFPHET_VERSIONBITMAP);
        out.put_u16(len as u16);
        bitmap.iter().for_each(|w| out.put_u32(*w));
        put_zeros(out, pad8(len));
    }

    pub(crate) fn decode(r: &mut Reader<'_>, header_version: u8) -> Result<Self, DecodeError> {
        let mut versions = Vec::new();
        let mut saw_bitmap = false;
        while r.remaining() >= 4 {
            let elem_type = r.u16()?;
            let len = usize::from(r.u16()?);
            if len < 4 {
                return Err(DecodeError::BadLength {
                    what: "hello element",
                    length: len,
                    reason: "shorter than its 4-byte header",
                });
            }
            let mut body = r.sub(len - 4, "hello element")?;
            r.skip(pad8(len).min(r.remaining()))?;
            if elem_type != OFPHET_VERSIONBITMAP {
                continue;
            }
            saw_bitmap = true;
            let mut word_index = 0u32;
            while body.remaining() >= 4 {
                let word = body.u32()?;
                versions.extend(
                    (0..32)
                        .filter(|b| word & (1 << b) != 0)
                        .filter_map(|b| u8::try_from(word_index * 32 + b).ok()),
                );
                word_index += 1;
            }
        }
        r.rest();
        if !saw_bitmap {
            versions.extend(1..=header_version);
        }
        versions.sort_unstable();
        versions.dedup();
        Ok(Hello { versions })
    }
}

/// FEATURES_REPLY.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct SwitchFeatures {
    pub datapath_id: u64,
    pub n_buffers: u32,
    pub n_tables: u8,
    pub auxiliary_id: u8,
    pub capabilities: u32,
}

impl SwitchFeatures {
    pub(crate) fn encode(&self, out: &mut BytesMut) {
        out.put_u64(self.datapath_id);
        out.put_u32(self.n_buffers);
        out.put_u8(self.n_tables);
        out.put_u8(self.auxiliary_id);
        put_zeros(out, 2);
        out.put_u32(self.capabilities);
        out.put_u32(0);
    }

    pub(crate) fn decode(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let f = SwitchFeatures {
            datapath_id: r.u64()?,
            n_buffers: r.u32()?,
            n_tables: r.u8()?,
            auxiliary_id: r.u8()?,
            capabilities: {
                r.skip(2)?;
                r.u32()?
            },
        };
        r.skip(4)?;
        Ok(f)
    }
}

/// IP fragment handling modes (the low bits of `SwitchConfig::flags`).
pub const OFPC_FRAG_NORMAL: u16 = 0;
pub const OFPC_FRAG_DROP: u16 = 1;
pub const OFPC_FRAG_REASM: u16 = 2;
/// Nicira: match on fragments with ip_frag / L4 ports of first fragments (`nx-match`).
pub const OFPC_FRAG_NX_MATCH: u16 = 3;
pub const OFPC_FRAG_MASK: u16 = 3;

/// GET_CONFIG_REPLY / SET_CONFIG body.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SwitchConfig {
    /// OFPC_* flags; the low two bits are the frag mode.
    pub flags: u16,
    pub miss_send_len: u16,
}

impl SwitchConfig {
    pub fn with_frag_mode(frag_mode: u16) -> Self {
        SwitchConfig {
            flags: frag_mode & OFPC_FRAG_MASK,
            miss_send_len: crate::OFPCML_NO_BUFFER,
        }
    }

    pub fn frag_mode(&self) -> u16 {
        self.flags & OFPC_FRAG_MASK
    }

    pub(crate) fn encode(&self, out: &mut BytesMut) {
        out.put_u16(self.flags);
        out.put_u16(self.miss_send_len);
    }

    pub(crate) fn decode(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        Ok(SwitchConfig {
            flags: r.u16()?,
            miss_send_len: r.u16()?,
        })
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Role {
    NoChange,
    Equal,
    Master,
    Slave,
}

const ROLES: [Role; 4] = [Role::NoChange, Role::Equal, Role::Master, Role::Slave];

/// ROLE_REQUEST / ROLE_REPLY body.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RoleMsg {
    pub role: Role,
    pub generation_id: u64,
}

impl RoleMsg {
    pub(crate) fn encode(&self, out: &mut BytesMut) {
        let role = ROLES.iter().position(|r| *r == self.role).unwrap_or(0);
        out.put_u32(role as u32);
        put_zeros(out, 4);
        out.put_u64(self.generation_id);
    }

    pub(crate) fn decode(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let raw = r.u32()?;
        let role = usize::try_from(raw)
            .ok()
            .and_then(|i| ROLES.get(i).copied())
            .ok_or(DecodeError::BadValue {
                what: "controller role",
                value: u64::from(raw),
            })?;
        r.skip(4)?;
        Ok(RoleMsg {
            role,
            generation_id: r.u64()?,
        })
    }
}

/// Which asynchronous messages a connection receives (SET_ASYNC / GET_ASYNC_REPLY). Element 0
/// applies while its role is master or equal, element 1 while slave; each is a bitmask of
/// reasons (bit `1 << OFPR_*` for packet-ins, `1 << OFPPR_*` for port status, `1 << OFPRR_*`
/// for flow removed).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct AsyncConfig {
    pub packet_in_mask: [u32; 2],
    pub port_status_mask: [u32; 2],
    pub flow_removed_mask: [u32; 2],
}

impl AsyncConfig {
    pub(crate) fn encode(&self, out: &mut BytesMut) {
        for mask in [
            self.packet_in_mask,
            self.port_status_mask,
            self.flow_removed_mask,
        ] {
            out.put_u32(mask[0]);
            out.put_u32(mask[1]);
        }
    }

    pub(crate) fn decode(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let mut pair = || -> Result<[u32; 2], DecodeError> { Ok([r.u32()?, r.u32()?]) };
        Ok(AsyncConfig {
            packet_in_mask: pair()?,
            port_status_mask: pair()?,
            flow_removed_mask: pair()?,
        })
    }
}
