//! The rtnetlink connection: one socket per [`Handle`], bound to the network namespace it was
//! opened in, driven by a netlink-proto connection task on the caller's tokio runtime.

use std::io;
use std::os::fd::{FromRawFd, IntoRawFd};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use futures::StreamExt;
use netlink_packet_core::{NetlinkMessage, NetlinkPayload, NLM_F_ACK, NLM_F_DUMP, NLM_F_REQUEST};
use netlink_packet_route::link::{InfoData, LinkAttribute, LinkFlags, LinkInfo, LinkMessage};
use netlink_packet_route::RouteNetlinkMessage;
use netlink_sys::{protocols::NETLINK_ROUTE, Socket, TokioSocket};
use nix::errno::Errno;

use super::error::{Error, Result};
use super::netns;
use super::types::{validate_ifname, MacAddr};
use super::vxlan::VxlanInfo;

/// A cheap-to-clone handle on one rtnetlink socket. Every request made through it acts on the
/// network namespace the socket was opened in.
#[derive(Clone, Debug)]
pub struct Handle {
    rt: rtnetlink::Handle,
    netns: Option<Arc<PathBuf>>,
}

/// What the kernel reports about one link.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Link {
    pub index: u32,
    pub name: String,
    /// The `IFLA_INFO_KIND` (`vxlan`, `veth`, `dummy`, …); `None` for plain devices such as `lo`.
    pub kind: Option<String>,
    pub mac: Option<MacAddr>,
    pub mtu: Option<u32>,
    /// The administrative state (`IFF_UP`).
    pub up: bool,
    /// The VXLAN settings when the link is a VXLAN device.
    pub vxlan: Option<VxlanInfo>,
}

impl Handle {
    /// Opens an rtnetlink socket in the current network namespace and spawns its connection task
    /// on the current tokio runtime.
    pub fn new() -> Result<Handle> {
        Handle::connect(None)
    }

    /// Opens an rtnetlink socket inside the network namespace at `path` (e.g.
    /// `/run/netns/NAME`); every request through this handle then acts in that namespace,
    /// while the calling thread stays where it is.
    pub fn in_netns(path: impl AsRef<Path>) -> Result<Handle> {
        Handle::connect(Some(path.as_ref()))
    }

    fn connect(netns: Option<&Path>) -> Result<Handle> {
        let runtime = tokio::runtime::Handle::try_current().map_err(|_| Error::NoRuntime)?;
        let socket = open_socket(netns, "requests", |_| Ok(()))?;
        let (connection, rt, _unsolicited) = rtnetlink::from_socket(socket);
        runtime.spawn(connection);
        Ok(Handle {
            rt,
            netns: netns.map(|path| Arc::new(path.to_path_buf())),
        })
    }

    /// The namespace this handle acts in; `None` for the namespace ofnode runs in.
    pub fn netns(&self) -> Option<&Path> {
        self.netns.as_deref().map(PathBuf::as_path)
    }

    /// Sends a request that the kernel acknowledges, and waits for the acknowledgement.
    pub(crate) async fn ack(
        &self,
        op: String,
        message: RouteNetlinkMessage,
        flags: u16,
    ) -> Result<()> {
        self.exchange(op, message, NLM_F_ACK | flags)
            .await
            .map(drop)
    }

    /// Sends a dump request and collects every message of the reply.
    pub(crate) async fn dump(
        &self,
        op: String,
        message: RouteNetlinkMessage,
    ) -> Result<Vec<RouteNetlinkMessage>> {
        self.exchange(op, message, NLM_F_DUMP).await
    }

    async fn exchange(
        &self,
        op: String,
        message: RouteNetlinkMessage,
        flags: u16,
    ) -> Result<Vec<RouteNetlinkMessage>> {
        let mut request = NetlinkMessage::from(message);
        request.header.flags = NLM_F_REQUEST | flags;
        let mut rt = self.rt.clone();
        let mut replies = match rt.request(request) {
            Ok(replies) => replies,
            Err(_) => return Err(Error::ConnectionClosed { op }),
        };
        let mut messages = Vec::new();
        while let Some(reply) = replies.next().await {
            match reply.payload {
                NetlinkPayload::InnerMessage(message) => messages.push(message),
                NetlinkPayload::Error(err) if err.code.is_some() => {
                    return Err(Error::from_error_message(op, &err));
                }
                // ACK, DONE, NOOP: nothing to keep.
                _ => {}
            }
        }
        Ok(messages)
    }

    /// The link named `name`, or `None` when there is none.
    pub async fn link_by_name(&self, name: &str) -> Result<Option<Link>> {
        validate_ifname(name)?;
        let mut message = LinkMessage::default();
        message
            .attributes
            .push(LinkAttribute::IfName(name.to_string()));
        self.get_link(format!("look up link {name:?}"), message)
            .await
    }

    /// The link with index `index`, or `None` when there is none.
    pub async fn link_by_index(&self, index: u32) -> Result<Option<Link>> {
        let mut message = LinkMessage::default();
        message.header.index = index;
        self.get_link(format!("look up link index {index}"), message)
            .await
    }

    /// The index of the link named `name`; an error when it does not exist.
    pub async fn link_index(&self, name: &str) -> Result<u32> {
        self.link_by_name(name)
            .await?
            .map(|link| link.index)
            .ok_or_else(|| Error::LinkNotFound(name.to_string()))
    }

    async fn get_link(&self, op: String, message: LinkMessage) -> Result<Option<Link>> {
        let replies = match self
            .exchange(op.clone(), RouteNetlinkMessage::GetLink(message), 0)
            .await
        {
            Ok(replies) => replies,
            // RTM_GETLINK answers ENODEV for a link that does not exist.
            Err(err) if err.is_errno(Errno::ENODEV) => return Ok(None),
            Err(err) => return Err(err),
        };
        match replies.into_iter().next() {
            Some(RouteNetlinkMessage::NewLink(link)) => Ok(Some(Link::from_message(&link))),
            Some(other) => Err(Error::UnexpectedReply {
                op,
                detail: format!("{other:?}"),
            }),
            None => Ok(None),
        }
    }

    /// Deletes the link with index `index`.
    pub async fn delete_link(&self, index: u32) -> Result<()> {
        let mut message = LinkMessage::default();
        message.header.index = index;
        self.ack(
            format!("delete link index {index}"),
            RouteNetlinkMessage::DelLink(message),
            0,
        )
        .await
    }

    /// Sets the link administratively up.
    pub async fn set_link_up(&self, index: u32) -> Result<()> {
        let mut message = LinkMessage::default();
        message.header.index = index;
        message.header.flags = LinkFlags::Up;
        message.header.change_mask = LinkFlags::Up;
        self.ack(
            format!("set link index {index} up"),
            RouteNetlinkMessage::SetLink(message),
            0,
        )
        .await
    }

    /// Sets the link's MTU.
    pub async fn set_mtu(&self, index: u32, mtu: u32) -> Result<()> {
        let mut message = LinkMessage::default();
        message.header.index = index;
        message.attributes.push(LinkAttribute::Mtu(mtu));
        self.ack(
            format!("set MTU {mtu} on link index {index}"),
            RouteNetlinkMessage::SetLink(message),
            0,
        )
        .await
    }
}

impl Link {
    pub(crate) fn from_message(message: &LinkMessage) -> Link {
        let mut link = Link {
            index: message.header.index,
            name: String::new(),
            kind: None,
            mac: None,
            mtu: None,
            up: message.header.flags.contains(LinkFlags::Up),
            vxlan: None,
        };
        for attribute in &message.attributes {
            match attribute {
                LinkAttribute::IfName(name) => link.name = name.clone(),
                LinkAttribute::Address(bytes) => link.mac = MacAddr::try_from(&bytes[..]).ok(),
                LinkAttribute::Mtu(mtu) => link.mtu = Some(*mtu),
                LinkAttribute::LinkInfo(infos) => link.read_link_info(infos),
                _ => {}
            }
        }
        link
    }

    fn read_link_info(&mut self, infos: &[LinkInfo]) {
        for info in infos {
            match info {
                LinkInfo::Kind(kind) => self.kind = Some(kind.to_string()),
                LinkInfo::Data(InfoData::Vxlan(attrs)) => {
                    self.vxlan = Some(VxlanInfo::from_attributes(attrs));
                }
                _ => {}
            }
        }
    }
}

/// Opens a NETLINK_ROUTE socket in `netns` (or here), lets `setup` configure it (bind to
/// multicast groups, receive buffer) while still in that namespace, and hands it to tokio.
pub(crate) fn open_socket<F>(netns: Option<&Path>, purpose: &str, setup: F) -> Result<TokioSocket>
where
    F: FnOnce(&mut Socket) -> io::Result<()> + Send,
{
    let socket_error = |source| Error::Socket {
        context: purpose.to_string(),
        source,
    };
    let socket = netns::run_in(netns, || {
        let mut socket = Socket::new(NETLINK_ROUTE).map_err(socket_error)?;
        setup(&mut socket).map_err(socket_error)?;
        socket.set_non_blocking(true).map_err(socket_error)?;
        Ok(socket)
    })?;
    // SAFETY: the descriptor is a netlink socket this function just opened; ownership moves
    // whole into the TokioSocket and nothing else refers to it.
    Ok(unsafe { TokioSocket::from_raw_fd(socket.into_raw_fd()) })
}
