#!/usr/bin/env bash
# Installs what ofnode's tests, demo and benchmarks need on a fresh Debian machine (as root).
# Idempotent: does nothing when everything is present.
set -euo pipefail

# Debian package -> a file that proves it is installed.
declare -A NEED=(
  [openvswitch-switch]=/usr/sbin/ovs-vswitchd
  [openvswitch-common]=/usr/bin/ovs-ofctl
  [iproute2]=/usr/sbin/ip
  [ethtool]=/usr/sbin/ethtool
  [iputils-ping]=/usr/bin/ping
  [python3-os-ken]=/usr/bin/osken-manager
  [procps]=/usr/bin/pgrep
  [curl]=/usr/bin/curl
  [containernetworking-plugins]=/usr/lib/cni/host-local
  [etcd-server]=/usr/bin/etcd
  [etcd-client]=/usr/bin/etcdctl
  # The etcd-client crate compiles etcd's gRPC protos at build time.
  [protobuf-compiler]=/usr/bin/protoc
  # ... and imports protobuf's well-known types (descriptor.proto, struct.proto), which Debian
  # ships in the -dev package that protobuf-compiler only recommends.
  [libprotobuf-dev]=/usr/include/google/protobuf/descriptor.proto
  # The TLS etcd of the harness gets its certificates from openssl.
  [openssl]=/usr/bin/openssl
  # The packaging test has systemd's own parser check the unit (systemd-analyze verify).
  [systemd]=/usr/bin/systemd-analyze
)

missing=()
for pkg in "${!NEED[@]}"; do
  [ -e "${NEED[$pkg]}" ] || missing+=("$pkg")
done

if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "install-deps: need root to install: ${missing[*]}" >&2
    exit 1
  fi
  echo "install-deps: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# The Debian package starts the system's own OVS on install; ofnode's tests never use it, they run
# private instances. Nothing to do about it here.

for comp in rustfmt clippy; do
  rustup component list --installed 2>/dev/null | grep -q "^$comp" || rustup component add "$comp"
done

# A real kube-apiserver, kubectl and etcd for the Kubernetes tests and the demo, built from the
# Go module proxy once per machine into a cache keyed by release (tools/kube/README.md).
"$(dirname "$0")/build-kube-tools.sh"
