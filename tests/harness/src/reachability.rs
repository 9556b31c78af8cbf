//! A reachability matrix in the Kubernetes NetworkPolicy e2e design (upstream
//! `test/e2e/network/netpol`): namespaces x, y, z with pods a, b, c in each, spread over the
//! cluster's nodes; every pod serves TCP and UDP on ports 80 and 81; every ordered pod pair is
//! probed (81 probes per port and protocol, all at once), compared with an expected table, and on
//! a mismatch the expected, observed and comparison tables are printed in upstream's format
//! (`.` connected, `X` blocked; in the comparison `.` agrees, `X` differs).
//!
//! The servers are threads of the test process inside each pod's namespace (no helper binary):
//! a TCP connection gets the server pod's name (`x/a`) and is closed, a UDP datagram is echoed
//! with the name. A probe counts as connected only when that name comes back, so a UDP probe
//! needs the reply, and a TCP probe needs the connection and its data both ways.
//!
//! Labels are upstream's: namespace `ns=<name>` (plus the implicit
//! `kubernetes.io/metadata.name=<name>`), pod `pod=<name>`.

use std::fmt::Write as _;
use std::fs::File;
use std::io::{ErrorKind, Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::os::fd::{AsRawFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::cluster::{labels, Cluster, ClusterError, Endpoint, Mode, Pod};
use crate::netns::Netns;

pub const NAMESPACES: [&str; 3] = ["x", "y", "z"];
pub const POD_NAMES: [&str; 3] = ["a", "b", "c"];
pub const PORTS: [u16; 2] = [80, 81];
/// How long one probe waits for its answer; a denied probe costs this much.
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(1);
/// How often a UDP probe resends its request within [`PROBE_TIMEOUT`].
const UDP_RESEND: Duration = Duration::from_millis(250);
/// How often a server thread looks at its stop flag.
const SERVER_POLL_MS: i32 = 50;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Protocol {
    Tcp,
    Udp,
}

/// One kind of probe: a protocol and a destination port.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Probe {
    pub protocol: Protocol,
    pub port: u16,
}

impl Probe {
    pub const TCP80: Probe = Probe::new(Protocol::Tcp, 80);
    pub const TCP81: Probe = Probe::new(Protocol::Tcp, 81);
    pub const UDP80: Probe = Probe::new(Protocol::Udp, 80);
    pub const UDP81: Probe = Probe::new(Protocol::Udp, 81);
    /// Every protocol on every port the servers listen on.
    pub const ALL: [Probe; 4] = [Probe::TCP80, Probe::TCP81, Probe::UDP80, Probe::UDP81];

    pub const fn new(protocol: Protocol, port: u16) -> Probe {
        Probe { protocol, port }
    }
}

impl std::fmt::Display for Probe {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let protocol = match self.protocol {
            Protocol::Tcp => "tcp",
            Protocol::Udp => "udp",
        };
        write!(f, "{protocol}/{}", self.port)
    }
}

/// One pod of the model.
#[derive(Debug)]
pub struct ModelPod {
    pub namespace: &'static str,
    pub name: &'static str,
    pub pod: Pod,
}

impl ModelPod {
    /// `x/a`.
    pub fn id(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }

    pub fn ip(&self) -> Ipv4Addr {
        self.pod.ip
    }

    pub fn node(&self) -> usize {
        self.pod.node
    }
}

/// The nine pods and their servers. Servers stop before the pods' namespaces go (field order).
#[derive(Debug)]
pub struct Model {
    servers: Vec<Servers>,
    pub pods: Vec<ModelPod>,
}

impl Model {
    /// Creates x, y, z × a, b, c, pod `i` (in that order) on node `i % nodes`, and starts their
    /// servers. Pod `a` of namespace `x` is pod `x/a` to ofnode, and namespace `ns` is tenant
    /// `vnid(ns)`. In networkpolicy mode the namespaces (with their labels) are set on every
    /// node first, the pods carry their labels, and every node is told about the other nodes'
    /// pods.
    pub fn create(cluster: &Cluster, vnid: impl Fn(&str) -> u32) -> Result<Model, ClusterError> {
        let netpol = cluster.mode == Mode::NetworkPolicy;
        if netpol {
            for namespace in NAMESPACES {
                cluster.namespace_set(namespace, vnid(namespace), &labels(&[("ns", namespace)]))?;
            }
        }
        let mut pods = Vec::new();
        for (index, (namespace, name)) in NAMESPACES
            .iter()
            .flat_map(|ns| POD_NAMES.iter().map(move |name| (*ns, *name)))
            .enumerate()
        {
            let node = index % cluster.nodes().len();
            let pod_labels = if netpol {
                labels(&[("pod", name)])
            } else {
                Vec::new()
            };
            let pod =
                cluster.add_named_pod(node, (namespace, name), vnid(namespace), &pod_labels)?;
            pods.push(ModelPod {
                namespace,
                name,
                pod,
            });
        }
        if netpol {
            for pod in &pods {
                cluster.announce_remote_pod(&pod.pod)?;
            }
        }
        let servers = pods
            .iter()
            .map(|pod| Servers::start(pod.pod.netns(), pod.id()))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Model { servers, pods })
    }

    /// The same model on a cluster that follows its API server: namespace `ns` (label
    /// `ns=<name>`) and its NetNamespace with VNID `vnid(ns)` created through the API, each pod
    /// run as a kubelet runs it (its Pod object with label `pod=<name>`, `ofnode-cni ADD`, its
    /// status IP). Nothing is told to any node directly.
    pub fn create_following_kube(
        cluster: &Cluster,
        vnid: impl Fn(&str) -> u32,
    ) -> Result<Model, ClusterError> {
        for namespace in NAMESPACES {
            cluster.create_kube_namespace(namespace, vnid(namespace), &[("ns", namespace)])?;
        }
        let mut pods = Vec::new();
        for (index, (namespace, name)) in NAMESPACES
            .iter()
            .flat_map(|ns| POD_NAMES.iter().map(move |name| (*ns, *name)))
            .enumerate()
        {
            let node = index % cluster.nodes().len();
            let object = crate::kube::PodObject::new(namespace, name, "").label("pod", name);
            let pod = cluster.start_kube_pod(node, object)?.pod;
            pods.push(ModelPod {
                namespace,
                name,
                pod,
            });
        }
        let servers = pods
            .iter()
            .map(|pod| Servers::start(pod.pod.netns(), pod.id()))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Model { servers, pods })
    }

    /// The pod `x/a`.
    pub fn pod(&self, id: &str) -> &ModelPod {
        self.pods
            .iter()
            .find(|pod| pod.id() == id)
            .unwrap_or_else(|| panic!("the model has no pod {id}"))
    }

    pub fn pod_mut(&mut self, id: &str) -> &mut ModelPod {
        self.pods
            .iter_mut()
            .find(|pod| pod.id() == id)
            .unwrap_or_else(|| panic!("the model has no pod {id}"))
    }

    /// Probes every ordered pair once for each of `probes`, all in parallel, each waiting up to
    /// `timeout`.
    pub fn observe(&self, probes: &[Probe], timeout: Duration) -> Vec<Reachability> {
        let targets: Vec<(Ipv4Addr, String)> =
            self.pods.iter().map(|pod| (pod.ip(), pod.id())).collect();
        let targets = &targets;
        std::thread::scope(|scope| {
            let handles: Vec<Vec<_>> = probes
                .iter()
                .map(|probe| {
                    self.pods
                        .iter()
                        .flat_map(|from| {
                            let path = from.pod.netns().path();
                            targets.iter().map(move |(ip, id)| {
                                let path = path.clone();
                                scope.spawn(move || probe_once(&path, *ip, id, *probe, timeout))
                            })
                        })
                        .collect()
                })
                .collect();
            handles
                .into_iter()
                .map(|row| Reachability {
                    ids: self.ids(),
                    connected: row.into_iter().map(|h| h.join().unwrap_or(false)).collect(),
                })
                .collect()
        })
    }

    /// Probes every pair for each `(probe, expected)` and judges the tries ([`judge`]): a pair
    /// expected denied must be denied on every try, one expected allowed may take a second.
    /// Fails with the tables of every probe kind that disagrees.
    pub fn check(&self, expected: &[(Probe, &Reachability)]) -> Result<(), String> {
        let probes: Vec<Probe> = expected.iter().map(|(probe, _)| *probe).collect();
        judge(expected, || self.observe(&probes, PROBE_TIMEOUT))
    }

    /// [`Model::check`] with the same expected table for all four probe kinds.
    pub fn check_all(&self, expected: &Reachability) -> Result<(), String> {
        let expected: Vec<(Probe, &Reachability)> =
            Probe::ALL.iter().map(|probe| (*probe, expected)).collect();
        self.check(&expected)
    }

    /// Probes the whole matrix with `probe` over and over while `work` runs (one round before
    /// it starts, two after it ends) and returns `work`'s result and every round observed.
    /// Rounds use short timeouts so that several fall inside the change.
    pub fn probe_while<T>(&self, probe: Probe, work: impl FnOnce() -> T) -> (T, Vec<Reachability>) {
        const LOOP_TIMEOUT: Duration = Duration::from_millis(400);
        let stop = AtomicBool::new(false);
        let rounds_done = AtomicUsize::new(0);
        std::thread::scope(|scope| {
            let prober = scope.spawn(|| {
                let mut rounds = Vec::new();
                while !stop.load(Ordering::Acquire) {
                    rounds.extend(self.observe(&[probe], LOOP_TIMEOUT));
                    rounds_done.fetch_add(1, Ordering::AcqRel);
                }
                rounds
            });
            let wait_rounds = |n: usize| {
                let target = rounds_done.load(Ordering::Acquire) + n;
                while rounds_done.load(Ordering::Acquire) < target {
                    std::thread::sleep(Duration::from_millis(10));
                }
            };
            wait_rounds(1);
            let result = work();
            wait_rounds(2);
            stop.store(true, Ordering::Release);
            let rounds = prober.join().unwrap_or_default();
            (result, rounds)
        })
    }

    fn ids(&self) -> Vec<String> {
        self.pods.iter().map(ModelPod::id).collect()
    }

    /// The expected table where `from → to` connects when `allowed(from, to)`; a pod always
    /// reaches itself (loopback never meets a policy, as upstream's tables say).
    pub fn expect(&self, allowed: impl Fn(&ModelPod, &ModelPod) -> bool) -> Reachability {
        let connected = self
            .pods
            .iter()
            .flat_map(|from| {
                self.pods
                    .iter()
                    .map(|to| std::ptr::eq(from, to) || allowed(from, to))
                    .collect::<Vec<_>>()
            })
            .collect();
        Reachability {
            ids: self.ids(),
            connected,
        }
    }

    /// Every pair connected.
    pub fn all_connected(&self) -> Reachability {
        self.expect(|_, _| true)
    }

    /// The number of servers running (nine while the model lives).
    pub fn servers(&self) -> usize {
        self.servers.len()
    }
}

/// Judges tries of every pair against `expected` (one table per probe kind); `observe` makes
/// one try of every pair for every probe kind, in `expected`'s order. A pair expected denied
/// must be denied on every try: a connection on any try fails it, whatever the others saw
/// (a denied pair that flaps is a policy that leaks). A pair expected allowed that failed is
/// tried once more (as upstream does: a probe can lose to a busy machine), and passes when
/// either try connected. Fails with every probe kind's tables, and the tries of each pair
/// that is wrong.
pub fn judge(
    expected: &[(Probe, &Reachability)],
    mut observe: impl FnMut() -> Vec<Reachability>,
) -> Result<(), String> {
    let mut tries = vec![observe()];
    let an_allowed_pair_failed = tries[0].iter().zip(expected).any(|(seen, (_, want))| {
        (0..want.connected.len()).any(|i| want.connected[i] && !seen.connected[i])
    });
    if an_allowed_pair_failed {
        tries.push(observe());
    }
    let mut report = String::new();
    for (kind, (probe, want)) in expected.iter().enumerate() {
        let of_kind: Vec<&Reachability> = tries.iter().map(|round| &round[kind]).collect();
        // Connected on any try: a retry can only help an allowed pair and only fail a denied one.
        let mut seen = (*want).clone();
        for (i, cell) in seen.connected.iter_mut().enumerate() {
            *cell = of_kind.iter().any(|round| round.connected[i]);
        }
        if seen.connected == want.connected {
            continue;
        }
        report.push_str(&mismatch_report(*probe, want, &seen));
        for i in (0..want.connected.len()).filter(|i| seen.connected[*i] != want.connected[*i]) {
            let each: Vec<&str> = of_kind
                .iter()
                .map(|round| {
                    if round.connected[i] {
                        "connected"
                    } else {
                        "refused"
                    }
                })
                .collect();
            let expected = if want.connected[i] {
                "allowed"
            } else {
                "denied"
            };
            let _ = writeln!(
                report,
                "{probe} {}: expected {expected}, tries: {}",
                want.pair(i),
                each.join(", ")
            );
        }
    }
    if report.is_empty() {
        Ok(())
    } else {
        Err(report)
    }
}

/// Checks the rounds [`Model::probe_while`] saw during a change from `before` to `after`: no
/// probe connected that both deny (traffic that should be denied never passes), and none failed
/// that both allow (allowed traffic is never dropped). Fails with every offending round.
pub fn check_transition(
    probe: Probe,
    rounds: &[Reachability],
    before: &Reachability,
    after: &Reachability,
) -> Result<(), String> {
    let mut report = String::new();
    for (index, round) in rounds.iter().enumerate() {
        let wrong: Vec<String> = (0..round.connected.len())
            .filter_map(|i| {
                let (seen, was, will) =
                    (round.connected[i], before.connected[i], after.connected[i]);
                let pair = round.pair(i);
                match (seen, was, will) {
                    (true, false, false) => {
                        Some(format!("{pair} connected, denied before and after"))
                    }
                    (false, true, true) => Some(format!("{pair} failed, allowed before and after")),
                    _ => None,
                }
            })
            .collect();
        if !wrong.is_empty() {
            let _ = writeln!(
                report,
                "{probe} round {index} of {}: {}\n{}",
                rounds.len(),
                wrong.join("; "),
                round.table("observed")
            );
        }
    }
    if report.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "{report}{}{}",
            before.table("before"),
            after.table("after")
        ))
    }
}

/// Which ordered pod pairs connect: row `from`, column `to`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reachability {
    ids: Vec<String>,
    connected: Vec<bool>,
}

impl Reachability {
    /// Whether `from` (`x/a`) reaches `to`.
    pub fn get(&self, from: &str, to: &str) -> bool {
        let index = |id: &str| self.ids.iter().position(|i| i == id);
        match (index(from), index(to)) {
            (Some(f), Some(t)) => self.connected[f * self.ids.len() + t],
            _ => false,
        }
    }

    /// The number of connected pairs.
    pub fn count(&self) -> usize {
        self.connected.iter().filter(|c| **c).count()
    }

    fn pair(&self, index: usize) -> String {
        let n = self.ids.len();
        format!("{} -> {}", self.ids[index / n], self.ids[index % n])
    }

    /// Upstream's truth table: a header row of destinations, one row per source.
    pub fn table(&self, title: &str) -> String {
        self.render(title, |i| if self.connected[i] { '.' } else { 'X' })
    }

    fn render(&self, title: &str, cell: impl Fn(usize) -> char) -> String {
        let n = self.ids.len();
        let mut text = format!("{title}:\n-\t{}\n", self.ids.join("\t"));
        for (row, id) in self.ids.iter().enumerate() {
            let cells: Vec<String> = (0..n).map(|col| cell(row * n + col).to_string()).collect();
            let _ = writeln!(text, "{id}\t{}", cells.join("\t"));
        }
        text
    }
}

fn mismatch_report(probe: Probe, expected: &Reachability, observed: &Reachability) -> String {
    let differ = (0..expected.connected.len())
        .filter(|i| expected.connected[*i] != observed.connected[*i])
        .count();
    let comparison = expected.render("comparison", |i| {
        if expected.connected[i] == observed.connected[i] {
            '.'
        } else {
            'X'
        }
    });
    format!(
        "{probe}: {differ} of {} pairs wrong\n{}{}{comparison}\n",
        expected.connected.len(),
        expected.table("expected"),
        observed.table("observed"),
    )
}

/// One probe from the namespace at `netns_path` (enter it on a thread of its own: this moves
/// the calling thread) to `to:port`: true when the server named `expect` answered within
/// `timeout`.
pub fn probe_once(
    netns_path: &str,
    to: Ipv4Addr,
    expect: &str,
    probe: Probe,
    timeout: Duration,
) -> bool {
    if enter_netns(netns_path).is_err() {
        return false;
    }
    let addr = SocketAddr::from((to, probe.port));
    let answer = match probe.protocol {
        Protocol::Tcp => tcp_probe(addr, timeout),
        Protocol::Udp => udp_probe(addr, timeout),
    };
    answer.is_ok_and(|name| name == expect)
}

/// A TCP probe: the name the server sends back over the connection.
pub(crate) fn tcp_probe(addr: SocketAddr, timeout: Duration) -> std::io::Result<String> {
    let started = Instant::now();
    let mut stream = TcpStream::connect_timeout(&addr, timeout)?;
    let left = timeout
        .saturating_sub(started.elapsed())
        .max(Duration::from_millis(1));
    stream.set_read_timeout(Some(left))?;
    let mut name = String::new();
    stream.read_to_string(&mut name)?;
    Ok(name)
}

/// A UDP probe, resent until its echo (the server's name) comes back or `timeout` passes.
pub(crate) fn udp_probe(addr: SocketAddr, timeout: Duration) -> std::io::Result<String> {
    let socket = UdpSocket::bind((Ipv4Addr::UNSPECIFIED, 0))?;
    socket.connect(addr)?;
    let deadline = Instant::now() + timeout;
    let mut buf = [0u8; 64];
    loop {
        let now = Instant::now();
        if now >= deadline {
            return Err(ErrorKind::TimedOut.into());
        }
        // A send can fail while the neighbour is unresolved or a port unreachable came back:
        // keep trying until the deadline.
        let _ = socket.send(b"probe");
        socket.set_read_timeout(Some(UDP_RESEND.min(deadline - now)))?;
        match socket.recv(&mut buf) {
            Ok(n) => return Ok(String::from_utf8_lossy(&buf[..n]).into_owned()),
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
            Err(e) if e.kind() == ErrorKind::ConnectionRefused => {}
            Err(e) => return Err(e),
        }
    }
}

/// Moves the calling thread into the namespace (setns changes only this thread).
pub(crate) fn enter_netns(path: &str) -> std::io::Result<()> {
    let handle = File::open(path)?;
    // SAFETY: setns(2) on a descriptor that stays open across the call; affects this thread.
    if unsafe { libc::setns(handle.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// TCP and UDP servers on every port of [`PORTS`] inside one pod's namespace, answering with
/// the pod's name; one thread, stopped and joined on drop.
#[derive(Debug)]
pub struct Servers {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Servers {
    pub fn start(netns: &Netns, name: String) -> Result<Servers, ClusterError> {
        let path = netns.path();
        let stop = Arc::new(AtomicBool::new(false));
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let flag = Arc::clone(&stop);
        let thread = std::thread::spawn(move || match bind_servers(&path) {
            Ok(sockets) => {
                let _ = ready_tx.send(Ok(()));
                serve(&sockets, name.as_bytes(), &flag);
            }
            Err(e) => {
                let _ = ready_tx.send(Err(format!("{path}: {e}")));
            }
        });
        let servers = Servers {
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

impl Drop for Servers {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

struct Sockets {
    tcp: Vec<TcpListener>,
    udp: Vec<UdpSocket>,
}

fn bind_servers(netns_path: &str) -> std::io::Result<Sockets> {
    enter_netns(netns_path)?;
    let mut sockets = Sockets {
        tcp: Vec::new(),
        udp: Vec::new(),
    };
    for port in PORTS {
        let tcp = TcpListener::bind((Ipv4Addr::UNSPECIFIED, port))?;
        tcp.set_nonblocking(true)?;
        sockets.tcp.push(tcp);
        let udp = UdpSocket::bind((Ipv4Addr::UNSPECIFIED, port))?;
        udp.set_nonblocking(true)?;
        sockets.udp.push(udp);
    }
    Ok(sockets)
}

/// Answers every connection and datagram with `name` until `stop` is set.
fn serve(sockets: &Sockets, name: &[u8], stop: &AtomicBool) {
    let fds: Vec<RawFd> = sockets
        .tcp
        .iter()
        .map(AsRawFd::as_raw_fd)
        .chain(sockets.udp.iter().map(AsRawFd::as_raw_fd))
        .collect();
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
        let ready = unsafe {
            libc::poll(
                polled.as_mut_ptr(),
                polled.len() as libc::nfds_t,
                SERVER_POLL_MS,
            )
        };
        if ready <= 0 {
            continue;
        }
        for listener in &sockets.tcp {
            while let Ok((mut stream, _)) = listener.accept() {
                // A few bytes into a fresh socket's empty send buffer: this does not block.
                let _ = stream.write_all(name);
            }
        }
        let mut buf = [0u8; 512];
        for socket in &sockets.udp {
            while let Ok((_, peer)) = socket.recv_from(&mut buf) {
                let _ = socket.send_to(name, peer);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// x/a and x/b: every pair allowed but x/a -> x/b.
    fn expected() -> Reachability {
        Reachability {
            ids: vec!["x/a".into(), "x/b".into()],
            connected: vec![true, false, true, true],
        }
    }

    fn seen(connected: [bool; 4]) -> Vec<Reachability> {
        vec![Reachability {
            connected: connected.to_vec(),
            ..expected()
        }]
    }

    /// Judges `tries` (each one try of the one probe kind) against [`expected`]; also returns
    /// how many tries were made.
    fn judged(tries: &[[bool; 4]]) -> (Result<(), String>, usize) {
        let want = expected();
        let mut made = 0;
        let result = judge(&[(Probe::TCP80, &want)], || {
            made += 1;
            seen(tries[made - 1])
        });
        (result, made)
    }

    #[test]
    fn a_denied_pair_that_connects_on_one_try_is_reported_even_if_the_next_refuses() {
        // Try 1: x/a -> x/b (denied) connects, and x/b -> x/a (allowed) fails, so there is a
        // second try; there x/a -> x/b is refused. A flapping pair: reported.
        let (result, made) = judged(&[[true, true, false, true], [true, false, true, true]]);
        assert_eq!(made, 2);
        let report = result.expect_err("a flapping denied pair must fail the check");
        assert!(
            report.contains("tcp/80 x/a -> x/b: expected denied, tries: connected, refused"),
            "{report}"
        );
        assert!(
            !report.contains("x/b -> x/a"),
            "the retried allowed pair passed: {report}"
        );
    }

    #[test]
    fn a_denied_pair_that_connects_once_fails_without_a_second_try() {
        let (result, made) = judged(&[[true, true, true, true]]);
        assert_eq!(made, 1, "nothing allowed failed: no second try");
        let report = result.expect_err("a denied pair connected");
        assert!(
            report.contains("expected denied, tries: connected"),
            "{report}"
        );
    }

    #[test]
    fn an_allowed_pair_may_take_a_second_try() {
        let (result, made) = judged(&[[true, false, false, true], [true, false, true, true]]);
        assert_eq!(made, 2);
        result.unwrap();
        let (result, _) = judged(&[[true, false, false, true], [true, false, false, true]]);
        let report = result.expect_err("an allowed pair failed twice");
        assert!(
            report.contains("x/b -> x/a: expected allowed, tries: refused, refused"),
            "{report}"
        );
    }

    #[test]
    fn the_expected_table_passes_on_the_first_try() {
        let (result, made) = judged(&[[true, false, true, true]]);
        assert_eq!(made, 1);
        result.unwrap();
    }
}
