//! Groups: OFPT_GROUP_MOD (add, modify, delete; all, select, indirect and fast-failover groups
//! of buckets) and the group description and statistics multiparts, as OpenFlow 1.3 carries
//! them and Open vSwitch 3.1 checks them (lib/ofp-group.c). OpenFlow 1.3 has no group
//! properties: a select group's `selection_method` is an OpenFlow 1.5 property, which OVS 3.1
//! does not send over 1.3.

use bytes::{BufMut, BytesMut};

use crate::action::{decode_actions, encode_actions, Action};
use crate::wire::{put_zeros, LengthSlot, Reader};
use crate::{DecodeError, EncodeError, OFPG_ANY, OFPP_ANY, OFPP_CONTROLLER, OFPP_MAX};

/// All groups (a delete of every group; a stats request for all).
pub const OFPG_ALL: u32 = 0xffff_fffc;

/// What a group mod does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum GroupCommand {
    Add,
    Modify,
    Delete,
    /// OVS's extension: add, or modify if the group exists (`mod-group --may-create`).
    AddOrModify,
}

impl GroupCommand {
    pub fn to_u16(self) -> u16 {
        match self {
            GroupCommand::Add => 0,
            GroupCommand::Modify => 1,
            GroupCommand::Delete => 2,
            GroupCommand::AddOrModify => 0x8000,
        }
    }

    pub fn from_u16(v: u16) -> Option<Self> {
        Some(match v {
            0 => GroupCommand::Add,
            1 => GroupCommand::Modify,
            2 => GroupCommand::Delete,
            0x8000 => GroupCommand::AddOrModify,
            _ => return None,
        })
    }
}

/// How a group uses its buckets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum GroupType {
    /// Every bucket (multicast, flooding).
    All,
    /// One bucket, chosen by the switch, by weight (load balancing).
    Select,
    /// Exactly one bucket.
    Indirect,
    /// The first live bucket (`ff`, `fast_failover`).
    FastFailover,
}

impl GroupType {
    pub fn to_u8(self) -> u8 {
        match self {
            GroupType::All => 0,
            GroupType::Select => 1,
            GroupType::Indirect => 2,
            GroupType::FastFailover => 3,
        }
    }

    pub fn from_u8(v: u8) -> Option<Self> {
        Some(match v {
            0 => GroupType::All,
            1 => GroupType::Select,
            2 => GroupType::Indirect,
            3 => GroupType::FastFailover,
            _ => return None,
        })
    }

    /// The weight ovs-ofctl gives a bucket that names none (and does not print).
    pub fn default_weight(self) -> u16 {
        u16::from(self == GroupType::Select)
    }
}

/// One bucket of a group.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Bucket {
    /// Select groups only: the bucket's share.
    pub weight: u16,
    /// Fast-failover (and select) groups: the bucket is live while this port is
    /// (`OFPP_ANY`: watches no port).
    pub watch_port: u32,
    /// As `watch_port`, for a group (`OFPG_ANY`: none).
    pub watch_group: u32,
    pub actions: Vec<Action>,
}

impl Bucket {
    /// A bucket of `actions` with ovs-ofctl's defaults for a group of `group_type`.
    pub fn new(group_type: GroupType, actions: Vec<Action>) -> Bucket {
        Bucket {
            weight: group_type.default_weight(),
            watch_port: OFPP_ANY,
            watch_group: OFPG_ANY,
            actions,
        }
    }

    /// Whether the bucket watches a port or a group (ofputil_bucket_has_liveness).
    pub fn has_liveness(&self) -> bool {
        self.watch_port != OFPP_ANY || self.watch_group != OFPG_ANY
    }

    fn encode(&self, out: &mut BytesMut) -> Result<(), EncodeError> {
        let slot = LengthSlot::new(out, 0, "bucket");
        out.put_u16(0);
        out.put_u16(self.weight);
        out.put_u32(self.watch_port);
        out.put_u32(self.watch_group);
        put_zeros(out, 4);
        encode_actions(&self.actions, out)?;
        slot.finish(out, false).map(|_| ())
    }

    fn decode(r: &mut Reader<'_>) -> Result<Bucket, DecodeError> {
        let mut peek = r.child(r.peek_rest(), "bucket");
        let len = usize::from(peek.u16()?);
        if len < BUCKET_FIXED_LEN {
            return Err(DecodeError::BadLength {
                what: "bucket",
                length: len,
                reason: "shorter than its 16-byte fixed part (OFPGMFC_BAD_BUCKET)",
            });
        }
        let mut b = r.sub(len, "bucket")?;
        b.skip(2)?;
        let weight = b.u16()?;
        let watch_port = b.u32()?;
        let watch_group = b.u32()?;
        b.skip(4)?;
        // A watched port must be a port, ANY or CONTROLLER (OFPGMFC_BAD_WATCH).
        if (0xff00..OFPP_MAX).contains(&watch_port) {
            return Err(DecodeError::BadValue {
                what: "bucket watch_port (OFPGMFC_BAD_WATCH)",
                value: u64::from(watch_port),
            });
        }
        Ok(Bucket {
            weight,
            watch_port,
            watch_group,
            actions: decode_actions(&mut b)?,
        })
    }
}

const BUCKET_FIXED_LEN: usize = 16;

fn encode_buckets(buckets: &[Bucket], out: &mut BytesMut) -> Result<(), EncodeError> {
    buckets.iter().try_for_each(|b| b.encode(out))
}

fn decode_buckets(r: &mut Reader<'_>) -> Result<Vec<Bucket>, DecodeError> {
    let mut buckets = Vec::new();
    while !r.is_empty() {
        buckets.push(Bucket::decode(r)?);
    }
    Ok(buckets)
}

/// OFPT_GROUP_MOD.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct GroupMod {
    pub command: GroupCommand,
    pub group_type: GroupType,
    pub group_id: u32,
    /// None for a delete.
    pub buckets: Vec<Bucket>,
}

impl GroupMod {
    /// Deletes group `group_id` (`OFPG_ALL`: every group).
    pub fn delete(group_id: u32) -> GroupMod {
        GroupMod {
            command: GroupCommand::Delete,
            group_type: GroupType::All,
            group_id,
            buckets: Vec::new(),
        }
    }

    pub(crate) fn encode(&self, out: &mut BytesMut) -> Result<(), EncodeError> {
        out.put_u16(self.command.to_u16());
        out.put_u8(self.group_type.to_u8());
        put_zeros(out, 1);
        out.put_u32(self.group_id);
        encode_buckets(&self.buckets, out)
    }

    pub(crate) fn decode(r: &mut Reader<'_>) -> Result<GroupMod, DecodeError> {
        let raw_command = r.u16()?;
        let raw_type = r.u8()?;
        r.skip(1)?;
        let group_id = r.u32()?;
        let buckets = decode_buckets(r)?;
        let command = GroupCommand::from_u16(raw_command).ok_or(DecodeError::BadValue {
            what: "group mod command (OFPGMFC_BAD_COMMAND)",
            value: u64::from(raw_command),
        })?;
        let group_type = GroupType::from_u8(raw_type).ok_or(DecodeError::BadValue {
            what: "group type (OFPGMFC_BAD_TYPE)",
            value: u64::from(raw_type),
        })?;
        let gm = GroupMod {
            command,
            group_type,
            group_id,
            buckets,
        };
        gm.check()
            .map_err(|what| DecodeError::BadValue { what, value: 0 })?;
        Ok(gm)
    }

    /// OVS's checks of a group mod (ofputil_pull_ofp11_group_mod, ofputil_check_group_mod);
    /// the parser makes the same.
    pub fn check(&self) -> Result<(), &'static str> {
        if self.command == GroupCommand::Delete {
            return if self.buckets.is_empty() {
                Ok(())
            } else {
                Err("a group delete carries no buckets (OFPGMFC_INVALID_GROUP)")
            };
        }
        if self.group_type == GroupType::Indirect && self.buckets.len() != 1 {
            return Err("an indirect group has exactly one bucket (OFPGMFC_INVALID_GROUP)");
        }
        for bucket in &self.buckets {
            if bucket.weight != 0 && self.group_type != GroupType::Select {
                return Err(
                    "only the buckets of a select group have weights (OFPGMFC_INVALID_GROUP)",
                );
            }
            match self.group_type {
                GroupType::All | GroupType::Indirect if bucket.has_liveness() => {
                    return Err("only select and fast-failover buckets watch ports or groups (OFPGMFC_WATCH_UNSUPPORTED)");
                }
                GroupType::FastFailover if !bucket.has_liveness() => {
                    return Err(
                        "a fast-failover bucket watches a port or a group (OFPGMFC_INVALID_GROUP)",
                    );
                }
                _ => {}
            }
        }
        Ok(())
    }
}

/// Whether a bucket may watch `port` (parse_bucket_str): a port, ANY or CONTROLLER.
pub(crate) fn watchable(port: u32) -> bool {
    port < 0xff00 || port == OFPP_ANY || port == OFPP_CONTROLLER
}

/// One group of a group description reply (OFPMP_GROUP_DESC).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct GroupDesc {
    pub group_type: GroupType,
    pub group_id: u32,
    pub buckets: Vec<Bucket>,
}

impl GroupDesc {
    pub(crate) fn encode(&self, out: &mut BytesMut) -> Result<(), EncodeError> {
        let slot = LengthSlot::new(out, 0, "group description");
        out.put_u16(0);
        out.put_u8(self.group_type.to_u8());
        put_zeros(out, 1);
        out.put_u32(self.group_id);
        encode_buckets(&self.buckets, out)?;
        slot.finish(out, false).map(|_| ())
    }

    pub(crate) fn decode(r: &mut Reader<'_>) -> Result<GroupDesc, DecodeError> {
        let mut peek = r.child(r.peek_rest(), "group description");
        let len = usize::from(peek.u16()?);
        if len < 8 {
            return Err(DecodeError::BadLength {
                what: "group description",
                length: len,
                reason: "shorter than its 8-byte fixed part",
            });
        }
        let mut d = r.sub(len, "group description")?;
        d.skip(2)?;
        let raw_type = d.u8()?;
        d.skip(1)?;
        let group_id = d.u32()?;
        let group_type = GroupType::from_u8(raw_type).ok_or(DecodeError::BadValue {
            what: "group type",
            value: u64::from(raw_type),
        })?;
        Ok(GroupDesc {
            group_type,
            group_id,
            buckets: decode_buckets(&mut d)?,
        })
    }
}

/// A bucket's counters in a group statistics reply.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct BucketCounter {
    pub packet_count: u64,
    pub byte_count: u64,
}

/// One group of a group statistics reply (OFPMP_GROUP).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct GroupStats {
    pub group_id: u32,
    pub ref_count: u32,
    pub packet_count: u64,
    pub byte_count: u64,
    pub duration_sec: u32,
    pub duration_nsec: u32,
    pub buckets: Vec<BucketCounter>,
}

const GROUP_STATS_FIXED_LEN: usize = 40;

impl GroupStats {
    pub(crate) fn encode(&self, out: &mut BytesMut) -> Result<(), EncodeError> {
        let slot = LengthSlot::new(out, 0, "group statistics");
        out.put_u16(0);
        put_zeros(out, 2);
        out.put_u32(self.group_id);
        out.put_u32(self.ref_count);
        put_zeros(out, 4);
        out.put_u64(self.packet_count);
        out.put_u64(self.byte_count);
        out.put_u32(self.duration_sec);
        out.put_u32(self.duration_nsec);
        for b in &self.buckets {
            out.put_u64(b.packet_count);
            out.put_u64(b.byte_count);
        }
        slot.finish(out, false).map(|_| ())
    }

    pub(crate) fn decode(r: &mut Reader<'_>) -> Result<GroupStats, DecodeError> {
        let mut peek = r.child(r.peek_rest(), "group statistics");
        let len = usize::from(peek.u16()?);
        if len < GROUP_STATS_FIXED_LEN || (len - GROUP_STATS_FIXED_LEN) % 16 != 0 {
            return Err(DecodeError::BadLength {
                what: "group statistics",
                length: len,
                reason: "not 40 bytes plus 16 per bucket",
            });
        }
        let mut s = r.sub(len, "group statistics")?;
        s.skip(4)?;
        let group_id = s.u32()?;
        let ref_count = s.u32()?;
        s.skip(4)?;
        let packet_count = s.u64()?;
        let byte_count = s.u64()?;
        let duration_sec = s.u32()?;
        let duration_nsec = s.u32()?;
        let mut buckets = Vec::new();
        while !s.is_empty() {
            buckets.push(BucketCounter {
                packet_count: s.u64()?,
                byte_count: s.u64()?,
            });
        }
        Ok(GroupStats {
            group_id,
            ref_count,
            packet_count,
            byte_count,
            duration_sec,
            duration_nsec,
            buckets,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_util::hex;
    use crate::{Field, Message};

    /// `ovs-ofctl -O OpenFlow13 add-group SOCK 'group_id=1,type=select,bucket=weight:100,
    /// watch_port:2,actions=output:1,bucket=weight:50,actions=set_field:0x1->pkt_mark,output:2'`
    /// (ovs-ofctl 3.1, captured on a fake switch).
    const SELECT_GROUP_MOD: &str = "040f00600000000200000100000000010020006400000002ffffffff000000000000001000000001000000000000000000300032ffffffffffffffff000000000019001000014204000000010000000000000010000000020000000000000000";

    #[test]
    fn select_group_mod_from_ovs_ofctl() {
        let bytes = hex(SELECT_GROUP_MOD);
        let (xid, msg) = Message::decode(&bytes).unwrap();
        let expected = GroupMod {
            command: GroupCommand::Add,
            group_type: GroupType::Select,
            group_id: 1,
            buckets: vec![
                Bucket {
                    weight: 100,
                    watch_port: 2,
                    ..Bucket::new(GroupType::Select, vec![Action::output(1)])
                },
                Bucket {
                    weight: 50,
                    ..Bucket::new(
                        GroupType::Select,
                        vec![
                            Action::SetField {
                                field: Field::PktMark,
                                value: 1,
                            },
                            Action::output(2),
                        ],
                    )
                },
            ],
        };
        assert_eq!(msg, Message::GroupMod(expected));
        assert_eq!(msg.to_bytes(xid).unwrap().to_vec(), bytes);
    }

    #[test]
    fn refuses_what_ovs_refuses() {
        // Type 4 (OFPGMFC_BAD_TYPE), command 3 (OFPGMFC_BAD_COMMAND).
        for bad in [
            "040f0010000000020000040000000001",
            "040f0010000000020003000000000001",
        ] {
            assert!(Message::decode(&hex(bad)).is_err(), "{bad}");
        }
        // A bucket shorter than its fixed part.
        assert!(Message::decode(&hex("040f00180000000200000000000000010008000000000000")).is_err());
        let output = |t| Bucket::new(t, vec![Action::output(1)]);
        let group = |command, group_type, buckets| GroupMod {
            command,
            group_type,
            group_id: 1,
            buckets,
        };
        for gm in [
            // A delete with a bucket (OFPGMFC_INVALID_GROUP).
            group(
                GroupCommand::Delete,
                GroupType::All,
                vec![output(GroupType::All)],
            ),
            // An indirect group without exactly one bucket.
            group(GroupCommand::Add, GroupType::Indirect, vec![]),
            // A weight outside a select group.
            group(
                GroupCommand::Add,
                GroupType::All,
                vec![Bucket {
                    weight: 5,
                    ..output(GroupType::All)
                }],
            ),
            // A watch in an all group (OFPGMFC_WATCH_UNSUPPORTED).
            group(
                GroupCommand::Add,
                GroupType::All,
                vec![Bucket {
                    watch_port: 2,
                    ..output(GroupType::All)
                }],
            ),
            // A fast-failover bucket that watches nothing.
            group(
                GroupCommand::Add,
                GroupType::FastFailover,
                vec![output(GroupType::FastFailover)],
            ),
        ] {
            let bytes = Message::GroupMod(gm.clone()).to_bytes(2).unwrap();
            assert!(Message::decode(&bytes).is_err(), "{gm:?}");
        }
    }
}
