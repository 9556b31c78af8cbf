//! What reached the switch (and came back), summarised the way tests ask about it: bundles
//! with their flow mods and how each ended, flow mods sent outside any bundle.

use std::collections::HashMap;

use super::frame::{msg_type, BundleCtrl, Direction, Frame};

/// What a bundle message says about its bundle.
#[derive(Clone, Copy)]
enum Kind {
    /// An add carrying a message of this type.
    Add(u8),
    Ctrl(BundleCtrl),
}

/// A slice of the proxy's log, in the order messages passed.
#[derive(Debug, Clone, Default)]
pub struct Traffic {
    pub frames: Vec<Frame>,
}

/// How a bundle ended, as far as the switch was told.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BundleEnd {
    /// A COMMIT request reached the switch.
    Committed,
    /// A DISCARD request reached the switch.
    Discarded,
    /// Neither (the connection ended first, or the traffic slice ends before).
    Unfinished,
}

/// One bundle the switch received.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bundle {
    pub conn: usize,
    pub id: u32,
    /// Flow mods added to it.
    pub flow_mods: usize,
    /// Other messages added to it.
    pub other_adds: usize,
    pub end: BundleEnd,
    /// The switch answered the COMMIT with a COMMIT reply (and the proxy delivered it).
    pub commit_replied: bool,
}

impl Traffic {
    pub fn to_switch(&self) -> impl Iterator<Item = &Frame> {
        self.frames
            .iter()
            .filter(|f| f.direction == Direction::ToSwitch)
    }

    pub fn to_controller(&self) -> impl Iterator<Item = &Frame> {
        self.frames
            .iter()
            .filter(|f| f.direction == Direction::ToController)
    }

    /// Every bundle opened (or added to) in this slice, in the order they first appear.
    pub fn bundles(&self) -> Vec<Bundle> {
        let mut bundles: Vec<Bundle> = Vec::new();
        let mut index: HashMap<(usize, u32), usize> = HashMap::new();
        for frame in &self.frames {
            let (id, kind) = match (frame.bundle_add(), frame.bundle_ctrl()) {
                (Some((id, inner)), _) => (id, Kind::Add(inner)),
                (None, Some((id, ctrl))) => (id, Kind::Ctrl(ctrl)),
                (None, None) => continue,
            };
            let at = *index.entry((frame.conn, id)).or_insert_with(|| {
                bundles.push(Bundle {
                    conn: frame.conn,
                    id,
                    flow_mods: 0,
                    other_adds: 0,
                    end: BundleEnd::Unfinished,
                    commit_replied: false,
                });
                bundles.len() - 1
            });
            let bundle = &mut bundles[at];
            match (kind, frame.direction) {
                (Kind::Add(msg_type::FLOW_MOD), _) => bundle.flow_mods += 1,
                (Kind::Add(_), _) => bundle.other_adds += 1,
                (Kind::Ctrl(BundleCtrl::CommitRequest), Direction::ToSwitch) => {
                    bundle.end = BundleEnd::Committed
                }
                (Kind::Ctrl(BundleCtrl::DiscardRequest), Direction::ToSwitch) => {
                    bundle.end = BundleEnd::Discarded
                }
                (Kind::Ctrl(BundleCtrl::CommitReply), Direction::ToController) => {
                    bundle.commit_replied = true
                }
                (Kind::Ctrl(_), _) => {}
            }
        }
        bundles
    }

    /// Bundles whose COMMIT reached the switch.
    pub fn committed_bundles(&self) -> Vec<Bundle> {
        self.bundles()
            .into_iter()
            .filter(|b| b.end == BundleEnd::Committed)
            .collect()
    }

    /// Flow mods sent to the switch outside any bundle.
    pub fn loose_flow_mods(&self) -> usize {
        self.to_switch().filter(|f| f.is_flow_mod()).count()
    }

    /// Flow mods the switch was asked to apply, in bundles that were committed or loose.
    pub fn applied_flow_mods(&self) -> usize {
        let bundled: usize = self.committed_bundles().iter().map(|b| b.flow_mods).sum();
        bundled + self.loose_flow_mods()
    }

    /// Messages of `msg_type` that reached the switch.
    pub fn count_to_switch(&self, kind: u8) -> usize {
        self.to_switch().filter(|f| f.msg_type() == kind).count()
    }

    /// A one-line description for assertion messages.
    pub fn describe(&self) -> String {
        let bundles: Vec<String> = self
            .bundles()
            .iter()
            .map(|b| {
                format!(
                    "#{}@{}: {} flow mods, {:?}{}",
                    b.id,
                    b.conn,
                    b.flow_mods,
                    b.end,
                    if b.commit_replied { ", replied" } else { "" }
                )
            })
            .collect();
        format!(
            "{} messages to the switch, {} back; bundles [{}]; loose flow mods {}",
            self.to_switch().count(),
            self.to_controller().count(),
            bundles.join("; "),
            self.loose_flow_mods()
        )
    }
}
