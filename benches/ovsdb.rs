//! add-port / del-port through ofnode's OVSDB client vs `ovs-vsctl` exec, in one run on one
//! private Open vSwitch. Both wait for ovs-vswitchd to apply the change (ovs-vsctl without
//! `--no-wait`; ofnode bumps next_cfg and waits for cur_cfg), and both add real veths.
//!
//! Run: `cargo bench --bench ovsdb` (as root).

use std::process::Command;
use std::time::{Duration, Instant};

use ofnode::ovsdb::{BridgeSpec, Client, ClientOptions, PortSpec};
use ofnode_harness::Ovs;

const ROUNDS: usize = 60;
const VETHS: usize = 8;

fn main() {
    // `cargo bench` passes `--bench`; a filter argument that is not ours means "not me".
    if std::env::args()
        .skip(1)
        .any(|arg| !arg.starts_with('-') && !"ovsdb".contains(&arg))
    {
        return;
    }
    let ovs = Ovs::start().expect("private OVS starts (run as root)");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime");
    let client = runtime
        .block_on(Client::connect(&ovs.db_target(), ClientOptions::default()))
        .expect("client connects");
    runtime
        .block_on(client.ensure_bridge(&BridgeSpec {
            name: "br0".into(),
            fail_mode: Some("secure".into()),
            protocols: vec!["OpenFlow13".into()],
            datapath_type: Some("netdev".into()),
        }))
        .expect("bridge");
    let veths: Vec<String> = (0..VETHS).map(|i| format!("bv{i}")).collect();
    for veth in &veths {
        let peer = format!("{veth}p");
        ovs.netns()
            .exec_ok(&[
                "ip", "link", "add", veth, "type", "veth", "peer", "name", &peer,
            ])
            .expect("veth");
        ovs.netns()
            .exec_ok(&["ip", "link", "set", veth, "up"])
            .expect("veth up");
    }
    let db = format!("--db={}", ovs.db_target());
    let vsctl = |args: &[&str]| {
        let status = Command::new("ovs-vsctl")
            .arg(&db)
            .args(args)
            .status()
            .expect("ovs-vsctl runs");
        assert!(status.success(), "ovs-vsctl {args:?} failed");
    };

    let (mut ofnode_add, mut ofnode_del, mut vsctl_add, mut vsctl_del) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for round in 0..ROUNDS {
        let veth = &veths[round % VETHS];
        let spec = PortSpec {
            bridge: "br0".into(),
            name: veth.clone(),
            ..PortSpec::default()
        };
        // Alternate which tool goes first so neither always meets a warmer switch.
        for tool_is_ofnode in [round % 2 == 0, round % 2 != 0] {
            if tool_is_ofnode {
                let t = Instant::now();
                let ofport = runtime.block_on(client.add_port(&spec)).expect("add-port");
                ofnode_add.push(t.elapsed());
                assert!(ofport > 0);
                let t = Instant::now();
                runtime
                    .block_on(client.delete_port("br0", veth))
                    .expect("del-port");
                ofnode_del.push(t.elapsed());
            } else {
                let t = Instant::now();
                vsctl(&["add-port", "br0", veth]);
                vsctl_add.push(t.elapsed());
                let t = Instant::now();
                vsctl(&["del-port", "br0", veth]);
                vsctl_del.push(t.elapsed());
            }
        }
    }
    report("add-port", &mut ofnode_add, &mut vsctl_add);
    report("del-port", &mut ofnode_del, &mut vsctl_del);
    drop(client);
    drop(runtime);
    drop(ovs);
}

fn median(samples: &mut [Duration]) -> Duration {
    samples.sort_unstable();
    samples[samples.len() / 2]
}

fn report(what: &str, ofnode: &mut [Duration], vsctl: &mut [Duration]) {
    let (ours, theirs) = (median(ofnode), median(vsctl));
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    println!(
        "ovsdb {what}: ofnode median {:.2} ms, ovs-vsctl median {:.2} ms, ratio {:.1} x ({} rounds, waiting for ovs-vswitchd)",
        ms(ours),
        ms(theirs),
        ms(theirs) / ms(ours),
        ofnode.len()
    );
}
