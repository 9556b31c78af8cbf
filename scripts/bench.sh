#!/usr/bin/env bash
# `make bench`: every benchmark in benches/ (and the codec's in proto/benches/), side by side
# with the seed's way (ovs-ofctl / ovs-vsctl exec) and other peers on the same private Open
# vSwitch, in one run. Writes ONE report, docs/bench-report.md (committed: the README's numbers
# come from it), with the machine it ran on. OFNODE_BENCH_REPORT=PATH writes it elsewhere.
set -euo pipefail
cd "$(dirname "$0")/.."
report=${OFNODE_BENCH_REPORT:-docs/bench-report.md}
body=$(mktemp)
trap 'rm -f "$body"' EXIT

load() { cut -d' ' -f1-3 /proc/loadavg; }

run() {
  echo "== $*"
  {
    echo
    echo "## \`$*\`"
    echo
    echo '```text'
  } >> "$body"
  local started=$SECONDS
  "$@" 2>&1 | grep -v -E '^(\s*Compiling|\s*Finished|\s*Running|Gnuplot|WARNING: HTML)' \
    | tee -a "$body"
  {
    echo '```'
    echo
    echo "($((SECONDS - started)) s; load average after: $(load))"
  } >> "$body"
}

load_start=$(load)
started_at=$(date -u '+%Y-%m-%d %H:%M UTC')
commit="$(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
git diff --quiet HEAD 2>/dev/null || commit="$commit (with local changes)"
run cargo bench -q -p ofnode-proto --bench codec -- --noplot
# Against private OVS instances: OpenFlow transactions, OVSDB ports, the node controller (with
# HA at 10,000 pods), the CNI plugin as a runtime runs it, cluster membership through a real
# etcd, the VXLAN device over rtnetlink, a two-node cluster's ping through restarts, and the
# CLI's pod add against the seed's way with where its time goes (docs/cli-profile.md), and
# the networkpolicy mode at 1,000 pods / 500 policies against `ovs-ofctl bundle`, the admin
# tiers (100 ANPs at 10,000 pods, a priority change and the flows it touches), how fast
# drift is repaired and a standby takes over (faults), what one change costs the core (store)
# and the daemon through its API (scale) at 1,000 to 50,000 pods, nodes following a real
# kube-apiserver at scale: 3 real + 100 and 500 simulated (kube), and the Kubernetes
# controller's allocation latency and failover against a real kube-apiserver (controller), and
# the policy audit: events logged per second with one and ten busy rules through their meters,
# ofnode's CPU per 1,000 events, and a per-rule stats dump at 5,000 policies (audit).
for bench in openflow ovsdb sdn cni cluster netlink e2e cli netpol anp faults store scale kube controller audit; do
  if [ -f "benches/$bench.rs" ]; then
    run cargo bench -q --bench "$bench"
  fi
done

cpu=$(lscpu | sed -n 's/^Model name:[[:space:]]*//p' | head -1)
{
  echo "# ofnode benchmark report"
  echo
  echo "Written by \`make bench\` (scripts/bench.sh) on ${started_at}, at commit ${commit}."
  echo "Every number below is printed by the benchmark named in its section, in this one run."
  echo
  echo "## Machine"
  echo
  echo "- CPU: ${cpu:-unknown}, $(nproc) cores online"
  echo "- memory: $(awk '/MemTotal/ {printf "%.1f GiB", $2 / 1048576}' /proc/meminfo)"
  echo "- load average (1/5/15 min): ${load_start} at the start, $(load) at the end" \
    "(the benchmarks' own ovs-vswitchd and ofnode included; other work on the machine inflates every time)"
  echo "- kernel: $(uname -sr)"
  echo "- Open vSwitch: $(ovs-vswitchd --version | head -1) (userspace netdev datapath)"
  echo "- Rust: $(rustc --version)"
  echo "- run time: $((SECONDS / 60)) min"
  cat "$body"
} > "$report"
echo "report: $report"
