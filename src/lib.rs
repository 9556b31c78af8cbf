//! ofnode: native OpenFlow 1.3 node controller.

pub mod netlink;
pub mod openflow;
pub mod sdn;
