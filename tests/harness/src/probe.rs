//! Probes beyond the reachability matrix (`reachability.rs`), each from inside a pod's
//! namespace on a thread of its own:
//!
//! - [`udp_from_any`]: a UDP request whose answer may come from any address. Traffic to a
//!   service comes back from the backend's own address: on the userspace datapath OVS's
//!   conntrack is not the host's, so nothing undoes kube-proxy's DNAT on the way back, and a
//!   connected socket (the matrix's) would drop the answer.
//! - [`Connection`]: one long-lived TCP connection to an [`Echo`] server, to see what a change
//!   does to a connection that is already established.
//! - [`UdpStream`]: numbered datagrams from a pod, one every few milliseconds, to a
//!   [`UdpEcho`]: which came back, sent when. Traffic that keeps hitting the datapath flow a
//!   change should have replaced (Open vSwitch's stale-megaflow bug).
//! - [`flood`]: new UDP connections from fresh source ports at a given rate, for as long as
//!   asked (a noisy rule for the audit's meters).
//!
//! And [`Node::dnat`], a stand-in for kube-proxy: a DNAT rule in the node's namespace.

use std::io::{ErrorKind, Read, Write};
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, TcpListener, TcpStream, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::cluster::{ClusterError, Endpoint, Node, Pod};
use crate::netns::Netns;
use crate::reachability::enter_netns;

impl Node {
    /// `iptables -t nat -A PREROUTING -d VIP -p PROTO --dport PORT -j DNAT --to BACKEND:PORT` in
    /// the node's namespace: what kube-proxy does for one service port and one endpoint.
    pub fn dnat(
        &self,
        protocol: &str,
        vip: Ipv4Addr,
        port: u16,
        backend: Ipv4Addr,
    ) -> Result<(), ClusterError> {
        let (vip, port_text) = (format!("{vip}/32"), port.to_string());
        let to = format!("{backend}:{port}");
        self.exec(&[
            "iptables",
            "-t",
            "nat",
            "-A",
            "PREROUTING",
            "-d",
            &vip,
            "-p",
            protocol,
            "--dport",
            &port_text,
            "-j",
            "DNAT",
            "--to-destination",
            &to,
        ])
        .map(drop)
    }
}

/// Sends `probe` over UDP from `from`'s namespace to `to:port`, resending every 250 ms, and
/// returns the first answer from any source within `timeout` (None: no answer).
pub fn udp_from_any(from: &Pod, to: Ipv4Addr, port: u16, timeout: Duration) -> Option<String> {
    let path = from.netns().path();
    std::thread::scope(|scope| {
        scope
            .spawn(move || {
                enter_netns(&path).ok()?;
                let socket = UdpSocket::bind((Ipv4Addr::UNSPECIFIED, 0)).ok()?;
                let deadline = Instant::now() + timeout;
                let mut buf = [0u8; 64];
                while let Some(left) = deadline.checked_duration_since(Instant::now()) {
                    let _ = socket.send_to(b"probe", (to, port));
                    let wait = left
                        .min(Duration::from_millis(250))
                        .max(Duration::from_millis(1));
                    socket.set_read_timeout(Some(wait)).ok()?;
                    if let Ok((n, _)) = socket.recv_from(&mut buf) {
                        return Some(String::from_utf8_lossy(&buf[..n]).into_owned());
                    }
                }
                None
            })
            .join()
            .ok()
            .flatten()
    })
}

/// A TCP server in a pod that echoes every byte of its one connection; stops when the
/// connection ends (or the test process does).
pub struct Echo {
    pub port: u16,
    thread: Option<JoinHandle<()>>,
}

impl Echo {
    pub fn start(pod: &Pod, port: u16) -> Result<Echo, ClusterError> {
        let path = pod.netns().path();
        let (ready_tx, ready_rx) = mpsc::channel();
        let thread = std::thread::spawn(move || {
            let listener =
                enter_netns(&path).and_then(|()| TcpListener::bind((Ipv4Addr::UNSPECIFIED, port)));
            let listener = match listener {
                Ok(listener) => {
                    let _ = ready_tx.send(Ok(()));
                    listener
                }
                Err(e) => {
                    let _ = ready_tx.send(Err(format!("{path}: {e}")));
                    return;
                }
            };
            if let Ok((mut stream, _)) = listener.accept() {
                let mut buf = [0u8; 256];
                while let Ok(n) = stream.read(&mut buf) {
                    if n == 0 || stream.write_all(&buf[..n]).is_err() {
                        break;
                    }
                }
            }
        });
        match ready_rx.recv_timeout(Duration::from_secs(10)) {
            Ok(Ok(())) => Ok(Echo {
                port,
                thread: Some(thread),
            }),
            Ok(Err(e)) => Err(ClusterError::Invalid(format!("echo server: {e}"))),
            Err(_) => Err(ClusterError::Invalid("echo server did not start".into())),
        }
    }
}

impl Drop for Echo {
    fn drop(&mut self) {
        // The server ends with its connection; a test that never connected leaves it waiting
        // in accept, which the process's exit ends.
        if let Some(thread) = self.thread.take() {
            if thread.is_finished() {
                let _ = thread.join();
            }
        }
    }
}

/// One TCP connection from a pod, opened once and then used for round trips: each sends a
/// message and waits for its echo.
pub struct Connection {
    stream: TcpStream,
}

impl Connection {
    /// Connects from `from`'s namespace to `to:port` (the socket keeps its namespace after the
    /// thread that made it ends).
    pub fn open(from: &Pod, to: Ipv4Addr, port: u16) -> Result<Connection, ClusterError> {
        let path = from.netns().path();
        let stream = std::thread::spawn(move || -> std::io::Result<TcpStream> {
            enter_netns(&path)?;
            TcpStream::connect_timeout(&SocketAddr::from((to, port)), Duration::from_secs(5))
        })
        .join()
        .map_err(|_| ClusterError::Invalid("connect thread panicked".into()))?
        .map_err(|e| ClusterError::Invalid(format!("connect to {to}:{port}: {e}")))?;
        Ok(Connection { stream })
    }

    /// Sends `message` and waits up to `timeout` for all of its echo: true when it came back.
    /// A message without its echo stays in flight: TCP resends it, and a later round trip
    /// reads its echo first.
    pub fn round_trip(&mut self, message: &[u8], timeout: Duration) -> std::io::Result<bool> {
        self.stream.write_all(message)?;
        let deadline = Instant::now() + timeout;
        let mut got = Vec::new();
        let mut buf = [0u8; 256];
        while !got.ends_with(message) {
            let Some(left) = deadline.checked_duration_since(Instant::now()) else {
                return Ok(false);
            };
            self.stream
                .set_read_timeout(Some(left.max(Duration::from_millis(1))))?;
            match self.stream.read(&mut buf) {
                Ok(0) => return Err(ErrorKind::UnexpectedEof.into()),
                Ok(n) => got.extend_from_slice(&buf[..n]),
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(true)
    }
}

/// A UDP server in a pod that sends every datagram back to its sender as it came (the
/// matrix's servers answer with the pod's name, which cannot tell one datagram from another).
/// Stopped and joined on drop.
pub struct UdpEcho {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl UdpEcho {
    pub fn start(pod: &Pod, port: u16) -> Result<UdpEcho, ClusterError> {
        let path = pod.netns().path();
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let (ready_tx, ready_rx) = mpsc::channel();
        let thread = std::thread::spawn(move || {
            let socket = enter_netns(&path)
                .and_then(|()| UdpSocket::bind((Ipv4Addr::UNSPECIFIED, port)))
                .and_then(|socket| {
                    socket.set_read_timeout(Some(POLL))?;
                    Ok(socket)
                });
            let socket = match socket {
                Ok(socket) => {
                    let _ = ready_tx.send(Ok(()));
                    socket
                }
                Err(e) => {
                    let _ = ready_tx.send(Err(format!("{path}: {e}")));
                    return;
                }
            };
            let mut buf = [0u8; 64];
            while !flag.load(Ordering::Acquire) {
                if let Ok((n, peer)) = socket.recv_from(&mut buf) {
                    let _ = socket.send_to(&buf[..n], peer);
                }
            }
        });
        let echo = UdpEcho {
            stop,
            thread: Some(thread),
        };
        match ready_rx.recv_timeout(Duration::from_secs(10)) {
            Ok(Ok(())) => Ok(echo),
            Ok(Err(e)) => Err(ClusterError::Invalid(format!("UDP echo server: {e}"))),
            Err(_) => Err(ClusterError::Invalid(
                "UDP echo server did not start".into(),
            )),
        }
    }
}

impl Drop for UdpEcho {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// How often the UDP threads look at their stop flag.
const POLL: Duration = Duration::from_millis(1);

/// What a [`UdpStream`] saw: when each datagram was sent, and whether its echo came back.
#[derive(Debug, Default, Clone)]
pub struct UdpLog {
    sent: Vec<(Instant, bool)>,
}

impl UdpLog {
    /// Datagrams sent at or after `since` whose echo came back.
    pub fn answered_since(&self, since: Instant) -> usize {
        self.sent
            .iter()
            .filter(|(at, answered)| *answered && *at >= since)
            .count()
    }

    /// Datagrams sent at or after `since`.
    pub fn sent_since(&self, since: Instant) -> usize {
        self.sent.iter().filter(|(at, _)| *at >= since).count()
    }

    pub fn answered(&self) -> usize {
        self.sent.iter().filter(|(_, answered)| *answered).count()
    }
}

/// Numbered datagrams from a pod to a [`UdpEcho`] at `to:port`, one every `interval`, all from
/// one socket: one flow, which keeps hitting the same datapath flow. A thread sends, another
/// takes the echoes. Stops on [`UdpStream::stop`] (or drop).
pub struct UdpStream {
    stop: Arc<AtomicBool>,
    log: Arc<Mutex<UdpLog>>,
    threads: Vec<JoinHandle<()>>,
}

impl UdpStream {
    pub fn start(
        from: &Pod,
        to: Ipv4Addr,
        port: u16,
        interval: Duration,
    ) -> Result<UdpStream, ClusterError> {
        let path = from.netns().path();
        let socket = std::thread::spawn(move || -> std::io::Result<UdpSocket> {
            enter_netns(&path)?;
            let socket = UdpSocket::bind((Ipv4Addr::UNSPECIFIED, 0))?;
            socket.connect((to, port))?;
            socket.set_read_timeout(Some(RECEIVE_POLL))?;
            Ok(socket)
        })
        .join()
        .map_err(|_| ClusterError::Invalid("UDP socket thread panicked".into()))?
        .map_err(|e| ClusterError::Invalid(format!("UDP socket to {to}:{port}: {e}")))?;
        let receiver = socket
            .try_clone()
            .map_err(|e| ClusterError::Invalid(format!("UDP socket clone: {e}")))?;
        let stop = Arc::new(AtomicBool::new(false));
        let log = Arc::new(Mutex::new(UdpLog::default()));
        let threads = vec![
            {
                let (stop, log) = (stop.clone(), log.clone());
                std::thread::spawn(move || send_numbered(&socket, interval, &stop, &log))
            },
            {
                let (stop, log) = (stop.clone(), log.clone());
                std::thread::spawn(move || take_echoes(&receiver, &stop, &log))
            },
        ];
        Ok(UdpStream { stop, log, threads })
    }

    /// What it saw so far.
    pub fn log(&self) -> UdpLog {
        self.log.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Stops sending, takes the echoes still coming (until one poll passes without any), and
    /// returns what it saw.
    pub fn stop(mut self) -> UdpLog {
        self.halt();
        self.log()
    }

    fn halt(&mut self) {
        self.stop.store(true, Ordering::Release);
        for thread in self.threads.drain(..) {
            let _ = thread.join();
        }
    }
}

impl Drop for UdpStream {
    fn drop(&mut self) {
        self.halt();
    }
}

/// How often the echo thread looks at its stop flag.
const RECEIVE_POLL: Duration = Duration::from_millis(10);

fn send_numbered(socket: &UdpSocket, interval: Duration, stop: &AtomicBool, log: &Mutex<UdpLog>) {
    while !stop.load(Ordering::Acquire) {
        {
            let mut log = log.lock().unwrap_or_else(|e| e.into_inner());
            let seq = log.sent.len() as u64;
            // The time before the send: a datagram counts as sent after a moment only when it
            // left after it.
            let at = Instant::now();
            if socket.send(&seq.to_be_bytes()).is_ok() {
                log.sent.push((at, false));
            }
        }
        std::thread::sleep(interval);
    }
}

fn take_echoes(socket: &UdpSocket, stop: &AtomicBool, log: &Mutex<UdpLog>) {
    let mut buf = [0u8; 16];
    // The echoes of the last datagrams may come after the sender stopped: taken until a poll
    // after the stop passes without one.
    loop {
        match socket.recv(&mut buf) {
            Ok(8) => {
                let seq = u64::from_be_bytes(buf[..8].try_into().unwrap_or_default());
                let mut log = log.lock().unwrap_or_else(|e| e.into_inner());
                if let Some(entry) = usize::try_from(seq).ok().and_then(|i| log.sent.get_mut(i)) {
                    entry.1 = true;
                }
            }
            Ok(_) => {}
            Err(_) if stop.load(Ordering::Acquire) => return,
            Err(_) => {}
        }
    }
}

/// New UDP connections from inside `netns` to `dst:port`, each from a fresh source port, at
/// about `per_second` for `duration`; returns how many were sent. Blocks: run it on a thread
/// of its own beside the rest of the test (or bench).
pub fn flood(netns: &Netns, dst: Ipv4Addr, port: u16, per_second: u32, duration: Duration) -> u64 {
    netns
        .run_in(|| {
            let gap = Duration::from_secs(1) / per_second.max(1);
            let start = Instant::now();
            let mut sent = 0;
            let mut n: u32 = 0;
            while start.elapsed() < duration {
                if let Ok(socket) = UdpSocket::bind("0.0.0.0:0") {
                    if socket
                        .send_to(b"flood", SocketAddrV4::new(dst, port))
                        .is_ok()
                    {
                        sent += 1;
                    }
                }
                n += 1;
                if let Some(wait) = (start + gap * n).checked_duration_since(Instant::now()) {
                    std::thread::sleep(wait);
                }
            }
            sent
        })
        .expect("flood from the pod's namespace")
}
