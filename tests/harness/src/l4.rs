//! Servers and one-shot probes on TCP, UDP and SCTP ports of a pod, as the network-policy-api
//! conformance suite's agnhost servers and `agnhost connect` probes use them: a TCP probe
//! connects when the handshake completes and the server's name comes back, a UDP probe when
//! its datagram is answered with the name, an SCTP probe when its INIT is answered with an
//! INIT-ACK. A probe that is dropped gets nothing back (no RST, no ICMP): it times out.
//!
//! SCTP is spoken over raw IP sockets (protocol 132) from both ends, because the kernels the
//! tests run on may lack the SCTP module (`CONFIG_IP_SCTP` unset: `socket(…, IPPROTO_SCTP)`
//! fails): the server answers an INIT to one of its ports with an INIT-ACK carrying the
//! client's tag, the way an SCTP stack starts an association; the client checks the answer's
//! ports, tag and chunk type. That is the first exchange of every association, which is all a
//! policy's verdict can depend on. Both sides write correct CRC32c checksums.

use std::io::Write;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, TcpListener, UdpSocket};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::cluster::ClusterError;
use crate::netns::Netns;
use crate::reachability::{enter_netns, tcp_probe, udp_probe};

const IPPROTO_SCTP: libc::c_int = 132;
const CHUNK_INIT: u8 = 1;
const CHUNK_INIT_ACK: u8 = 2;
/// How often a probe resends (UDP datagram, SCTP INIT) within its timeout.
const RESEND: Duration = Duration::from_millis(250);
const POLL_MS: i32 = 50;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum L4 {
    Tcp,
    Udp,
    Sctp,
}

impl L4 {
    /// `TCP`, `UDP`, `SCTP` (as Kubernetes spells them).
    pub fn parse(name: &str) -> Option<L4> {
        match name {
            "TCP" => Some(L4::Tcp),
            "UDP" => Some(L4::Udp),
            "SCTP" => Some(L4::Sctp),
            _ => None,
        }
    }
}

impl std::fmt::Display for L4 {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            L4::Tcp => "TCP",
            L4::Udp => "UDP",
            L4::Sctp => "SCTP",
        })
    }
}

/// The ports one pod serves, per protocol.
#[derive(Debug, Clone, Default)]
pub struct Ports {
    /// The address the servers bind (None: every address). A host-network server binds its
    /// node's address, so that its answers leave from it whatever the route back.
    pub address: Option<Ipv4Addr>,
    pub tcp: Vec<u16>,
    pub udp: Vec<u16>,
    pub sctp: Vec<u16>,
}

/// A pod's servers: one thread in its namespace, stopped and joined on drop.
#[derive(Debug)]
pub struct PortServers {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

struct Sockets {
    tcp: Vec<TcpListener>,
    udp: Vec<UdpSocket>,
    sctp: Option<OwnedFd>,
    sctp_ports: Vec<u16>,
}

impl PortServers {
    /// Serves `ports` inside `netns`, answering with `name`.
    pub fn start(netns: &Netns, name: String, ports: Ports) -> Result<PortServers, ClusterError> {
        let path = netns.path();
        let stop = Arc::new(AtomicBool::new(false));
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let flag = Arc::clone(&stop);
        let thread = std::thread::spawn(move || match bind(&path, &ports) {
            Ok(sockets) => {
                let _ = ready_tx.send(Ok(()));
                serve(&sockets, name.as_bytes(), &flag);
            }
            Err(e) => {
                let _ = ready_tx.send(Err(format!("{path}: {e}")));
            }
        });
        let servers = PortServers {
            stop,
            thread: Some(thread),
        };
        match ready_rx.recv_timeout(Duration::from_secs(10)) {
            Ok(Ok(())) => Ok(servers),
            Ok(Err(e)) => Err(ClusterError::Invalid(format!("pod servers: {e}"))),
            Err(_) => Err(ClusterError::Invalid("pod servers did not start".into())),
        }
    }
}

impl Drop for PortServers {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn raw_sctp_socket() -> std::io::Result<OwnedFd> {
    // SAFETY: socket(2) with constant arguments; the descriptor is owned at once.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_RAW, IPPROTO_SCTP) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: `fd` is a fresh descriptor nobody else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Binds a raw socket to `address`: what it sends leaves from there.
fn bind_raw(socket: &OwnedFd, address: Ipv4Addr) -> std::io::Result<()> {
    let addr = libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: 0,
        sin_addr: libc::in_addr {
            s_addr: u32::from(address).to_be(),
        },
        sin_zero: [0; 8],
    };
    // SAFETY: `addr` is live for the call and its length is given.
    let rc = unsafe {
        libc::bind(
            socket.as_raw_fd(),
            (&addr as *const libc::sockaddr_in).cast(),
            std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t,
        )
    };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

fn bind(netns_path: &str, ports: &Ports) -> std::io::Result<Sockets> {
    enter_netns(netns_path)?;
    let mut sockets = Sockets {
        tcp: Vec::new(),
        udp: Vec::new(),
        sctp: None,
        sctp_ports: ports.sctp.clone(),
    };
    let address = ports.address.unwrap_or(Ipv4Addr::UNSPECIFIED);
    for port in &ports.tcp {
        let tcp = TcpListener::bind((address, *port))?;
        tcp.set_nonblocking(true)?;
        sockets.tcp.push(tcp);
    }
    for port in &ports.udp {
        let udp = UdpSocket::bind((address, *port))?;
        udp.set_nonblocking(true)?;
        sockets.udp.push(udp);
    }
    if !ports.sctp.is_empty() {
        let raw = raw_sctp_socket()?;
        if let Some(address) = ports.address {
            bind_raw(&raw, address)?;
        }
        sockets.sctp = Some(raw);
    }
    Ok(sockets)
}

fn serve(sockets: &Sockets, name: &[u8], stop: &AtomicBool) {
    let mut fds: Vec<RawFd> = sockets
        .tcp
        .iter()
        .map(AsRawFd::as_raw_fd)
        .chain(sockets.udp.iter().map(AsRawFd::as_raw_fd))
        .collect();
    fds.extend(sockets.sctp.as_ref().map(AsRawFd::as_raw_fd));
    let mut polled: Vec<libc::pollfd> = fds
        .iter()
        .map(|fd| libc::pollfd {
            fd: *fd,
            events: libc::POLLIN,
            revents: 0,
        })
        .collect();
    while !stop.load(Ordering::Acquire) {
        // SAFETY: `polled` is a live array of `polled.len()` pollfd structs.
        let ready =
            unsafe { libc::poll(polled.as_mut_ptr(), polled.len() as libc::nfds_t, POLL_MS) };
        if ready <= 0 {
            continue;
        }
        for listener in &sockets.tcp {
            while let Ok((mut stream, _)) = listener.accept() {
                let _ = stream.write_all(name);
            }
        }
        let mut buf = [0u8; 512];
        for socket in &sockets.udp {
            while let Ok((_, peer)) = socket.recv_from(&mut buf) {
                let _ = socket.send_to(name, peer);
            }
        }
        if let Some(raw) = &sockets.sctp {
            answer_inits(raw.as_raw_fd(), &sockets.sctp_ports);
        }
    }
}

/// Answers every INIT waiting on the raw socket whose destination port is served.
fn answer_inits(fd: RawFd, ports: &[u16]) {
    let mut buf = [0u8; 2048];
    while let Some((from, n)) = recv_from(fd, &mut buf, libc::MSG_DONTWAIT) {
        let Some(packet) = sctp_payload(&buf[..n]) else {
            continue;
        };
        let Some(init) = Header::parse(packet) else {
            continue;
        };
        if init.chunk != CHUNK_INIT || !ports.contains(&init.dst) || packet.len() < 20 {
            continue;
        }
        let their_tag = u32::from_be_bytes([packet[16], packet[17], packet[18], packet[19]]);
        let reply = init_packet(
            CHUNK_INIT_ACK,
            init.dst,
            init.src,
            their_tag,
            their_tag ^ 0x5a5a_5a5a,
        );
        send_to(fd, &reply, from);
    }
}

fn recv_from(fd: RawFd, buf: &mut [u8], flags: libc::c_int) -> Option<(Ipv4Addr, usize)> {
    // SAFETY: sockaddr_in is plain data; all zeroes is a valid value.
    let mut addr: libc::sockaddr_in = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
    // SAFETY: `buf` and `addr` are live for the call and their lengths are given.
    let n = unsafe {
        libc::recvfrom(
            fd,
            buf.as_mut_ptr().cast(),
            buf.len(),
            flags,
            (&mut addr as *mut libc::sockaddr_in).cast(),
            &mut len,
        )
    };
    (n > 0).then(|| {
        (
            Ipv4Addr::from(u32::from_be(addr.sin_addr.s_addr)),
            n as usize,
        )
    })
}

fn send_to(fd: RawFd, packet: &[u8], to: Ipv4Addr) {
    let addr = libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: 0,
        sin_addr: libc::in_addr {
            s_addr: u32::from(to).to_be(),
        },
        sin_zero: [0; 8],
    };
    // SAFETY: `packet` and `addr` are live for the call and their lengths are given.
    unsafe {
        libc::sendto(
            fd,
            packet.as_ptr().cast(),
            packet.len(),
            0,
            (&addr as *const libc::sockaddr_in).cast(),
            std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t,
        );
    }
}

/// The SCTP packet inside a raw socket's IPv4 datagram.
fn sctp_payload(datagram: &[u8]) -> Option<&[u8]> {
    let ihl = usize::from(*datagram.first()? & 0x0f) * 4;
    (datagram.len() >= ihl + 16 && datagram.get(9) == Some(&132)).then(|| &datagram[ihl..])
}

/// What a probe and a server read of an SCTP packet: ports, verification tag, first chunk.
struct Header {
    src: u16,
    dst: u16,
    tag: u32,
    chunk: u8,
}

impl Header {
    fn parse(packet: &[u8]) -> Option<Header> {
        (packet.len() >= 16).then(|| Header {
            src: u16::from_be_bytes([packet[0], packet[1]]),
            dst: u16::from_be_bytes([packet[2], packet[3]]),
            tag: u32::from_be_bytes([packet[4], packet[5], packet[6], packet[7]]),
            chunk: packet[12],
        })
    }
}

/// An INIT (`header_tag` 0) or INIT-ACK (`header_tag` = the peer's initiate tag) from `src`
/// to `dst` with initiate tag `tag`; an INIT-ACK carries a state cookie, as it must.
fn init_packet(chunk: u8, src: u16, dst: u16, header_tag: u32, tag: u32) -> Vec<u8> {
    let mut p = Vec::with_capacity(40);
    p.extend(src.to_be_bytes());
    p.extend(dst.to_be_bytes());
    p.extend(header_tag.to_be_bytes());
    p.extend([0u8; 4]);
    let cookie: &[u8] = if chunk == CHUNK_INIT_ACK {
        &[0, 7, 0, 8, 0xc0, 0x0c, 0x1e, 0x00]
    } else {
        &[]
    };
    let length = 20 + cookie.len() as u16;
    p.extend([chunk, 0]);
    p.extend(length.to_be_bytes());
    p.extend(tag.to_be_bytes());
    p.extend(65_535u32.to_be_bytes()); // a_rwnd
    p.extend(1u16.to_be_bytes()); // outbound streams
    p.extend(1u16.to_be_bytes()); // inbound streams
    p.extend(tag.wrapping_add(1).to_be_bytes()); // initial TSN
    p.extend(cookie);
    let crc = crc32c(&p);
    p[8..12].copy_from_slice(&crc.to_le_bytes());
    p
}

/// CRC32c (Castagnoli), as SCTP checksums are (RFC 9260 appendix A).
fn crc32c(data: &[u8]) -> u32 {
    let mut crc = !0u32;
    for byte in data {
        crc ^= u32::from(*byte);
        for _ in 0..8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ 0x82f6_3b78
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

/// One probe from the namespace at `netns_path` to `to:port` over `protocol`: true when it
/// connected within `timeout` (the server `expect` named itself, for TCP and UDP). Runs on a
/// thread of its own (it enters the namespace).
pub fn probe(
    netns_path: &str,
    to: Ipv4Addr,
    protocol: L4,
    port: u16,
    expect: &str,
    timeout: Duration,
) -> bool {
    let (path, expect) = (netns_path.to_string(), expect.to_string());
    std::thread::spawn(move || {
        if enter_netns(&path).is_err() {
            return false;
        }
        let addr = SocketAddr::V4(SocketAddrV4::new(to, port));
        match protocol {
            L4::Tcp => tcp_probe(addr, timeout).is_ok_and(|name| name == expect),
            L4::Udp => udp_probe(addr, timeout).is_ok_and(|name| name == expect),
            L4::Sctp => sctp(to, port, timeout).unwrap_or(false),
        }
    })
    .join()
    .unwrap_or(false)
}

/// Sends INITs from a fresh port until an INIT-ACK for them comes back or `timeout` passes.
fn sctp(to: Ipv4Addr, port: u16, timeout: Duration) -> std::io::Result<bool> {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let local_port = 40_000 + (std::process::id().wrapping_mul(31).wrapping_add(n) % 20_000) as u16;
    let tag = 0x1000_0000 | (std::process::id() << 8) ^ n.wrapping_mul(2_654_435_761);
    let socket = raw_sctp_socket()?;
    let fd = socket.as_raw_fd();
    let init = init_packet(CHUNK_INIT, local_port, port, 0, tag);
    let deadline = Instant::now() + timeout;
    let mut next_send = Instant::now();
    let mut buf = [0u8; 2048];
    loop {
        let now = Instant::now();
        if now >= deadline {
            return Ok(false);
        }
        if now >= next_send {
            send_to(fd, &init, to);
            next_send = now + RESEND;
        }
        let wait = (deadline.min(next_send) - now).as_millis().max(1) as i32;
        let mut polled = libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one live pollfd.
        if unsafe { libc::poll(&mut polled, 1, wait) } <= 0 {
            continue;
        }
        while let Some((from, len)) = recv_from(fd, &mut buf, libc::MSG_DONTWAIT) {
            let answered = from == to
                && sctp_payload(&buf[..len])
                    .and_then(Header::parse)
                    .is_some_and(|h| {
                        h.chunk == CHUNK_INIT_ACK
                            && h.src == port
                            && h.dst == local_port
                            && h.tag == tag
                    });
            if answered {
                return Ok(true);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc32c_is_castagnolis() {
        // RFC 3720's test vector: 32 bytes of zeroes.
        assert_eq!(crc32c(&[0u8; 32]), 0x8a91_36aa);
        assert_eq!(crc32c(b"123456789"), 0xe306_9283);
    }

    #[test]
    fn an_init_ack_answers_its_init() {
        let init = init_packet(CHUNK_INIT, 40_001, 9003, 0, 0xabcd);
        let h = Header::parse(&init).unwrap();
        assert_eq!(
            (h.src, h.dst, h.tag, h.chunk),
            (40_001, 9003, 0, CHUNK_INIT)
        );
        let ack = init_packet(CHUNK_INIT_ACK, 9003, 40_001, 0xabcd, 7);
        let h = Header::parse(&ack).unwrap();
        assert_eq!(
            (h.src, h.dst, h.tag, h.chunk),
            (9003, 40_001, 0xabcd, CHUNK_INIT_ACK)
        );
    }
}
