//! IPv4 addresses and routes on any link (the VXLAN device, tun0, …).

use std::net::{IpAddr, Ipv4Addr};

use ipnet::Ipv4Net;
use netlink_packet_core::{NLM_F_CREATE, NLM_F_EXCL};
use netlink_packet_route::address::{AddressAttribute, AddressMessage};
use netlink_packet_route::route::{
    RouteAddress, RouteAttribute, RouteHeader, RouteMessage, RouteProtocol, RouteScope, RouteType,
};
use netlink_packet_route::{AddressFamily, RouteNetlinkMessage};
use nix::errno::Errno;
use rtnetlink::{AddressMessageBuilder, RouteMessageBuilder};

use super::error::Result;
use super::handle::Handle;

/// The scope of a route, as `ip route … scope`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    /// Reachable through a gateway or anywhere (the default of `ip route add`).
    Universe,
    /// Directly on the link: no gateway.
    Link,
}

impl From<Scope> for RouteScope {
    fn from(scope: Scope) -> RouteScope {
        match scope {
            Scope::Universe => RouteScope::Universe,
            Scope::Link => RouteScope::Link,
        }
    }
}

/// An IPv4 route in the main table through one device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Route {
    pub dst: Ipv4Net,
    /// The output device's index.
    pub dev: u32,
    pub gateway: Option<Ipv4Addr>,
    pub scope: Scope,
    /// The gateway is on the link even though no address of ours covers it (`onlink`).
    pub onlink: bool,
}

impl Route {
    /// `ip route add DST dev DEV` (scope universe, as the seed's `Configure` adds it).
    pub fn universe(dst: Ipv4Net, dev: u32) -> Route {
        Route {
            dst,
            dev,
            gateway: None,
            scope: Scope::Universe,
            onlink: false,
        }
    }

    /// `ip route add DST dev DEV scope link`.
    pub fn link_scope(dst: Ipv4Net, dev: u32) -> Route {
        Route {
            scope: Scope::Link,
            ..Route::universe(dst, dev)
        }
    }

    /// `ip route add DST via GATEWAY dev DEV`.
    pub fn via(dst: Ipv4Net, gateway: Ipv4Addr, dev: u32) -> Route {
        Route {
            gateway: Some(gateway),
            ..Route::universe(dst, dev)
        }
    }

    /// The same route with `onlink`.
    pub fn onlink(self) -> Route {
        Route {
            onlink: true,
            ..self
        }
    }

    fn describe(&self) -> String {
        let mut text = format!("{} dev index {}", self.dst, self.dev);
        if let Some(gateway) = self.gateway {
            text.push_str(&format!(" via {gateway}"));
        }
        if self.scope == Scope::Link {
            text.push_str(" scope link");
        }
        if self.onlink {
            text.push_str(" onlink");
        }
        text
    }

    fn add_message(&self) -> RouteMessage {
        let mut builder = RouteMessageBuilder::<Ipv4Addr>::new()
            .destination_prefix(self.dst.network(), self.dst.prefix_len())
            .output_interface(self.dev)
            .scope(self.scope.into());
        if let Some(gateway) = self.gateway {
            builder = builder.gateway(gateway);
        }
        if self.onlink {
            builder = builder.onlink();
        }
        builder.build()
    }

    /// A delete request that matches the route whoever added it: like `ip route del`, protocol
    /// and type unspecified and scope "nowhere", which the kernel reads as "any".
    fn delete_message(&self) -> RouteMessage {
        let mut message = self.add_message();
        message.header.protocol = RouteProtocol::Unspec;
        message.header.kind = RouteType::Unspec;
        message.header.scope = RouteScope::NoWhere;
        message
    }
}

/// The IPv4 addresses of link `index` among dumped address messages, with the messages (a
/// delete request is the dumped message sent back).
fn addresses_of(messages: Vec<RouteNetlinkMessage>, index: u32) -> Vec<(Ipv4Net, AddressMessage)> {
    messages
        .into_iter()
        .filter_map(|message| match message {
            RouteNetlinkMessage::NewAddress(address) if address.header.index == index => {
                Some(address)
            }
            _ => None,
        })
        .filter_map(|address| {
            let local = address.attributes.iter().find_map(|attr| match attr {
                AddressAttribute::Local(IpAddr::V4(v4)) => Some(*v4),
                _ => None,
            })?;
            let net = Ipv4Net::new(local, address.header.prefix_len).ok()?;
            Some((net, address))
        })
        .collect()
}

/// `message` as a [`Route`] when it is a main-table IPv4 route through `index` with a gateway.
fn gateway_route_of(message: &RouteMessage, index: u32) -> Option<Route> {
    if message.header.table != RouteHeader::RT_TABLE_MAIN
        || message.header.address_family != AddressFamily::Inet
    {
        return None;
    }
    let mut oif = None;
    let mut dst = Ipv4Addr::UNSPECIFIED;
    let mut gateway = None;
    for attr in &message.attributes {
        match attr {
            RouteAttribute::Oif(link) => oif = Some(*link),
            RouteAttribute::Destination(RouteAddress::Inet(v4)) => dst = *v4,
            RouteAttribute::Gateway(RouteAddress::Inet(v4)) => gateway = Some(*v4),
            _ => {}
        }
    }
    if oif != Some(index) {
        return None;
    }
    let dst = Ipv4Net::new(dst, message.header.destination_prefix_length).ok()?;
    Some(Route::via(dst, gateway?, index).onlink())
}

impl Handle {
    /// The IPv4 addresses on link `index`.
    pub async fn ipv4_addrs(&self, index: u32) -> Result<Vec<Ipv4Net>> {
        Ok(self
            .ipv4_address_messages(index)
            .await?
            .into_iter()
            .map(|(net, _)| net)
            .collect())
    }

    async fn ipv4_address_messages(&self, index: u32) -> Result<Vec<(Ipv4Net, AddressMessage)>> {
        let mut request = AddressMessage::default();
        request.header.family = AddressFamily::Inet;
        let replies = self
            .dump(
                format!("list IPv4 addresses of link index {index}"),
                RouteNetlinkMessage::GetAddress(request),
            )
            .await?;
        Ok(addresses_of(replies, index))
    }

    /// Makes `net` the only IPv4 address of link `index`: removes every other one and adds `net`
    /// unless it is already there (so an unchanged address never blinks).
    pub async fn replace_ipv4_addrs(&self, index: u32, net: Ipv4Net) -> Result<()> {
        let mut present = false;
        for (existing, message) in self.ipv4_address_messages(index).await? {
            if existing == net {
                present = true;
                continue;
            }
            let deleted = self
                .ack(
                    format!("delete IPv4 address {existing} from link index {index}"),
                    RouteNetlinkMessage::DelAddress(message),
                    0,
                )
                .await;
            match deleted {
                // Deleting a primary address also removes its secondaries: already gone is fine.
                Err(err) if err.is_errno(Errno::EADDRNOTAVAIL) => {}
                other => other?,
            }
        }
        if !present {
            let message = AddressMessageBuilder::<Ipv4Addr>::new()
                .index(index)
                .address(net.addr(), net.prefix_len())
                .build();
            self.ack(
                format!("add IPv4 address {net} to link index {index}"),
                RouteNetlinkMessage::NewAddress(message),
                NLM_F_CREATE | NLM_F_EXCL,
            )
            .await?;
        }
        Ok(())
    }

    /// The routes of the main table through link `index` that have a gateway (`ip route show
    /// dev DEV` with `via`): what a VXLAN device's owner adds per remote subnet, never the
    /// device's own connected or cluster-network route.
    pub async fn gateway_routes(&self, index: u32) -> Result<Vec<Route>> {
        let mut request = RouteMessage::default();
        request.header.address_family = AddressFamily::Inet;
        let replies = self
            .dump(
                format!("list routes of link index {index}"),
                RouteNetlinkMessage::GetRoute(request),
            )
            .await?;
        Ok(replies
            .iter()
            .filter_map(|reply| match reply {
                RouteNetlinkMessage::NewRoute(message) => gateway_route_of(message, index),
                _ => None,
            })
            .collect())
    }

    /// Adds `route`; true when added, false when an equal route already existed (EEXIST).
    pub async fn add_route(&self, route: &Route) -> Result<bool> {
        let added = self
            .ack(
                format!("add route {}", route.describe()),
                RouteNetlinkMessage::NewRoute(route.add_message()),
                NLM_F_CREATE | NLM_F_EXCL,
            )
            .await;
        match added {
            Ok(()) => Ok(true),
            Err(err) if err.is_errno(Errno::EEXIST) => Ok(false),
            Err(err) => Err(err),
        }
    }

    /// Deletes `route`; true when deleted, false when there was no such route (ESRCH).
    pub async fn delete_route(&self, route: &Route) -> Result<bool> {
        let deleted = self
            .ack(
                format!("delete route {}", route.describe()),
                RouteNetlinkMessage::DelRoute(route.delete_message()),
                0,
            )
            .await;
        match deleted {
            Ok(()) => Ok(true),
            Err(err) if err.is_errno(Errno::ESRCH) => Ok(false),
            Err(err) => Err(err),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes_describe_themselves_like_ip() {
        let dst: Ipv4Net = "10.128.2.0/23".parse().unwrap();
        let route = Route::via(dst, Ipv4Addr::new(10, 128, 2, 1), 5).onlink();
        assert_eq!(
            route.describe(),
            "10.128.2.0/23 dev index 5 via 10.128.2.1 onlink"
        );
        let route = Route::link_scope("172.30.0.0/16".parse().unwrap(), 4);
        assert_eq!(route.describe(), "172.30.0.0/16 dev index 4 scope link");
    }

    #[test]
    fn delete_matches_any_protocol_and_scope() {
        let route = Route::link_scope("172.30.0.0/16".parse().unwrap(), 4);
        let add = route.add_message();
        assert_eq!(add.header.scope, RouteScope::Link);
        assert_eq!(add.header.protocol, RouteProtocol::Static);
        let delete = route.delete_message();
        assert_eq!(delete.header.scope, RouteScope::NoWhere);
        assert_eq!(delete.header.protocol, RouteProtocol::Unspec);
        assert_eq!(delete.attributes, add.attributes);
    }
}
