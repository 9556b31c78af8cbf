//! The host side of setup (the seed's SetupSDN after SetupOVS), over rtnetlink: tun0 gets the
//! gateway address with the local subnet's prefix, the MTU and up; the cluster and service
//! networks are routed through tun0; the kernel's local-subnet route on tun0 is removed (pods
//! are reached through OVS, not through tun0); IPv4 forwarding is on, globally and on tun0.
//! Every step is idempotent, so running it on a node that is set up changes nothing.

use std::time::Duration;

use crate::netlink::{Handle, Route};

use super::types::{Cidr, SetupRequest};

use super::layout::TUN_PORT as TUN;

/// The local-subnet route appears asynchronously once tun0 is up with its address; the seed
/// polls for it for about a second.
const ROUTE_POLL: Duration = Duration::from_millis(100);
const ROUTE_POLLS: u32 = 10;

/// Configures tun0, routes and forwarding for `setup` in the handle's namespace.
pub async fn setup_host_network(
    handle: &Handle,
    setup: &SetupRequest,
    mtu: u32,
) -> Result<(), crate::netlink::Error> {
    let tun = handle.link_index(TUN).await?;
    let gateway = setup.local_subnet.interface_address(setup.gateway);
    let had_address = handle.ipv4_addrs(tun).await?.contains(&gateway);
    handle.replace_ipv4_addrs(tun, gateway).await?;
    handle.set_mtu(tun, mtu).await?;
    handle.set_link_up(tun).await?;
    handle
        .add_route(&Route::link_scope(setup.cluster_network.into(), tun))
        .await?;
    handle
        .add_route(&Route::link_scope(setup.service_network.into(), tun))
        .await?;
    delete_local_subnet_route(handle, setup.local_subnet, tun, !had_address).await?;
    handle.set_ipv4_forwarding(true)?;
    handle.set_ipv4_forwarding_on(TUN, true)?;
    Ok(())
}

/// Removes the kernel's route for the local subnet on tun0. When the address was just added the
/// route may not be there yet, so it is waited for (briefly, as the seed did).
async fn delete_local_subnet_route(
    handle: &Handle,
    local_subnet: Cidr,
    tun: u32,
    wait_for_it: bool,
) -> Result<(), crate::netlink::Error> {
    let route = Route::link_scope(local_subnet.into(), tun);
    let polls = if wait_for_it { ROUTE_POLLS } else { 1 };
    for attempt in 1..=polls {
        if handle.delete_route(&route).await? {
            return Ok(());
        }
        if attempt < polls {
            tokio::time::sleep(ROUTE_POLL).await;
        }
    }
    if wait_for_it {
        tracing::warn!(
            subnet = %local_subnet,
            "the local subnet route on {TUN} did not appear; if it appears later it will not be deleted"
        );
    }
    Ok(())
}
