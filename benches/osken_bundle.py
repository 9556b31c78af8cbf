"""os-ken side of ofnode's OpenFlow benchmark (`cargo bench --bench openflow`).

Sends the same ONF bundles (OpenFlow 1.3 extension EXT-230, flags atomic|ordered) as ofnode:
the seed's 4-flow pod transaction, repeated, and one bundle of many flows. Each transaction is
OPEN, one BUNDLE_ADD per flow, COMMIT, then a wait for the COMMIT reply.

Run by the benchmark as
    ip netns exec NS /usr/bin/python3 /usr/bin/osken-manager \
        --ofp-listen-host 127.0.0.1 --ofp-tcp-listen-port PORT bench/osken_bundle.py
with OFNODE_BENCH_CONFIG naming a JSON file of parameters (see `load_config`). The benchmark
runs in a green thread (hub.spawn) once the switch is in MAIN state, writes its numbers as JSON
to the file named in the config, and ends the process with os._exit.
"""

import ipaddress
import json
import os
import time
import traceback

from os_ken.base import app_manager
from os_ken.controller import ofp_event
from os_ken.controller.handler import MAIN_DISPATCHER, set_ev_cls
from os_ken.lib import hub
from os_ken.ofproto import nicira_ext, ofproto_v1_3

REPLY_TIMEOUT_S = 600


def load_config():
    with open(os.environ["OFNODE_BENCH_CONFIG"]) as f:
        return json.load(f)


class BundleBench(app_manager.OSKenApp):
    OFP_VERSIONS = [ofproto_v1_3.OFP_VERSION]

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.config = load_config()
        self.started = False
        self.waiting_xid = None
        self.reply_event = hub.Event()
        self.errors = []
        self.bundle_id = 0

    @set_ev_cls(ofp_event.EventOFPStateChange, MAIN_DISPATCHER)
    def on_main(self, ev):
        if not self.started:
            self.started = True
            hub.spawn(self.run, ev.datapath)

    @set_ev_cls(ofp_event.EventONFBundleCtrlMsg, MAIN_DISPATCHER)
    def on_bundle_reply(self, ev):
        if ev.msg.xid == self.waiting_xid:
            self.reply_event.set()

    @set_ev_cls(ofp_event.EventOFPErrorMsg, MAIN_DISPATCHER)
    def on_error(self, ev):
        self.errors.append("type %d code %d xid %d" % (ev.msg.type, ev.msg.code, ev.msg.xid))
        self.reply_event.set()

    # ---- flows ----

    def pod_flows(self, dp):
        """The seed's setupPodFlows, as os-ken objects."""
        p, ofp = dp.ofproto_parser, dp.ofproto
        pod = self.config["pod"]
        port, ip, mac, vnid = pod["ofport"], pod["ip"], pod["mac"], pod["vnid"]
        note = list(bytes.fromhex(pod["note_hex"]))

        def load(reg, value):
            return p.NXActionRegLoad(nicira_ext.ofs_nbits(0, 31), reg, value)

        def flow(table, match, actions, goto=None):
            inst = [p.OFPInstructionActions(ofp.OFPIT_APPLY_ACTIONS, actions)] if actions else []
            if goto is not None:
                inst.append(p.OFPInstructionGotoTable(goto))
            return p.OFPFlowMod(dp, table_id=table, priority=100, match=match,
                                instructions=inst, command=ofp.OFPFC_ADD,
                                buffer_id=ofp.OFP_NO_BUFFER)

        return [
            flow(20, p.OFPMatch(in_port=port, eth_type=0x0806, arp_spa=ip, arp_sha=mac),
                 [load("reg0", vnid), p.NXActionNote(note=note)], goto=21),
            flow(20, p.OFPMatch(in_port=port, eth_type=0x0800, ipv4_src=ip),
                 [load("reg0", vnid)], goto=21),
            flow(40, p.OFPMatch(eth_type=0x0806, arp_tpa=ip), [p.OFPActionOutput(port)]),
            flow(70, p.OFPMatch(eth_type=0x0800, ipv4_dst=ip),
                 [load("reg1", vnid), load("reg2", port)], goto=80),
        ]

    def bulk_flows(self, dp):
        """table=70, priority=100, ip, nw_dst=BASE+i, actions=load:VNID->NXM_NX_REG1[],
        load:PORT->NXM_NX_REG2[], goto_table:80 — the same flows ofnode and ovs-ofctl send."""
        p, ofp = dp.ofproto_parser, dp.ofproto
        bulk = self.config["bulk"]
        base = int(ipaddress.IPv4Address(bulk["base_ip"]))
        vnid, port = bulk["vnid"], bulk["ofport"]
        flows = []
        for i in range(bulk["flows"]):
            if i % 1000 == 0:
                # Let os-ken's own green threads (echo replies, socket reads) run.
                hub.sleep(0)
            actions = [p.NXActionRegLoad(nicira_ext.ofs_nbits(0, 31), "reg1", vnid),
                       p.NXActionRegLoad(nicira_ext.ofs_nbits(0, 31), "reg2", port)]
            inst = [p.OFPInstructionActions(ofp.OFPIT_APPLY_ACTIONS, actions),
                    p.OFPInstructionGotoTable(80)]
            match = p.OFPMatch(eth_type=0x0800, ipv4_dst=str(ipaddress.IPv4Address(base + i)))
            flows.append(p.OFPFlowMod(dp, table_id=70, priority=100, match=match,
                                      instructions=inst, command=ofp.OFPFC_ADD,
                                      buffer_id=ofp.OFP_NO_BUFFER))
        return flows

    # ---- protocol ----

    def wait_reply(self, xid):
        self.waiting_xid = xid
        if not self.reply_event.wait(timeout=REPLY_TIMEOUT_S):
            raise RuntimeError("no reply for xid %d" % xid)
        self.reply_event.clear()
        if self.errors:
            raise RuntimeError("switch errors: %s" % self.errors)

    def bundle(self, dp, flows):
        """OPEN, ADD x N, COMMIT; waits for the COMMIT reply."""
        p, ofp = dp.ofproto_parser, dp.ofproto
        flags = ofp.ONF_BF_ATOMIC | ofp.ONF_BF_ORDERED
        self.bundle_id += 1
        bid = self.bundle_id
        self.reply_event.clear()
        dp.send_msg(p.ONFBundleCtrlMsg(dp, bid, ofp.ONF_BCT_OPEN_REQUEST, flags, []))
        for flow in flows:
            # The inner message takes the add's xid; clear the one from the previous bundle.
            flow.xid = None
            dp.send_msg(p.ONFBundleAddMsg(dp, bid, flags, flow, []))
        commit = p.ONFBundleCtrlMsg(dp, bid, ofp.ONF_BCT_COMMIT_REQUEST, flags, [])
        dp.set_xid(commit)
        self.waiting_xid = commit.xid
        dp.send_msg(commit)
        self.wait_reply(commit.xid)

    # ---- benchmark ----

    def run(self, dp):
        result = {}
        try:
            pod = self.pod_flows(dp)
            for _ in range(self.config["pod_warmup"]):
                self.bundle(dp, pod)
            latencies = []
            for _ in range(self.config["pod_iters"]):
                start = time.perf_counter()
                self.bundle(dp, pod)
                latencies.append(time.perf_counter() - start)
            result["pod_latencies_s"] = latencies

            # Timed from building the flow objects, as the other peers are timed from text.
            start = time.perf_counter()
            flows = self.bulk_flows(dp)
            self.bundle(dp, flows)
            result["bulk_s"] = time.perf_counter() - start
            result["bulk_flows"] = len(flows)
        except Exception:
            result["error"] = traceback.format_exc()
        with open(self.config["out"], "w") as f:
            json.dump(result, f)
        os._exit(0)
