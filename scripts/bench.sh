#!/usr/bin/env bash
# `make bench`: every benchmark, side by side with the seed's way (ovs-ofctl / ovs-vsctl exec) on
# the same private Open vSwitch, in one run. The report is also written to target/bench-report.txt.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p target
report=target/bench-report.txt
: > "$report"

run() {
  echo "== $*" | tee -a "$report"
  "$@" 2>&1 | grep -v -E '^(\s*Compiling|\s*Finished|\s*Running|Gnuplot|WARNING: HTML)' | tee -a "$report"
}

# Sans-IO codec (criterion).
run cargo bench -q -p ofnode-proto --bench codec -- --noplot
# Against a private OVS: OpenFlow transactions, OVSDB ports, the node controller end to end,
# the CNI plugin as a runtime runs it, cluster membership through a real etcd, the VXLAN
# device's entries over rtnetlink (in namespaces of its own), and a two-node cluster's ping
# recovering after ovs-vswitchd restarts (issue 7's 2 s target), and the CLI's pod add against
# the seed's way with where its time goes (issue 15, docs/cli-profile.md).
for bench in openflow ovsdb sdn cni cluster netlink e2e cli; do
  if [ -f "benches/$bench.rs" ]; then
    run cargo bench -q --bench "$bench"
  fi
done
echo "report: $report"
