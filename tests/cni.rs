//! Issue 10: `ofnode-cni` run exactly as a container runtime runs it — a child process in the
//! node's namespace with the CNI environment and the network configuration on stdin — with
//! Debian's reference `host-local` IPAM plugin (/usr/lib/cni), against `ofnode run` on a
//! private Open vSwitch. Oracles: the kernel (ping, `ip link`), ovs-vsctl / ovs-ofctl, and
//! host-local's data directory.

use std::io::Write;
use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use ofnode::cni::{CniResult, ErrorObject, VersionInfo};
use ofnode_harness::cluster::{Cluster, ClusterOptions, Control, Endpoint, Mode, Node};
use ofnode_harness::{ApiFault, Netns};
use serde_json::{json, Value};

const OFNODE: &str = env!("CARGO_BIN_EXE_ofnode");
const OFNODE_CNI: &str = env!("CARGO_BIN_EXE_ofnode-cni");
const CNI_PATH: &str = "/usr/lib/cni";
const NETWORK: &str = "ofnode-test";

/// A one-node cluster, set up, plus host-local's private data directory.
struct Fixture {
    cluster: Cluster,
    data_dir: tempfile::TempDir,
}

impl Fixture {
    fn start() -> Fixture {
        let cluster = Cluster::start(ClusterOptions {
            nodes: 1,
            mode: Mode::Subnet,
            control: Control::Ofnode(OFNODE.into()),
            echo: false,
        })
        .unwrap();
        Fixture {
            cluster,
            data_dir: tempfile::tempdir().unwrap(),
        }
    }

    fn node(&self) -> &Node {
        self.cluster.node(0)
    }

    fn api(&self) -> PathBuf {
        self.node().daemon().unwrap().api.clone()
    }

    /// The network configuration a runtime would read from /etc/cni/net.d.
    fn config(&self) -> Value {
        json!({
            "cniVersion": "1.0.0",
            "name": NETWORK,
            "type": "ofnode",
            "api": self.api(),
            "mtu": 1450,
            "disableTxChecksum": true,
            "ipam": {
                "type": "host-local",
                "ranges": [[{"subnet": self.node().subnet_cidr(), "gateway": self.node().gateway.to_string()}]],
                "routes": [{"dst": "10.128.0.0/14"}],
                "dataDir": self.data_dir.path(),
            }
        })
    }

    /// Runs the plugin in the node's namespace: (success, stdout parsed as JSON if any).
    fn cni(&self, command: &str, id: &str, netns: &str, config: &[u8], args: &str) -> Run {
        let mut child = self
            .node()
            .netns()
            .command(OFNODE_CNI)
            .env("CNI_COMMAND", command)
            .env("CNI_CONTAINERID", id)
            .env("CNI_NETNS", netns)
            .env("CNI_IFNAME", "eth0")
            .env("CNI_PATH", CNI_PATH)
            .env("CNI_ARGS", args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        child.stdin.take().unwrap().write_all(config).unwrap();
        let out = child.wait_with_output().unwrap();
        Run {
            ok: out.status.success(),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }

    fn add(&self, pod: &CniPod, config: &Value) -> CniResult {
        let run = self.cni(
            "ADD",
            &pod.id,
            &pod.netns.path(),
            &bytes(config),
            &pod.args(),
        );
        assert!(
            run.ok,
            "ADD failed: {run:?}\n{}",
            self.cluster.diagnostics()
        );
        serde_json::from_str(&run.stdout).unwrap_or_else(|e| panic!("ADD result: {e}: {run:?}"))
    }

    fn ports(&self) -> Vec<String> {
        let text = self.node().ovs().vsctl(&["list-ports", "br0"]).unwrap();
        text.lines().map(str::to_string).collect()
    }

    fn flows_mentioning(&self, ip: Ipv4Addr) -> Vec<String> {
        let needle = format!("={ip},");
        let end = format!("={ip} ");
        self.node()
            .flows()
            .unwrap()
            .into_iter()
            .filter(|f| f.contains(&needle) || f.contains(&end))
            .collect()
    }

    fn host_link_exists(&self, name: &str) -> bool {
        self.node()
            .netns()
            .exec_status(&["ip", "link", "show", name])
    }

    /// The addresses host-local holds (one file per address in its data directory).
    fn allocations(&self) -> Vec<String> {
        let dir = self.data_dir.path().join(NETWORK);
        let Ok(entries) = std::fs::read_dir(dir) else {
            return Vec::new();
        };
        let mut ips: Vec<String> = entries
            .filter_map(|e| e.ok()?.file_name().into_string().ok())
            .filter(|name| name.parse::<Ipv4Addr>().is_ok())
            .collect();
        ips.sort();
        ips
    }

    /// Nothing of any pod: no veth, no pod port, no pod flow, no allocation.
    fn assert_nothing_left(&self, what: &str) {
        let links = self
            .node()
            .exec(&["ip", "-o", "link", "show", "type", "veth"])
            .unwrap();
        assert!(
            !links.lines().any(|l| l.contains(": veth")),
            "{what}: a pod veth is left: {links}"
        );
        let pod_ports: Vec<String> = self
            .ports()
            .into_iter()
            .filter(|p| p.starts_with("veth"))
            .collect();
        assert!(pod_ports.is_empty(), "{what}: ports left: {pod_ports:?}");
        let pod_flows: Vec<String> = self
            .node()
            .flows()
            .unwrap()
            .into_iter()
            .filter(|f| f.contains("table=20") && f.contains("in_port="))
            .collect();
        assert!(
            pod_flows.is_empty(),
            "{what}: pod flows left: {pod_flows:?}"
        );
        assert!(
            self.allocations().is_empty(),
            "{what}: host-local still holds {:?}",
            self.allocations()
        );
    }
}

#[derive(Debug)]
#[expect(
    dead_code,
    reason = "stderr is shown in failure messages through Debug"
)]
struct Run {
    ok: bool,
    stdout: String,
    stderr: String,
}

impl Run {
    /// The CNI error object this failed run printed.
    fn error(&self) -> ErrorObject {
        assert!(!self.ok, "expected a failure, got {self:?}");
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|e| panic!("stdout is not a CNI error object ({e}): {self:?}"))
    }
}

fn bytes(config: &Value) -> Vec<u8> {
    serde_json::to_vec(config).unwrap()
}

/// A pod sandbox the "runtime" made: its namespace, its container id, and the Kubernetes pod
/// it is (`default/pod-<n>` unless a test moves it).
struct CniPod {
    id: String,
    namespace: String,
    name: String,
    netns: Netns,
    ip: Ipv4Addr,
}

impl CniPod {
    fn new(n: u32) -> CniPod {
        CniPod {
            // The first 11 characters name the host veth: distinct per pod.
            id: format!("c{n:010x}{:053x}", std::process::id()),
            namespace: "default".into(),
            name: format!("pod-{n}"),
            netns: Netns::new("cp").unwrap(),
            ip: Ipv4Addr::UNSPECIFIED,
        }
    }

    /// `CNI_ARGS` as kubelet (through containerd) passes them for this pod, the same for ADD,
    /// CHECK and DEL; IgnoreUnknown=1 lets host-local accept the keys it does not know.
    fn args(&self) -> String {
        format!(
            "IgnoreUnknown=1;K8S_POD_NAMESPACE={};K8S_POD_NAME={};K8S_POD_INFRA_CONTAINER_ID={}",
            self.namespace, self.name, self.id
        )
    }

    /// `NAMESPACE/NAME`: the daemon's key of the pod.
    fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }

    fn host_veth(&self) -> String {
        format!("veth{}", &self.id[..11])
    }
}

impl Endpoint for CniPod {
    fn netns(&self) -> &Netns {
        &self.netns
    }
    fn ip(&self) -> Ipv4Addr {
        self.ip
    }
}

fn with_prev_result(config: &Value, result: &CniResult) -> Vec<u8> {
    let mut config = config.clone();
    config["prevResult"] = serde_json::to_value(result).unwrap();
    bytes(&config)
}

#[test]
fn three_pods_get_addresses_reach_each_other_and_del_removes_everything() {
    let fx = Fixture::start();
    let config = fx.config();
    let mut pods: Vec<CniPod> = (0..3).map(CniPod::new).collect();
    let mut results = Vec::new();
    for pod in &mut pods {
        let result = fx.add(pod, &config);
        let (address, gateway) = result.ipv4().expect("an IPv4 address");
        assert_eq!(gateway, Some(fx.node().gateway));
        assert_eq!(address.prefix_len(), 23);
        pod.ip = address.addr();
        // The interface the runtime asked for, inside the pod, with the address and MTU.
        let shown = pod
            .netns
            .exec_ok(&["ip", "-o", "addr", "show", "eth0"])
            .unwrap();
        assert!(shown.contains(&address.to_string()), "{shown}");
        let link = pod
            .netns
            .exec_ok(&["ip", "-o", "link", "show", "eth0"])
            .unwrap();
        assert!(link.contains("mtu 1450"), "{link}");
        let route = pod
            .netns
            .exec_ok(&["ip", "route", "show", "default"])
            .unwrap();
        assert!(
            route.contains(&format!("via {}", fx.node().gateway)),
            "{route}"
        );
        let offload = pod.netns.exec_ok(&["ethtool", "-k", "eth0"]).unwrap();
        assert!(offload.contains("tx-checksumming: off"), "{offload}");
        assert!(fx.ports().contains(&pod.host_veth()), "{:?}", fx.ports());
        assert_eq!(
            fx.flows_mentioning(pod.ip).len(),
            4,
            "{:?}",
            fx.node().flows()
        );
        results.push(result);
    }
    let mut ips: Vec<Ipv4Addr> = pods.iter().map(|p| p.ip).collect();
    ips.sort();
    ips.dedup();
    assert_eq!(ips.len(), 3, "addresses are not distinct: {ips:?}");
    assert_eq!(fx.allocations().len(), 3);

    let gateway = fx.node().gateway;
    let pairs: [(&CniPod, Ipv4Addr); 5] = [
        (&pods[0], pods[1].ip),
        (&pods[1], pods[2].ip),
        (&pods[2], pods[0].ip),
        (&pods[0], gateway),
        (&pods[2], gateway),
    ];
    for (from, to) in pairs {
        let stats = from.ping(to, 3).unwrap();
        assert_eq!(
            stats.received,
            stats.transmitted,
            "{} -> {to}: {stats:?}\n{}",
            from.ip,
            fx.cluster.diagnostics()
        );
    }

    for (pod, result) in pods.iter().zip(&results) {
        let run = fx.cni(
            "CHECK",
            &pod.id,
            &pod.netns.path(),
            &with_prev_result(&config, result),
            &pod.args(),
        );
        assert!(run.ok, "CHECK failed: {run:?}");
        assert!(run.stdout.trim().is_empty(), "{run:?}");
    }

    // DEL the first pod: its port, flows, veth and allocation go; the others stay.
    let gone = &pods[0];
    let prev = with_prev_result(&config, &results[0]);
    let run = fx.cni("DEL", &gone.id, &gone.netns.path(), &prev, &gone.args());
    assert!(run.ok, "DEL failed: {run:?}");
    assert!(!fx.ports().contains(&gone.host_veth()), "{:?}", fx.ports());
    assert!(
        fx.flows_mentioning(gone.ip).is_empty(),
        "{:?}",
        fx.flows_mentioning(gone.ip)
    );
    assert!(!fx.host_link_exists(&gone.host_veth()));
    assert!(!gone.netns.exec_status(&["ip", "link", "show", "eth0"]));
    assert!(
        !fx.allocations().contains(&gone.ip.to_string()),
        "{:?}",
        fx.allocations()
    );
    assert_eq!(fx.allocations().len(), 2);
    // The CHECK above can fail: after DEL it does, with the spec's error object.
    let check = fx.cni("CHECK", &gone.id, &gone.netns.path(), &prev, &gone.args());
    let error = check.error();
    assert_eq!(error.code, 101, "{check:?}");
    assert!(error.msg.contains("no eth0"), "{error:?}");
    // A second DEL succeeds, and so does a DEL after the namespace itself is gone.
    let run = fx.cni("DEL", &gone.id, &gone.netns.path(), &prev, &gone.args());
    assert!(run.ok, "second DEL failed: {run:?}");
    let [_, second, third] = <[CniPod; 3]>::try_from(pods).ok().unwrap();
    let second_prev = with_prev_result(&config, &results[1]);
    let (second_ns, second_veth, second_args) =
        (second.netns.path(), second.host_veth(), second.args());
    drop(second.netns);
    let run = fx.cni("DEL", &second.id, &second_ns, &second_prev, &second_args);
    assert!(run.ok, "DEL without its namespace failed: {run:?}");
    assert!(!fx.ports().contains(&second_veth));
    assert!(fx.flows_mentioning(second.ip).is_empty());
    assert_eq!(fx.allocations(), vec![third.ip.to_string()]);
    let run = fx.cni(
        "DEL",
        &third.id,
        &third.netns.path(),
        &bytes(&config),
        &third.args(),
    );
    assert!(run.ok, "DEL without prevResult failed: {run:?}");
    fx.assert_nothing_left("after every DEL");
}

#[test]
fn check_finds_a_missing_flow_and_bandwidth_and_vnid_reach_the_daemon() {
    let fx = Fixture::start();
    let mut config = fx.config();
    config["runtimeConfig"] =
        json!({"bandwidth": {"ingressRate": 2_000_000, "egressRate": 1_024_000}});
    let mut pod = CniPod::new(7);
    pod.namespace = "ns1".into();
    let run = fx.cni(
        "ADD",
        &pod.id,
        &pod.netns.path(),
        &bytes(&config),
        &format!("{};OFNODE_VNID=42", pod.args()),
    );
    assert!(run.ok, "{run:?}");
    let result: CniResult = serde_json::from_str(&run.stdout).unwrap();
    pod.ip = result.ipv4().unwrap().0.addr();
    // The daemon knows the pod by the name kubelet gave it.
    let listed = fx.node().cli(&["pod", "list"]).unwrap();
    assert!(
        listed.starts_with(&format!("{} ip={} vnid=42 ", pod.key(), pod.ip)),
        "{listed}"
    );
    let veth = pod.host_veth();
    let flows = fx.flows_mentioning(pod.ip);
    assert!(
        flows.iter().any(|f| f.contains("load:0x2a->NXM_NX_REG0[]")),
        "VNID 42 not in {flows:?}"
    );
    // egressRate 1,024,000 bit/s is the port's ingress policing of 1000 kbit/s; ingressRate a QoS.
    let policing = fx
        .node()
        .ovs()
        .vsctl(&["get", "interface", &veth, "ingress_policing_rate"])
        .unwrap();
    assert_eq!(policing.trim(), "1000");
    let qos = fx
        .node()
        .ovs()
        .vsctl(&["get", "port", &veth, "qos"])
        .unwrap();
    assert_ne!(qos.trim(), "[]", "no QoS on {veth}");

    let prev = with_prev_result(&config, &result);
    assert!(
        fx.cni("CHECK", &pod.id, &pod.netns.path(), &prev, &pod.args())
            .ok
    );
    // A repeated ADD is refused and takes nothing from the pod (host-local releases by
    // container id, so undoing it must not reach IPAM).
    let again = fx.cni(
        "ADD",
        &pod.id,
        &pod.netns.path(),
        &bytes(&config),
        &pod.args(),
    );
    assert_eq!(again.error().code, 103, "{again:?}");
    assert_eq!(fx.allocations(), vec![pod.ip.to_string()]);
    assert!(
        fx.cni("CHECK", &pod.id, &pod.netns.path(), &prev, &pod.args())
            .ok
    );
    // Remove one of the pod's flows behind the daemon's back: CHECK names it.
    fx.node()
        .ovs()
        .ofctl(
            "del-flows",
            "br0",
            &[&format!("table=40,arp,nw_dst={}", pod.ip)],
        )
        .unwrap();
    let check = fx.cni("CHECK", &pod.id, &pod.netns.path(), &prev, &pod.args());
    let error = check.error();
    assert_eq!(error.code, 101, "{check:?}");
    assert!(error.msg.contains("table=40"), "{error:?}");

    let run = fx.cni("DEL", &pod.id, &pod.netns.path(), &prev, &pod.args());
    assert!(run.ok, "{run:?}");
    fx.assert_nothing_left("after DEL");
}

#[test]
fn failed_adds_give_a_cni_error_and_leave_nothing_behind() {
    let fx = Fixture::start();
    let pod = CniPod::new(1);
    let ns = pod.netns.path();
    let add = |config: &[u8], netns: &str, extra: &str| {
        let args = format!("{}{extra}", pod.args());
        fx.cni("ADD", &pod.id, netns, config, &args)
    };
    let good = fx.config();

    // Bad configurations: not JSON, a version we do not speak, another plugin's type, bad MTU.
    assert_eq!(add(b"{not json", &ns, "").error().code, 6);
    let mut conf = good.clone();
    conf["cniVersion"] = json!("0.2.0");
    assert_eq!(add(&bytes(&conf), &ns, "").error().code, 1);
    let mut conf = good.clone();
    conf["type"] = json!("bridge");
    assert_eq!(add(&bytes(&conf), &ns, "").error().code, 7);
    let mut conf = good.clone();
    conf["mtu"] = json!(20);
    assert_eq!(add(&bytes(&conf), &ns, "").error().code, 7);
    let error = add(&bytes(&good), &ns, ";OFNODE_VNID=99999999").error();
    assert_eq!(error.code, 7, "{error:?}");
    // Without the pod's name (kubelet always sends it) the daemon could not know the pod.
    for args in [
        "IgnoreUnknown=1;K8S_POD_NAMESPACE=default",
        "IgnoreUnknown=1;K8S_POD_NAME=pod-1",
        "IgnoreUnknown=1;K8S_POD_NAMESPACE=Default;K8S_POD_NAME=pod-1",
    ] {
        let error = fx.cni("ADD", &pod.id, &ns, &bytes(&good), args).error();
        assert_eq!(error.code, 4, "{args}: {error:?}");
        assert!(error.msg.contains("CNI_ARGS"), "{args}: {error:?}");
    }
    fx.assert_nothing_left("bad configurations");
    // Refused before anything was asked of IPAM: host-local never made its directory.
    assert!(
        !fx.data_dir.path().join(NETWORK).exists(),
        "a refused ADD reached IPAM"
    );

    // An IPAM plugin that is not in CNI_PATH.
    let mut conf = good.clone();
    conf["ipam"]["type"] = json!("no-such-ipam");
    let error = add(&bytes(&conf), &ns, "").error();
    assert_eq!(error.code, 7);
    assert!(error.msg.contains("no-such-ipam"), "{error:?}");
    // host-local refusing its own configuration: its error object is passed on.
    let mut conf = good.clone();
    conf["ipam"]["ranges"] = json!([[{"subnet": "10.128.0.0/33"}]]);
    let error = add(&bytes(&conf), &ns, "").error();
    assert!(error.msg.contains("host-local"), "{error:?}");
    fx.assert_nothing_left("IPAM failures");

    // A namespace that does not exist: the spec's "container unknown".
    let error = add(&bytes(&good), "/run/netns/ofnode-no-such-pod", "").error();
    assert_eq!(error.code, 3, "{error:?}");
    fx.assert_nothing_left("missing netns");

    // A failure half-way: the address is allocated and the veth made, then the daemon cannot
    // be reached. Both are undone.
    let mut conf = good.clone();
    conf["api"] = json!(fx.data_dir.path().join("no-daemon.sock"));
    let run = add(&bytes(&conf), &ns, "");
    let error = run.error();
    assert_eq!(error.code, 11, "{error:?}");
    assert!(error.msg.contains("no-daemon.sock"), "{error:?}");
    assert!(!pod.netns.exec_status(&["ip", "link", "show", "eth0"]));
    fx.assert_nothing_left("a failure after IPAM and the veth");

    // The same pod then adds fine: nothing stale is in the way.
    let result = fx.add(&pod, &good);
    assert!(result.ipv4().is_some());
}

/// The daemon accepts the pod (port and flows made), then the next request of the ADD (the
/// pod's bandwidth) fails: the plugin undoes everything, the daemon's pod included. The failure
/// is injected by the harness's API proxy between the plugin and the real daemon.
#[test]
fn an_add_failing_after_the_daemon_accepted_the_pod_leaves_nothing_behind() {
    let fx = Fixture::start();
    let pod = CniPod::new(5);
    let fault = ApiFault::start(
        &fx.data_dir.path().join("api-fault.sock"),
        &fx.api(),
        "/v1/pods/bandwidth",
    )
    .unwrap();
    let mut conf = fx.config();
    conf["api"] = json!(fault.path());
    conf["runtimeConfig"] =
        json!({"bandwidth": {"ingressRate": 2_000_000, "egressRate": 1_024_000}});
    let run = fx.cni(
        "ADD",
        &pod.id,
        &pod.netns.path(),
        &bytes(&conf),
        &pod.args(),
    );
    let error = run.error();
    assert!(error.msg.contains("injected fault"), "{error:?}");
    // The daemon had the pod: its add went through, then the plugin took it back.
    let requests = fault.requests();
    let relayed = |line: &str| requests.iter().any(|(l, r)| l.starts_with(line) && *r);
    assert!(relayed("POST /v1/pods "), "{requests:?}");
    assert!(
        relayed("DELETE /v1/pods "),
        "the undo never reached the daemon: {requests:?}"
    );
    assert!(!pod.netns.exec_status(&["ip", "link", "show", "eth0"]));
    fx.assert_nothing_left("a failure after the daemon accepted the pod");
    let status = fx.node().status().unwrap();
    assert_eq!(status["pods"], 0, "{status}");

    // The same pod then adds fine straight to the daemon: nothing stale is in the way.
    let result = fx.add(&pod, &fx.config());
    assert!(result.ipv4().is_some());
}

#[test]
fn the_pod_lookup_api_reports_the_pod_its_port_and_missing_flows() {
    use ofnode::api::client::{Client, ClientError};
    use ofnode::sdn::PodStatus;

    let fx = Fixture::start();
    let pod = CniPod::new(3);
    let result = fx.add(&pod, &fx.config());
    let ip = result.ipv4().unwrap().0.addr();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let client = Client::new(fx.api());
    let get =
        |query: String| runtime.block_on(client.get::<PodStatus>(&format!("/v1/pods?{query}")));

    let status = get(format!("pod={}", pod.key())).unwrap();
    assert_eq!(status.pod.ip, ip);
    assert_eq!(
        status.pod.veth.as_ref().map(|v| v.to_string()),
        Some(pod.host_veth())
    );
    assert!(status.port);
    assert!(status.missing_flows.is_empty(), "{status:?}");

    fx.node()
        .ovs()
        .ofctl("del-flows", "br0", &[&format!("table=70,ip,nw_dst={ip}")])
        .unwrap();
    let status = get(format!("pod={}", pod.key())).unwrap();
    assert_eq!(status.missing_flows.len(), 1, "{status:?}");
    assert!(
        status.missing_flows[0].starts_with("table=70"),
        "{status:?}"
    );

    let status_of = |result: Result<PodStatus, ClientError>| match result {
        Err(ClientError::Api { status, .. }) => status.as_u16(),
        other => panic!("expected an API error, got {other:?}"),
    };
    assert_eq!(status_of(get("pod=default/no-such-pod".into())), 404);
    assert_eq!(status_of(get("pod=xyz".into())), 400);
    assert_eq!(status_of(get(format!("pod={}&other=1", pod.key()))), 400);
    // Pods were once looked up by sandbox id: the query is refused, not ignored.
    assert_eq!(status_of(get(format!("sandbox={}", pod.id))), 400);
}

#[test]
fn version_lists_the_supported_versions() {
    let out = Command::new(OFNODE_CNI)
        .env("CNI_COMMAND", "VERSION")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(out.status.success());
    let info: VersionInfo = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(info.supported_versions, vec!["1.0.0".to_string()]);
    let out = Command::new(OFNODE_CNI)
        .env("CNI_COMMAND", "ADD")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(!out.status.success());
    let error: ErrorObject = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(error.code, 4, "{error:?}"); // CNI_CONTAINERID missing
}
