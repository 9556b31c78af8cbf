//! Pods, external hosts, and the traffic tests send between them: pings (`ping` run inside the
//! namespace) and TCP transfers (threads that enter the namespaces with `setns`).

use std::fs::File;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Ipv4Addr, Shutdown, SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::process::{Child, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::{ClusterError, Context, Node, CLUSTER_NETWORK, POD_MTU, SUBNET_PREFIX};
use crate::netns::Netns;

/// Something with an address inside its own namespace: a pod or an external host.
pub trait Endpoint: Sync {
    fn netns(&self) -> &Netns;
    fn ip(&self) -> Ipv4Addr;

    /// Sends `count` echo requests to `dst`, 200 ms apart, each waiting up to 1 s for its reply.
    fn ping(&self, dst: Ipv4Addr, count: u32) -> Result<PingStats, ClusterError> {
        let dst = dst.to_string();
        let count = count.to_string();
        let argv = [
            "ping", "-n", "-q", "-c", &count, "-i", "0.2", "-W", "1", &dst,
        ];
        let out = crate::process::run(self.netns().command("ping").args(&argv[1..]))
            .context(|| format!("{}: {}", self.netns().name(), argv.join(" ")))?;
        let stdout = String::from_utf8_lossy(&out.stdout);
        PingStats::parse(&stdout).ok_or_else(|| {
            ClusterError::Invalid(format!(
                "{}: {} printed no statistics: {stdout}{}",
                self.netns().name(),
                argv.join(" "),
                String::from_utf8_lossy(&out.stderr)
            ))
        })
    }

    /// True when at least one of three echo requests to `dst` is answered.
    fn reaches(&self, dst: Ipv4Addr) -> Result<bool, ClusterError> {
        Ok(self.ping(dst, 3)?.received > 0)
    }

    /// Starts a continuous ping of `dst` every 50 ms; replies are collected as they arrive.
    fn start_pinger(&self, dst: Ipv4Addr) -> Result<Pinger, ClusterError> {
        self.start_pinger_every(dst, Duration::from_millis(50))
    }

    /// [`Endpoint::start_pinger`] with another interval (below 0.2 s needs root, which the
    /// harness has).
    fn start_pinger_every(
        &self,
        dst: Ipv4Addr,
        interval: Duration,
    ) -> Result<Pinger, ClusterError> {
        let interval = format!("{:.3}", interval.as_secs_f64());
        let mut child = self
            .netns()
            .command("ping")
            .args(["-n", "-D", "-i", &interval, "-W", "1", &dst.to_string()])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| ClusterError::Invalid(format!("start ping {dst}: {e}")))?;
        // A pidfile in the namespace's state directory lets `reap_stale` end this pinger if the
        // test process is killed before the guard runs (it would keep the namespace alive).
        let pidfile = crate::process::state_dir_for(self.netns().name())
            .join(format!("ping-{}.pid", child.id()));
        let _ = std::fs::write(pidfile, child.id().to_string());
        let replies = Arc::new(Mutex::new(Vec::new()));
        // ping flushes each line; read them as they come (this also keeps the pipe from filling).
        let stdout = child.stdout.take();
        let collected = Arc::clone(&replies);
        let reader = std::thread::spawn(move || {
            let Some(stdout) = stdout else { return };
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { return };
                if let Some(reply) = parse_reply(&line) {
                    if let Ok(mut replies) = collected.lock() {
                        replies.push(reply);
                    }
                }
            }
        });
        Ok(Pinger {
            child: Some(child),
            reader: Some(reader),
            replies,
        })
    }
}

/// Pings every `(from, to)` pair at once (3 echo requests each) and returns, in order, whether
/// any reply came back.
pub fn reachability(pairs: &[(&dyn Endpoint, Ipv4Addr)]) -> Vec<Result<bool, ClusterError>> {
    std::thread::scope(|scope| {
        let probes: Vec<_> = pairs
            .iter()
            .map(|(from, to)| scope.spawn(move || from.reaches(*to)))
            .collect();
        probes
            .into_iter()
            .map(|probe| {
                probe
                    .join()
                    .unwrap_or_else(|_| Err(ClusterError::Invalid("ping thread panicked".into())))
            })
            .collect()
    })
}

/// What `ping` reported.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PingStats {
    pub transmitted: u32,
    pub received: u32,
}

impl PingStats {
    /// Parses "3 packets transmitted, 2 received, ...".
    fn parse(text: &str) -> Option<PingStats> {
        let line = text.lines().find(|l| l.contains("packets transmitted"))?;
        let mut parts = line.split(", ");
        let number = |part: Option<&str>| part?.split_whitespace().next()?.parse().ok();
        Some(PingStats {
            transmitted: number(parts.next())?,
            received: number(parts.next())?,
        })
    }
}

/// A pod: a namespace whose `eth0` is a veth to its node, attached to br0.
#[derive(Debug)]
pub struct Pod {
    pub node: usize,
    pub ip: Ipv4Addr,
    pub mac: String,
    /// The veth end in the node's namespace (the br0 port).
    pub host_veth: String,
    /// The sandbox id given to `ofnode pod add` (64 hex digits).
    pub sandbox: String,
    pub vnid: u32,
    pub ofport: u32,
    /// The pod's Kubernetes namespace and name: its key `NAMESPACE/NAME` in every ofnode pod
    /// command. [`DEFAULT_NAMESPACE`] and `pod-<node>-<n>` unless the test names it.
    pub namespace: String,
    pub name: String,
    /// Its labels, given to `ofnode pod add` (the networkpolicy mode's selectors see them; the
    /// other modes refuse them).
    pub labels: Vec<(String, String)>,
    netns: Netns,
}

/// The namespace of pods a test does not place in one.
pub const DEFAULT_NAMESPACE: &str = "default";

impl Pod {
    /// Creates the namespace and its veth, addressed and routed; not yet attached to br0.
    pub(super) fn create(node: &Node, number: u8, vnid: u32) -> Result<Pod, ClusterError> {
        let ip = Ipv4Addr::from(u32::from(node.subnet) + 10 + u32::from(number));
        let [a, b, c, d] = ip.octets();
        let mac = format!("0a:58:{a:02x}:{b:02x}:{c:02x}:{d:02x}");
        let netns = Netns::new("p").context(|| format!("node {}: pod namespace", node.index))?;
        let pod = Pod {
            node: node.index,
            ip,
            mac,
            host_veth: format!("veth{number}"),
            sandbox: format!("{:032x}{:032x}", node.index + 1, u32::from(number) + 1),
            vnid,
            ofport: 0,
            namespace: DEFAULT_NAMESPACE.to_string(),
            name: format!("pod-{}-{number}", node.index),
            labels: Vec::new(),
            netns,
        };
        let mtu = POD_MTU.to_string();
        node.exec(&[
            "ip",
            "link",
            "add",
            &pod.host_veth,
            "mtu",
            &mtu,
            "type",
            "veth",
            "peer",
            "name",
            "eth0",
            "address",
            &pod.mac,
            "mtu",
            &mtu,
            "netns",
            pod.netns.name(),
        ])?;
        node.exec(&["ip", "link", "set", &pod.host_veth, "up"])?;
        // On the userspace datapath the node's kernel sees the pod's frames too: without this
        // it answers the pod's ARP for the gateway from the veth, with the veth's MAC, and then
        // routes the pod's off-subnet traffic itself, around br0 (a kernel-datapath node
        // never sees them). Only tun0, through br0, answers for the gateway.
        node.exec(&[
            "sysctl",
            "-qw",
            &format!("net.ipv4.conf.{}.arp_ignore=1", pod.host_veth),
        ])?;
        let address = format!("{ip}/{SUBNET_PREFIX}");
        let gateway = node.gateway.to_string();
        for argv in [
            &["ip", "addr", "add", &address, "dev", "eth0"][..],
            &["ip", "link", "set", "eth0", "up"],
            &["ip", "route", "add", "default", "via", &gateway],
            &["ip", "route", "add", CLUSTER_NETWORK, "dev", "eth0"],
            // The userspace datapath forwards what the pod hands it as is: TCP needs real
            // checksums, not offloaded ones.
            &["ethtool", "-K", "eth0", "tx", "off"],
        ] {
            pod.netns
                .exec_ok(argv)
                .context(|| format!("pod {ip}: {}", argv.join(" ")))?;
        }
        Ok(pod)
    }

    /// `NAMESPACE/NAME`: the pod's key in ofnode.
    pub fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }
}

impl Pod {
    /// A pod whose interface something else made (a CNI plugin) in `netns`.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn made_by_cni(
        node: usize,
        ip: Ipv4Addr,
        mac: String,
        host_veth: String,
        sandbox: String,
        vnid: u32,
        ofport: u32,
        (namespace, name): (&str, &str),
        labels: Vec<(String, String)>,
        netns: Netns,
    ) -> Pod {
        Pod {
            node,
            ip,
            mac,
            host_veth,
            sandbox,
            vnid,
            ofport,
            namespace: namespace.to_string(),
            name: name.to_string(),
            labels,
            netns,
        }
    }
}

impl Endpoint for Pod {
    fn netns(&self) -> &Netns {
        &self.netns
    }
    fn ip(&self) -> Ipv4Addr {
        self.ip
    }
}

/// A host outside the cluster behind a node: its own namespace joined to the node's namespace by
/// a veth, default route via the node. Pods on that node reach it through tun0.
#[derive(Debug)]
pub struct ExternalHost {
    pub node: usize,
    pub ip: Ipv4Addr,
    netns: Netns,
}

const EXTERNAL_LINK: &str = "ext0";

impl ExternalHost {
    pub(super) fn create(node: &Node) -> Result<ExternalHost, ClusterError> {
        let base = u8::try_from(4 * node.index)
            .map_err(|_| ClusterError::Invalid(format!("node {}", node.index)))?;
        let node_side = Ipv4Addr::new(198, 51, 100, base + 1);
        let ip = Ipv4Addr::new(198, 51, 100, base + 2);
        let netns =
            Netns::new("x").context(|| format!("node {}: external namespace", node.index))?;
        node.exec(&[
            "ip",
            "link",
            "add",
            EXTERNAL_LINK,
            "type",
            "veth",
            "peer",
            "name",
            "eth0",
            "netns",
            netns.name(),
        ])?;
        node.exec(&[
            "ip",
            "addr",
            "add",
            &format!("{node_side}/30"),
            "dev",
            EXTERNAL_LINK,
        ])?;
        node.exec(&["ip", "link", "set", EXTERNAL_LINK, "up"])?;
        let address = format!("{ip}/30");
        let via = node_side.to_string();
        for argv in [
            &["ip", "addr", "add", &address, "dev", "eth0"][..],
            &["ip", "link", "set", "eth0", "up"],
            &["ip", "route", "add", "default", "via", &via],
        ] {
            netns
                .exec_ok(argv)
                .context(|| format!("external host {ip}: {}", argv.join(" ")))?;
        }
        Ok(ExternalHost {
            node: node.index,
            ip,
            netns,
        })
    }
}

impl Endpoint for ExternalHost {
    fn netns(&self) -> &Netns {
        &self.netns
    }
    fn ip(&self) -> Ipv4Addr {
        self.ip
    }
}

/// One echo reply: its sequence number and when it arrived (seconds since the Unix epoch, as
/// `ping -D` prints it).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Reply {
    pub seq: u32,
    pub at: f64,
}

/// A running `ping -D` in a namespace; killed on drop.
#[derive(Debug)]
pub struct Pinger {
    child: Option<Child>,
    reader: Option<std::thread::JoinHandle<()>>,
    replies: Arc<Mutex<Vec<Reply>>>,
}

impl Pinger {
    /// The PID of `ping` while it runs (`ip netns exec` execs it, so the child is ping itself).
    pub fn pid(&self) -> Option<u32> {
        self.child
            .as_ref()
            .map(Child::id)
            .filter(|pid| crate::process::pid_alive(*pid))
    }

    /// The replies seen so far.
    pub fn replies(&self) -> Vec<Reply> {
        self.replies.lock().map(|r| r.clone()).unwrap_or_default()
    }

    /// Waits up to `timeout` for a reply that arrived after `after` (Unix seconds).
    pub fn wait_reply_after(&self, after: f64, timeout: Duration) -> Option<Reply> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(reply) = self.replies().into_iter().find(|r| r.at > after) {
                return Some(reply);
            }
            if Instant::now() >= deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Echo requests lost in the window `(from, to]` (Unix seconds): of the requests between
    /// the first and the last answered one in the window (ping numbers them), those never
    /// answered. Start the window before and end it after the event, so that losses are inside.
    pub fn loss_between(&self, from: f64, to: f64) -> Loss {
        let mut seqs: Vec<u32> = self
            .replies()
            .iter()
            .filter(|r| r.at > from && r.at <= to)
            .map(|r| r.seq)
            .collect();
        seqs.sort_unstable();
        seqs.dedup();
        let (Some(first), Some(last)) = (seqs.first(), seqs.last()) else {
            return Loss { sent: 0, lost: 0 };
        };
        // icmp_seq wraps at 65536; a window of minutes at 100/s stays well inside one turn.
        let sent = last - first + 1;
        Loss {
            sent,
            lost: sent - seqs.len() as u32,
        }
    }

    /// Stops ping and returns every reply it saw.
    pub fn finish(mut self) -> Vec<Reply> {
        self.stop();
        self.replies()
    }

    fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        if let Some(reader) = self.reader.take() {
            let _ = reader.join();
        }
    }
}

/// Echo requests sent in a window and how many of them got no reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Loss {
    pub sent: u32,
    pub lost: u32,
}

/// Parses "[1733140000.123456] 64 bytes from 10.128.2.10: icmp_seq=5 ttl=64 time=0.9 ms".
fn parse_reply(line: &str) -> Option<Reply> {
    let rest = line.strip_prefix('[')?;
    let (at, rest) = rest.split_once(']')?;
    if !rest.contains("bytes from") {
        return None;
    }
    let seq = rest
        .split_whitespace()
        .find_map(|word| word.strip_prefix("icmp_seq="))?
        .parse()
        .ok()?;
    Some(Reply {
        seq,
        at: at.parse().ok()?,
    })
}

impl Drop for Pinger {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Now, in seconds since the Unix epoch, comparable with [`Reply::at`].
pub fn unix_now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

/// The outcome of a TCP transfer: what the sender wrote and what the receiver read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Transfer {
    pub bytes_sent: u64,
    pub sent_crc32: u32,
    pub bytes_received: u64,
    pub received_crc32: u32,
}

const TRANSFER_PORT: u16 = 5201;
const TRANSFER_TIMEOUT: Duration = Duration::from_secs(20);
const CHUNK: usize = 64 * 1024;

/// Sends `bytes` of pseudo-random data over TCP from `from` to `to`, each side a thread inside
/// the endpoint's namespace, and returns both sides' byte counts and CRC-32s.
pub fn tcp_transfer(
    from: &dyn Endpoint,
    to: &dyn Endpoint,
    bytes: u64,
) -> Result<Transfer, ClusterError> {
    let listen = SocketAddr::from((to.ip(), TRANSFER_PORT));
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let receiver = in_netns(to.netns(), move || {
        let listener = TcpListener::bind(listen)?;
        let _ = ready_tx.send(());
        receive_all(listener)
    });
    if ready_rx.recv_timeout(TRANSFER_TIMEOUT).is_err() {
        return Err(transfer_error("receiver", join(receiver).err()));
    }
    let sender = in_netns(from.netns(), move || send_all(listen, bytes));
    let sent = join(sender).map_err(|e| transfer_error("sender", Some(e)))?;
    let received = join(receiver).map_err(|e| transfer_error("receiver", Some(e)))?;
    Ok(Transfer {
        bytes_sent: sent.0,
        sent_crc32: sent.1,
        bytes_received: received.0,
        received_crc32: received.1,
    })
}

fn transfer_error(side: &str, error: Option<std::io::Error>) -> ClusterError {
    ClusterError::Invalid(format!(
        "TCP transfer {side}: {}",
        error.map_or_else(|| "did not start".to_string(), |e| e.to_string())
    ))
}

fn receive_all(listener: TcpListener) -> std::io::Result<(u64, u32)> {
    listener.set_nonblocking(true)?;
    let deadline = Instant::now() + TRANSFER_TIMEOUT;
    let mut stream = loop {
        match listener.accept() {
            Ok((stream, _)) => break stream,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock && Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(10));
            }
            Err(e) => return Err(e),
        }
    };
    stream.set_nonblocking(false)?;
    stream.set_read_timeout(Some(TRANSFER_TIMEOUT))?;
    let mut hasher = crc32fast::Hasher::new();
    let mut total = 0u64;
    let mut buf = vec![0u8; CHUNK];
    loop {
        let n = stream.read(&mut buf)?;
        if n == 0 {
            return Ok((total, hasher.finalize()));
        }
        hasher.update(&buf[..n]);
        total += n as u64;
    }
}

fn send_all(to: SocketAddr, bytes: u64) -> std::io::Result<(u64, u32)> {
    let mut stream = TcpStream::connect_timeout(&to, TRANSFER_TIMEOUT)?;
    stream.set_write_timeout(Some(TRANSFER_TIMEOUT))?;
    let mut hasher = crc32fast::Hasher::new();
    let mut data = PseudoRandom(0x9e37_79b9_7f4a_7c15);
    let mut buf = vec![0u8; CHUNK];
    let mut left = bytes;
    while left > 0 {
        let n = usize::try_from(left).map_or(CHUNK, |left| left.min(CHUNK));
        data.fill(&mut buf[..n]);
        stream.write_all(&buf[..n])?;
        hasher.update(&buf[..n]);
        left -= n as u64;
    }
    stream.shutdown(Shutdown::Write)?;
    // Wait for the receiver to close, so every byte was read before we report.
    let mut rest = [0u8; 16];
    while stream.read(&mut rest)? > 0 {}
    Ok((bytes, hasher.finalize()))
}

/// xorshift64: bytes with no pattern a lost or repeated segment could hide in.
struct PseudoRandom(u64);

impl PseudoRandom {
    fn fill(&mut self, buf: &mut [u8]) {
        for chunk in buf.chunks_mut(8) {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            chunk.copy_from_slice(&self.0.to_le_bytes()[..chunk.len()]);
        }
    }
}

/// Runs `work` on a thread that has entered `netns` (setns affects only the calling thread).
fn in_netns<T: Send + 'static>(
    netns: &Netns,
    work: impl FnOnce() -> std::io::Result<T> + Send + 'static,
) -> std::thread::JoinHandle<std::io::Result<T>> {
    let path = netns.path();
    std::thread::spawn(move || {
        let handle = File::open(&path)?;
        // SAFETY: setns(2) takes a valid open descriptor (`handle` lives across the call) and
        // changes only this thread's network namespace.
        if unsafe { libc::setns(handle.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        work()
    })
}

fn join<T>(handle: std::thread::JoinHandle<std::io::Result<T>>) -> std::io::Result<T> {
    handle
        .join()
        .unwrap_or_else(|_| Err(std::io::Error::other("thread panicked")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_ping_statistics() {
        let text = "--- 10.128.2.10 ping statistics ---\n3 packets transmitted, 2 received, 33.3333% packet loss, time 402ms\n";
        assert_eq!(
            PingStats::parse(text),
            Some(PingStats {
                transmitted: 3,
                received: 2
            })
        );
        let errors = "2 packets transmitted, 0 received, +2 errors, 100% packet loss, time 1001ms";
        assert_eq!(
            PingStats::parse(errors),
            Some(PingStats {
                transmitted: 2,
                received: 0
            })
        );
        assert_eq!(PingStats::parse("connect: Network is unreachable"), None);
    }

    #[test]
    fn parses_timestamped_replies_only() {
        let reply = "[1733140000.123456] 64 bytes from 10.128.2.10: icmp_seq=5 ttl=64 time=0.9 ms";
        assert_eq!(
            parse_reply(reply),
            Some(Reply {
                seq: 5,
                at: 1733140000.123456
            })
        );
        assert_eq!(
            parse_reply("[1733140000.2] no answer yet for icmp_seq=6"),
            None
        );
        assert_eq!(
            parse_reply("PING 10.128.2.10 (10.128.2.10) 56(84) bytes of data."),
            None
        );
    }
}
