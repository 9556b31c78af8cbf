//! Unit tests of transactions that need no switch: what is refused when pushed, and the
//! order messages go in.

use super::*;
use crate::openflow::{SwitchConfig, Target};
use ofnode_proto::{Action, BundleOrderError, Instruction};

/// A flow mod of exactly `len` bytes (a multiple of 8): an empty match and one note.
fn flow_mod_of(len: usize) -> FlowMod {
    // Header 8 + fixed part 40 + empty match 8 + apply-actions header 8 + note header 10.
    let note = vec![0x5a; len - 74];
    let mut fm = FlowMod::new(FlowModCommand::Add);
    fm.instructions = vec![Instruction::ApplyActions(vec![Action::note(&note)])];
    let encoded = Message::FlowMod(fm.clone()).to_bytes(0).unwrap();
    assert_eq!(encoded.len(), len, "test flow of the wanted size");
    fm
}

fn unconnected_switch() -> Switch {
    let target: Target = "unix:/nonexistent/ofnode-test.mgmt".parse().unwrap();
    Switch::start(SwitchConfig::new(target)).0
}

/// 65,511 bytes is the most a bundle add can carry; every longer flow mod (65,512 to
/// 65,535 bytes, still a valid message on its own) is refused when pushed, before a bundle
/// add whose length field would lie could be written.
#[tokio::test]
async fn a_flow_mod_too_long_for_a_bundle_add_is_refused_when_pushed() {
    let switch = unconnected_switch();
    let mut tx = switch.transaction();
    tx.try_push(flow_mod_of(65_504)).expect("fits a bundle add");
    for len in [65_512, 65_520, 65_528] {
        let err = tx.try_push(flow_mod_of(len)).unwrap_err();
        let Error::Encode(EncodeError::TooLong { length, max, .. }) = err else {
            panic!("{err:?}")
        };
        assert_eq!((length, max), (len + BUNDLE_ADD_OVERHEAD, 65_535));
    }
    assert_eq!(tx.len(), 1, "refused flows are not in the transaction");

    // The same flow already encoded is refused by push_encoded.
    let frame = Message::FlowMod(flow_mod_of(65_512))
        .to_bytes(0)
        .unwrap()
        .freeze();
    assert!(tx.push_encoded(frame).is_err());
    assert_eq!(tx.len(), 1);

    // `push` cannot return the error; the transaction refuses to commit with it instead,
    // sending nothing (the switch is not even connected).
    tx.push(flow_mod_of(65_528));
    let err = tx.commit().await.unwrap_err();
    assert!(matches!(err, Error::Encode(_)), "{err:?}");
    assert!(err.to_string().contains("65552"), "{err}");
}

fn group(command: GroupCommand, group_id: u32) -> GroupMod {
    let text = format!("group_id={group_id},type=select,bucket=actions=output:1");
    let mut gm = text::parse_group(&text, GroupCommand::Add).unwrap();
    gm.command = command;
    gm
}

fn flow(priority: u16) -> FlowMod {
    let mut fm = FlowMod::new(FlowModCommand::Add);
    fm.priority = priority;
    fm
}

/// The decoded messages of a transaction in the order they go into the bundle.
fn bundle_order(tx: Transaction) -> Vec<Message> {
    tx.into_bundle()
        .1
        .iter()
        .map(|frame| Message::decode(frame).unwrap().1)
        .collect()
}

/// Group adds and modifies go before every flow mod, group deletes after them, each part in
/// the order pushed (the codec's `BundleOrder`).
#[tokio::test]
async fn groups_go_before_the_flows_and_their_deletes_after() {
    let switch = unconnected_switch();
    let mut tx = switch.transaction();
    tx.add(flow(1))
        .delete_group(8)
        .add_group(group(GroupCommand::Delete, 9))
        .add(flow(2))
        .modify_group(group(GroupCommand::Add, 9));
    assert_eq!(tx.len(), 5);
    let deleted = GroupMod::delete(8);
    assert_eq!(
        bundle_order(tx),
        vec![
            Message::GroupMod(group(GroupCommand::Add, 9)),
            Message::GroupMod(group(GroupCommand::Modify, 9)),
            Message::FlowMod(flow(1)),
            Message::FlowMod(flow(2)),
            Message::GroupMod(deleted),
        ]
    );
}

/// A group deleted and then added (or modified) again in one transaction is refused when
/// pushed, naming the group, and leaves the transaction as it was; `push_group` keeps the
/// error for `commit`, which sends nothing.
#[tokio::test]
async fn a_group_deleted_then_added_is_refused_when_pushed() {
    let switch = unconnected_switch();
    let mut tx = switch.transaction();
    tx.add(flow(1)).delete_group(9);
    let err = tx.try_push_group(group(GroupCommand::Add, 9)).unwrap_err();
    let Error::BundleOrder(BundleOrderError::GroupReusedAfterDelete { group_id: 9, .. }) = err
    else {
        panic!("{err:?}")
    };
    assert!(err.to_string().contains("group 9"), "{err}");
    assert_eq!(tx.len(), 2);
    tx.try_push_group(group(GroupCommand::Add, 10))
        .expect("another group is fine");
    tx.modify_group(group(GroupCommand::Modify, 9));
    assert_eq!(tx.len(), 3);
    let err = tx.commit().await.unwrap_err();
    assert!(matches!(err, Error::BundleOrder(_)), "{err:?}");
}

/// A group mod too long for a bundle add is refused like a flow mod.
#[tokio::test]
async fn a_group_mod_too_long_for_a_bundle_add_is_refused_when_pushed() {
    let switch = unconnected_switch();
    let mut tx = switch.transaction();
    let mut gm = group(GroupCommand::Add, 5);
    gm.buckets[0].actions = vec![Action::note(&[0; 65_500])];
    let err = tx.try_push_group(gm).unwrap_err();
    assert!(
        matches!(err, Error::Encode(EncodeError::TooLong { .. })),
        "{err:?}"
    );
    assert!(tx.is_empty());
}

/// A failing group mod is named as a line of an `ovs-ofctl bundle` file.
#[test]
fn a_group_mod_is_named_in_ovs_ofctl_bundle_syntax() {
    assert_eq!(
        message_text(&Message::GroupMod(group(GroupCommand::Add, 5))).as_deref(),
        Some("group add group_id=5,type=select,bucket=actions=output:1")
    );
    assert_eq!(
        message_text(&Message::GroupMod(GroupMod::delete(5))).as_deref(),
        Some("group delete group_id=5")
    );
    assert_eq!(
        message_text(&Message::GroupMod(GroupMod::delete(OFPG_ALL))).as_deref(),
        Some("group delete group_id=all")
    );
}
