//! ofnode: native OpenFlow 1.3 node controller.

pub mod api;
pub mod cli;
pub mod cluster;
pub mod cni;
pub mod controller;
pub mod daemon;
pub mod kube;
pub mod netlink;
pub mod openflow;
pub mod ovsdb;
pub mod sdn;
pub mod stream;
pub mod tls;
pub mod trace;
pub mod unixctl;
pub mod value;
