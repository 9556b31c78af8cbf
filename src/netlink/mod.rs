//! The kernel side of the overlay over raw rtnetlink (netlink-packet-route + netlink-proto,
//! through `rtnetlink`'s connection), no `ip` exec: the VXLAN device with the flannel seed's
//! compatibility rules, addresses and routes, neighbour and FDB entries, the neighbour-miss loop,
//! and the few sysctls the node needs.
//!
//! Everything goes through a [`Handle`], which is bound to one network namespace:
//! [`Handle::new`] for ofnode's own, [`Handle::in_netns`] for another (tests, and a daemon that
//! manages a namespace it does not run in).
//!
//! ```no_run
//! # async fn demo() -> ofnode::netlink::Result<()> {
//! use ofnode::netlink::{Handle, VxlanAttrs};
//! let handle = Handle::in_netns("/run/netns/node1")?;
//! let attrs = VxlanAttrs { port: Some(4789), ..VxlanAttrs::new("vxlan0", 1) };
//! let device = handle.ensure_vxlan(&attrs).await?;
//! device.configure("10.128.0.1/14".parse().unwrap()).await?;
//! # Ok(()) }
//! ```

mod addr_route;
mod error;
mod handle;
mod manager;
mod miss;
mod neigh;
mod netns;
mod sysctl;
mod types;
mod veth;
mod vxlan;

pub use addr_route::{Route, Scope};
pub use error::{Error, Result};
pub use handle::{Handle, Link};
pub use ipnet::Ipv4Net;
pub use manager::{
    overlay_address, KnownHost, VxlanManager, VxlanManagerOptions, VxlanMode, VxlanSettings,
    VxlanStatus, REPAIR_INTERVAL,
};
pub use miss::{Answer, Miss, MissLoop, MissOptions, MissStats};
pub use neigh::{FdbEntry, NeighEntry, NudState};
pub use types::{
    parse_ipv4, require_ipv4, validate_ifname, validate_vni, MacAddr, MAX_IFNAME_LEN, MAX_VNI,
};
pub use veth::{disable_tx_checksum, VethPair};
pub use vxlan::{incompatibility, EnsureOutcome, VxlanAttrs, VxlanDevice, VxlanInfo, APP_SOLICIT};
