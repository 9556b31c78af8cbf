//! The packet to trace, described by its fields, and the `ofproto/trace` flow argument that
//! describes it to ovs-vswitchd (ovs-ofctl's flow syntax: `in_port=3,tcp,nw_src=…,tp_dst=80`).
//!
//! Every field a table of br0 may match on is set, so the trace follows the path a real packet
//! takes: ovs-vswitchd zeroes whatever the argument leaves out (an IP packet with TTL 0, a MAC
//! of all zeros), which a flow matching on it would treat differently from the real packet.

use std::fmt::Write;
use std::net::Ipv4Addr;

use serde::{Deserialize, Serialize};

use crate::value::MacAddr;

/// OpenFlow's highest physical port number (`OFPP_MAX`); above are reserved ports.
const OFPP_MAX: u32 = 0xffff_ff00;
/// What an IP packet leaving a Linux pod starts with.
pub const DEFAULT_TTL: u8 = 64;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Packet {
    /// The OpenFlow port it enters br0 on (a pod's port, 1 for the VXLAN port, 2 for tun0).
    pub in_port: u32,
    /// Ethernet source; all zeros when None.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dl_src: Option<MacAddr>,
    /// Ethernet destination; broadcast for an ARP request, else all zeros when None.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dl_dst: Option<MacAddr>,
    /// Set when the packet arrives through the VXLAN port: the sending node and the VNI.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tunnel: Option<Tunnel>,
    pub payload: Payload,
}

/// The outer header of a packet that came in through the VXLAN port.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tunnel {
    /// The sending node's underlay address (`tun_src`).
    pub src: Ipv4Addr,
    /// This node's underlay address (`tun_dst`).
    pub dst: Ipv4Addr,
    /// The VNI: the sender's VNID (`tun_id`).
    pub id: u32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Payload {
    Arp {
        op: ArpOp,
        sender_ip: Ipv4Addr,
        target_ip: Ipv4Addr,
        /// The sender's hardware address; the Ethernet source when None.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        sender_mac: Option<MacAddr>,
    },
    Ip {
        src: Ipv4Addr,
        dst: Ipv4Addr,
        #[serde(default = "default_ttl")]
        ttl: u8,
        proto: IpProto,
    },
}

fn default_ttl() -> u8 {
    DEFAULT_TTL
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ArpOp {
    Request,
    Reply,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "name", rename_all = "snake_case")]
pub enum IpProto {
    Tcp {
        src_port: u16,
        dst_port: u16,
    },
    Udp {
        src_port: u16,
        dst_port: u16,
    },
    Icmp {
        icmp_type: u8,
        icmp_code: u8,
    },
    /// Any other IP protocol number (no transport header fields).
    Other {
        number: u8,
    },
}

impl IpProto {
    /// An ICMP echo request, what `ping` sends.
    pub const PING: IpProto = IpProto::Icmp {
        icmp_type: 8,
        icmp_code: 0,
    };
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PacketError {
    #[error("in_port {0} is not an OpenFlow port number (1 to {OFPP_MAX})")]
    InPort(u32),
    #[error("VNI {0} does not fit in 24 bits")]
    Vni(u32),
    #[error("IP protocol {0} has a keyword of its own: describe it as tcp, udp or icmp")]
    NamedProtocol(u8),
}

const BROADCAST: MacAddr = MacAddr([0xff; 6]);
const ZERO_MAC: MacAddr = MacAddr([0; 6]);

impl Packet {
    /// The flow argument of `ofproto/trace BRIDGE FLOW`, after checking the fields' ranges.
    pub fn to_flow(&self) -> Result<String, PacketError> {
        if self.in_port == 0 || self.in_port > OFPP_MAX {
            return Err(PacketError::InPort(self.in_port));
        }
        let mut flow = format!("in_port={}", self.in_port);
        if let Some(tunnel) = &self.tunnel {
            if tunnel.id > 0x00ff_ffff {
                return Err(PacketError::Vni(tunnel.id));
            }
            let _ = write!(
                flow,
                ",tun_src={},tun_dst={},tun_id={:#x}",
                tunnel.src, tunnel.dst, tunnel.id
            );
        }
        let src = self.dl_src.unwrap_or(ZERO_MAC);
        match self.payload {
            Payload::Arp {
                op,
                sender_ip,
                target_ip,
                sender_mac,
            } => {
                let dst = self.dl_dst.unwrap_or(match op {
                    ArpOp::Request => BROADCAST,
                    ArpOp::Reply => ZERO_MAC,
                });
                let op = match op {
                    ArpOp::Request => 1,
                    ArpOp::Reply => 2,
                };
                let sha = sender_mac.unwrap_or(src);
                let _ = write!(
                    flow,
                    ",arp,dl_src={src},dl_dst={dst},arp_op={op},arp_spa={sender_ip},\
                     arp_tpa={target_ip},arp_sha={sha}"
                );
            }
            Payload::Ip {
                src: nw_src,
                dst: nw_dst,
                ttl,
                proto,
            } => {
                let dst = self.dl_dst.unwrap_or(ZERO_MAC);
                let (keyword, transport) = match proto {
                    // Not tp_src/tp_dst: ovs-vswitchd's flow parser takes those for the TCP
                    // fields and refuses them on UDP ("prerequisites not met").
                    IpProto::Tcp { src_port, dst_port } => (
                        "tcp".to_string(),
                        format!(",tcp_src={src_port},tcp_dst={dst_port}"),
                    ),
                    IpProto::Udp { src_port, dst_port } => (
                        "udp".to_string(),
                        format!(",udp_src={src_port},udp_dst={dst_port}"),
                    ),
                    IpProto::Icmp {
                        icmp_type,
                        icmp_code,
                    } => (
                        "icmp".to_string(),
                        format!(",icmp_type={icmp_type},icmp_code={icmp_code}"),
                    ),
                    IpProto::Other {
                        number: number @ (1 | 6 | 17),
                    } => return Err(PacketError::NamedProtocol(number)),
                    IpProto::Other { number } => (format!("ip,nw_proto={number}"), String::new()),
                };
                let _ = write!(
                    flow,
                    ",{keyword},dl_src={src},dl_dst={dst},nw_src={nw_src},nw_dst={nw_dst},\
                     nw_ttl={ttl}{transport}"
                );
            }
        }
        Ok(flow)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mac(text: &str) -> Option<MacAddr> {
        Some(text.parse().unwrap())
    }

    fn ip(text: &str) -> Ipv4Addr {
        text.parse().unwrap()
    }

    #[test]
    fn ip_packets_set_every_field_a_table_may_match() {
        let packet = Packet {
            in_port: 3,
            dl_src: mac("0a:58:0a:80:00:0a"),
            dl_dst: mac("0a:58:0a:80:02:0a"),
            tunnel: None,
            payload: Payload::Ip {
                src: ip("10.128.0.10"),
                dst: ip("10.128.2.10"),
                ttl: DEFAULT_TTL,
                proto: IpProto::Tcp {
                    src_port: 40000,
                    dst_port: 80,
                },
            },
        };
        assert_eq!(
            packet.to_flow().unwrap(),
            "in_port=3,tcp,dl_src=0a:58:0a:80:00:0a,dl_dst=0a:58:0a:80:02:0a,\
             nw_src=10.128.0.10,nw_dst=10.128.2.10,nw_ttl=64,tcp_src=40000,tcp_dst=80"
        );
        let ping = Packet {
            payload: Payload::Ip {
                src: ip("10.128.0.10"),
                dst: ip("172.30.0.10"),
                ttl: 1,
                proto: IpProto::PING,
            },
            dl_dst: None,
            ..packet.clone()
        };
        assert_eq!(
            ping.to_flow().unwrap(),
            "in_port=3,icmp,dl_src=0a:58:0a:80:00:0a,dl_dst=00:00:00:00:00:00,\
             nw_src=10.128.0.10,nw_dst=172.30.0.10,nw_ttl=1,icmp_type=8,icmp_code=0"
        );
        let gre = Packet {
            payload: Payload::Ip {
                src: ip("10.128.0.10"),
                dst: ip("10.128.0.11"),
                ttl: 64,
                proto: IpProto::Other { number: 47 },
            },
            ..packet.clone()
        };
        assert!(gre.to_flow().unwrap().contains(",ip,nw_proto=47,"));
    }

    #[test]
    fn arp_and_tunnelled_packets() {
        let request = Packet {
            in_port: 3,
            dl_src: mac("0a:58:0a:80:00:0a"),
            dl_dst: None,
            tunnel: None,
            payload: Payload::Arp {
                op: ArpOp::Request,
                sender_ip: ip("10.128.0.10"),
                target_ip: ip("10.128.0.1"),
                sender_mac: None,
            },
        };
        assert_eq!(
            request.to_flow().unwrap(),
            "in_port=3,arp,dl_src=0a:58:0a:80:00:0a,dl_dst=ff:ff:ff:ff:ff:ff,arp_op=1,\
             arp_spa=10.128.0.10,arp_tpa=10.128.0.1,arp_sha=0a:58:0a:80:00:0a"
        );
        let from_vxlan = Packet {
            in_port: 1,
            tunnel: Some(Tunnel {
                src: ip("192.0.2.12"),
                dst: ip("192.0.2.11"),
                id: 10,
            }),
            ..request
        };
        assert!(from_vxlan
            .to_flow()
            .unwrap()
            .starts_with("in_port=1,tun_src=192.0.2.12,tun_dst=192.0.2.11,tun_id=0xa,arp,"));
    }

    #[test]
    fn out_of_range_fields_are_refused() {
        let packet = Packet {
            in_port: 0,
            dl_src: None,
            dl_dst: None,
            tunnel: None,
            payload: Payload::Ip {
                src: ip("10.128.0.10"),
                dst: ip("10.128.0.11"),
                ttl: 64,
                proto: IpProto::PING,
            },
        };
        assert_eq!(packet.to_flow(), Err(PacketError::InPort(0)));
        let reserved = Packet {
            in_port: 0xffff_fffe,
            ..packet.clone()
        };
        assert!(reserved
            .to_flow()
            .unwrap_err()
            .to_string()
            .contains("OpenFlow port"));
        let vni = Packet {
            in_port: 1,
            tunnel: Some(Tunnel {
                src: ip("192.0.2.12"),
                dst: ip("192.0.2.11"),
                id: 1 << 24,
            }),
            ..packet.clone()
        };
        assert_eq!(vni.to_flow(), Err(PacketError::Vni(1 << 24)));
        let tcp_as_number = Packet {
            in_port: 3,
            payload: Payload::Ip {
                src: ip("10.128.0.10"),
                dst: ip("10.128.0.11"),
                ttl: 64,
                proto: IpProto::Other { number: 6 },
            },
            ..packet
        };
        assert_eq!(tcp_as_number.to_flow(), Err(PacketError::NamedProtocol(6)));
    }

    #[test]
    fn the_json_form_round_trips() {
        let packet = Packet {
            in_port: 4,
            dl_src: mac("0a:58:0a:80:00:0b"),
            dl_dst: None,
            tunnel: None,
            payload: Payload::Ip {
                src: ip("10.128.0.11"),
                dst: ip("172.30.0.10"),
                ttl: 64,
                proto: IpProto::Udp {
                    src_port: 5353,
                    dst_port: 53,
                },
            },
        };
        let json = serde_json::to_value(&packet).unwrap();
        assert_eq!(json["payload"]["proto"]["name"], "udp");
        assert_eq!(serde_json::from_value::<Packet>(json).unwrap(), packet);
    }
}
