//! ofnode: native OpenFlow 1.3 node controller.

pub mod openflow;
pub mod sdn;
pub mod ovsdb;
