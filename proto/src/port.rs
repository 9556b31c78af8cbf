//! Ports: reserved port numbers, `ofp_port` descriptions and PORT_STATUS.

use bytes::{BufMut, BytesMut};

use crate::wire::{put_fixed_str, put_zeros, Reader};
use crate::DecodeError;

/// Highest number of a physical port.
pub const OFPP_MAX: u32 = 0xffff_ff00;
pub const OFPP_IN_PORT: u32 = 0xffff_fff8;
pub const OFPP_TABLE: u32 = 0xffff_fff9;
pub const OFPP_NORMAL: u32 = 0xffff_fffa;
pub const OFPP_FLOOD: u32 = 0xffff_fffb;
pub const OFPP_ALL: u32 = 0xffff_fffc;
pub const OFPP_CONTROLLER: u32 = 0xffff_fffd;
pub const OFPP_LOCAL: u32 = 0xffff_fffe;
pub const OFPP_ANY: u32 = 0xffff_ffff;
/// "Any group" wildcard for flow_mod/flow stats out_group.
pub const OFPG_ANY: u32 = 0xffff_ffff;

/// Reserved ports and the names ovs-ofctl gives them (one table for parse and print).
pub const RESERVED_PORTS: [(u32, &str); 8] = [
    (OFPP_IN_PORT, "IN_PORT"),
    (OFPP_TABLE, "TABLE"),
    (OFPP_NORMAL, "NORMAL"),
    (OFPP_FLOOD, "FLOOD"),
    (OFPP_ALL, "ALL"),
    (OFPP_CONTROLLER, "CONTROLLER"),
    (OFPP_LOCAL, "LOCAL"),
    (OFPP_ANY, "ANY"),
];

/// OpenFlow 1.0 (16-bit) port numbers at or above this are reserved ports.
pub(crate) const OFPP_MAX_16: u32 = 0xff00;
/// OpenFlow 1.1+ reserved ports are the OpenFlow 1.0 (16-bit) ones plus this offset.
pub(crate) const OFPP11_OFFSET: u32 = 0xffff_0000;

/// A port in the 16 bits NX actions (resubmit, set_field of NXM_OF_IN_PORT) carry: a port
/// below 0xff00 as it is, a reserved port in OpenFlow 1.0 numbers; `None` for the ports in
/// between, which 16 bits cannot say (cutting them would name another port).
pub(crate) fn port16(port: u32) -> Option<u16> {
    if port < OFPP_MAX_16 {
        u16::try_from(port).ok()
    } else {
        port.checked_sub(OFPP11_OFFSET)
            .filter(|p| *p >= OFPP_MAX_16)
            .and_then(|p| u16::try_from(p).ok())
    }
}

/// The OpenFlow 1.3 port a 16-bit port names (the inverse of [`port16`]).
pub(crate) fn port32(port: u16) -> u32 {
    let port = u32::from(port);
    if port >= OFPP_MAX_16 {
        port + OFPP11_OFFSET
    } else {
        port
    }
}

/// Length of `ofp_port` in OpenFlow 1.3.
pub const OFP_PORT_LEN: usize = 64;
const OFP_MAX_PORT_NAME_LEN: usize = 16;

/// An OpenFlow 1.3 port description (`ofp_port`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct Port {
    pub port_no: u32,
    pub hw_addr: [u8; 6],
    /// At most 15 bytes are sent; longer names are truncated on encode.
    pub name: String,
    pub config: u32,
    pub state: u32,
    pub curr: u32,
    pub advertised: u32,
    pub supported: u32,
    pub peer: u32,
    pub curr_speed: u32,
    pub max_speed: u32,
}

impl Port {
    pub fn encode(&self, out: &mut BytesMut) {
        out.put_u32(self.port_no);
        put_zeros(out, 4);
        out.put_slice(&self.hw_addr);
        put_zeros(out, 2);
        put_fixed_str(out, &self.name, OFP_MAX_PORT_NAME_LEN);
        for v in [
            self.config,
            self.state,
            self.curr,
            self.advertised,
            self.supported,
            self.peer,
            self.curr_speed,
            self.max_speed,
        ] {
            out.put_u32(v);
        }
    }

    pub(crate) fn decode(r: &mut Reader<'_>) -> Result<Port, DecodeError> {
        let mut r = r.sub(OFP_PORT_LEN, "port description")?;
        let port_no = r.u32()?;
        r.skip(4)?;
        let hw_addr = r.array()?;
        r.skip(2)?;
        Ok(Port {
            port_no,
            hw_addr,
            name: r.fixed_str(OFP_MAX_PORT_NAME_LEN)?,
            config: r.u32()?,
            state: r.u32()?,
            curr: r.u32()?,
            advertised: r.u32()?,
            supported: r.u32()?,
            peer: r.u32()?,
            curr_speed: r.u32()?,
            max_speed: r.u32()?,
        })
    }
}

pub const OFPPR_ADD: u8 = 0;
pub const OFPPR_DELETE: u8 = 1;
pub const OFPPR_MODIFY: u8 = 2;

/// OFPT_PORT_STATUS: a port was added, deleted or modified (`reason` is OFPPR_*).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PortStatus {
    pub reason: u8,
    pub port: Port,
}

impl PortStatus {
    pub(crate) fn encode(&self, out: &mut BytesMut) {
        out.put_u8(self.reason);
        put_zeros(out, 7);
        self.port.encode(out);
    }

    pub(crate) fn decode(r: &mut Reader<'_>) -> Result<PortStatus, DecodeError> {
        let reason = r.u8()?;
        r.skip(7)?;
        Ok(PortStatus {
            reason,
            port: Port::decode(r)?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
