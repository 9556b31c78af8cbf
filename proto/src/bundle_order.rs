//! The order of groups and flows inside one ONF bundle, as Open vSwitch needs it.
//!
//! OVS refuses a flow whose actions name a group that does not exist yet
//! (OFPBAC_BAD_OUT_GROUP), and deleting a group deletes every flow that uses it: so in a bundle
//! a group must arrive before the flows that use it and leave after them. [`BundleOrder`]
//! places each message in one of three stages — group adds and modifies, then flow mods (and
//! anything else), then group deletes — keeping the caller's order within a stage.
//!
//! OVS 3.1 bundles only flow mods, group mods, port mods and packet-outs: anything else (a
//! meter mod, above all) is refused here with [`BundleOrderError::NotBundlable`] rather than by
//! the switch with OFPBFC_MSG_UNSUP.
//!
//! Moving a message across another one about the same group would change what the bundle
//! does, so that is refused instead: a group deleted and then added or modified again (the
//! add would go first and fail with OFPGMFC_GROUP_EXISTS, or, for a new id, the group would be
//! added and then deleted). OVS 3.1 itself applies a delete and an add of one id in that order
//! (the group is replaced and every flow that used it is deleted); a modify replaces the
//! group's type and buckets and keeps those flows, which is nearly always what is meant
//! (tests/oracle.rs `c_a_group_deleted_and_added_in_one_bundle`).

use std::collections::HashSet;

use crate::message::message_name;
use crate::{GroupCommand, Message, OFPG_ALL, OFPT_PORT_MOD};

/// The three parts of a bundle, in the order they are sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum BundleStage {
    /// Group adds and modifies: before the flows that use them.
    GroupsIn,
    /// Flow mods (and port mods and packet-outs), in the caller's order.
    Flows,
    /// Group deletes: after the flows that used them.
    GroupsOut,
}

/// A bundle whose messages cannot be put in OVS's order without changing what it does.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BundleOrderError {
    /// A group mod that adds or modifies `group_id` after a delete of that group (or of all
    /// groups) in the same bundle.
    #[error(
        "group {group_id} is added or modified after {} in the same bundle, but a bundle \
         applies group adds and modifies before its flows and group deletes after them; to \
         change the group and keep the flows that use it, send only a modify (it may change \
         the group's type too); to drop those flows as well, delete the group in one bundle \
         and add it in the next",
        if *.after_delete_all { "a delete of all groups" } else { "its own delete" }
    )]
    GroupReusedAfterDelete {
        group_id: u32,
        /// The delete was of every group (`group_id=all`), not of this one.
        after_delete_all: bool,
    },
    /// A message OVS 3.1 does not take inside a bundle.
    #[error(
        "a {what} cannot go in a bundle: OVS 3.1 bundles only flow mods, group mods, port mods \
         and packet-outs (OFPBFC_MSG_UNSUP); send it on its own (a meter before the bundle \
         whose flows use it, its delete after the bundle that removes them)"
    )]
    NotBundlable { what: &'static str },
}

/// Places a bundle's messages, one after another in the caller's order, in their
/// [`BundleStage`]; remembers the groups deleted so far to refuse a later add or modify of
/// one of them.
#[derive(Debug, Clone, Default)]
pub struct BundleOrder {
    deleted: HashSet<u32>,
    all_deleted: bool,
}

impl BundleOrder {
    pub fn new() -> BundleOrder {
        BundleOrder::default()
    }

    /// The stage of a group mod of `command` on `group_id`, or the error when it adds or
    /// modifies a group an earlier message of the bundle deletes.
    pub fn place_group(
        &mut self,
        command: GroupCommand,
        group_id: u32,
    ) -> Result<BundleStage, BundleOrderError> {
        if command == GroupCommand::Delete {
            if group_id == OFPG_ALL {
                self.all_deleted = true;
            } else {
                self.deleted.insert(group_id);
            }
            return Ok(BundleStage::GroupsOut);
        }
        if self.all_deleted || self.deleted.contains(&group_id) {
            return Err(BundleOrderError::GroupReusedAfterDelete {
                group_id,
                after_delete_all: !self.deleted.contains(&group_id),
            });
        }
        Ok(BundleStage::GroupsIn)
    }

    /// The stage of any message (a group mod as [`BundleOrder::place_group`] places it), or
    /// the error for a message OVS does not bundle.
    pub fn place(&mut self, message: &Message) -> Result<BundleStage, BundleOrderError> {
        match message {
            Message::GroupMod(gm) => self.place_group(gm.command, gm.group_id),
            Message::FlowMod(_) | Message::PacketOut(_) => Ok(BundleStage::Flows),
            Message::Unknown { msg_type, .. } if *msg_type == OFPT_PORT_MOD => {
                Ok(BundleStage::Flows)
            }
            other => Err(BundleOrderError::NotBundlable {
                what: message_name(other.msg_type()),
            }),
        }
    }
}

/// The messages of one bundle in the order OVS needs them: group adds and modifies first,
/// then the flow mods (port mods and packet-outs with them), then group deletes, the caller's
/// order kept within each part; or the error when that order would change what the bundle
/// does, or a message cannot be bundled (see [`BundleOrderError`]).
pub fn order_for_bundle(messages: Vec<Message>) -> Result<Vec<Message>, BundleOrderError> {
    let mut order = BundleOrder::new();
    let mut placed = Vec::with_capacity(messages.len());
    for message in messages {
        placed.push((order.place(&message)?, message));
    }
    // A stable sort keeps the caller's order within each stage.
    placed.sort_by_key(|(stage, _)| *stage);
    Ok(placed.into_iter().map(|(_, message)| message).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Bucket, FlowMod, FlowModCommand, GroupMod, GroupType};

    fn group(command: GroupCommand, group_id: u32) -> Message {
        Message::GroupMod(GroupMod {
            command,
            group_type: GroupType::Indirect,
            group_id,
            buckets: vec![Bucket::new(GroupType::Indirect, vec![])],
        })
    }

    fn flow(priority: u16) -> Message {
        let mut fm = FlowMod::new(FlowModCommand::Add);
        fm.priority = priority;
        Message::FlowMod(fm)
    }

    #[test]
    fn groups_come_before_the_flows_that_use_them_and_go_after() {
        let ordered = order_for_bundle(vec![
            flow(1),
            Message::GroupMod(GroupMod::delete(8)),
            group(GroupCommand::Add, 9),
            flow(2),
            group(GroupCommand::Modify, 9),
            group(GroupCommand::AddOrModify, 10),
        ]);
        assert_eq!(
            ordered,
            Ok(vec![
                group(GroupCommand::Add, 9),
                group(GroupCommand::Modify, 9),
                group(GroupCommand::AddOrModify, 10),
                flow(1),
                flow(2),
                Message::GroupMod(GroupMod::delete(8)),
            ])
        );
    }

    #[test]
    fn a_group_added_and_then_deleted_keeps_its_order() {
        let messages = vec![
            group(GroupCommand::Add, 9),
            flow(1),
            Message::GroupMod(GroupMod::delete(9)),
        ];
        assert_eq!(order_for_bundle(messages.clone()), Ok(messages));
    }

    #[test]
    fn a_group_deleted_and_then_added_or_modified_is_refused() {
        for command in [
            GroupCommand::Add,
            GroupCommand::Modify,
            GroupCommand::AddOrModify,
        ] {
            let err = order_for_bundle(vec![
                group(GroupCommand::Add, 7),
                Message::GroupMod(GroupMod::delete(9)),
                flow(1),
                group(command, 9),
            ])
            .unwrap_err();
            assert_eq!(
                err,
                BundleOrderError::GroupReusedAfterDelete {
                    group_id: 9,
                    after_delete_all: false
                }
            );
            let text = err.to_string();
            assert!(
                text.starts_with("group 9 is added or modified after its own delete")
                    && text.contains("send only a modify"),
                "{text}"
            );
        }
        // After a delete of every group, no group may come back in the same bundle.
        let err = order_for_bundle(vec![
            Message::GroupMod(GroupMod::delete(OFPG_ALL)),
            group(GroupCommand::Add, 5),
        ])
        .unwrap_err();
        assert_eq!(
            err,
            BundleOrderError::GroupReusedAfterDelete {
                group_id: 5,
                after_delete_all: true
            }
        );
        assert!(err.to_string().contains("a delete of all groups"), "{err}");
        // Another id is fine.
        assert!(order_for_bundle(vec![
            Message::GroupMod(GroupMod::delete(9)),
            group(GroupCommand::Add, 10),
        ])
        .is_ok());
    }

    #[test]
    fn a_meter_mod_is_not_bundled() {
        let meter = Message::MeterMod(crate::MeterMod::delete(1));
        let err = order_for_bundle(vec![flow(1), meter]).unwrap_err();
        assert_eq!(err, BundleOrderError::NotBundlable { what: "meter_mod" });
        assert!(err.to_string().contains("OFPBFC_MSG_UNSUP"), "{err}");
        assert!(order_for_bundle(vec![Message::BarrierRequest]).is_err());
    }
}
