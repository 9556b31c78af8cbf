#!/usr/bin/env bash
# Builds the real Kubernetes components ofnode's tests and demo run — kube-apiserver and kubectl
# of the release tools/kube/go.mod requires, etcd of the release tools/etcd/go.mod requires —
# from the Go module proxy into a cache directory keyed by release, once per machine:
#
#   ${OFNODE_TOOLS_CACHE:-/var/cache/ofnode}/kube-<release>/{kube-apiserver,kubectl}
#   ${OFNODE_TOOLS_CACHE:-/var/cache/ofnode}/etcd-<release>/etcd
#
# Does nothing when both are there; a new release in a go.mod is a new directory, built anew.
# Called by scripts/install-deps.sh (so by `make test`, `make demo`); tools/kube/README.md says
# more. ofnode itself is Rust: Go only builds these.
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
cache=${OFNODE_TOOLS_CACHE:-/var/cache/ofnode}

# The version a go.mod requires MODULE at (a `require` line or a line of a require block).
required() {
  awk -v module="$2" '$1 == "require" { $1 = ""; $0 = $0 } $1 == module && $2 ~ /^v/ { print $2; exit }' \
    "$repo/$1/go.mod"
}
kube_release=$(required tools/kube k8s.io/kubernetes)
etcd_release=$(required tools/etcd go.etcd.io/etcd/server/v3)
kube_dir=$cache/kube-$kube_release
etcd_dir=$cache/etcd-$etcd_release

built() {
  [ -x "$kube_dir/kube-apiserver" ] && [ -x "$kube_dir/kubectl" ] && [ -x "$etcd_dir/etcd" ]
}
built && exit 0

go=$(command -v go || true)
[ -n "$go" ] || { [ -x /usr/local/go/bin/go ] && go=/usr/local/go/bin/go; }
if [ -z "$go" ]; then
  echo "build-kube-tools: no Go toolchain (go 1.26 is needed to build kube-apiserver $kube_release and etcd $etcd_release)" >&2
  exit 1
fi

mkdir -p "$cache"
# One build at a time per machine (parallel `make test`s in several checkouts); the second one
# finds the binaries the first one made.
exec 9>"$cache/.build.lock"
flock 9
built && exit 0

# Module and build caches of their own, removed after a successful build: the binaries are what
# is kept (the caches hold ~3 GB that only a rebuild of the same release would reuse).
export GOMODCACHE=$cache/go/mod GOCACHE=$cache/go/build
export GOFLAGS="-mod=readonly -trimpath -buildvcs=false" GOTOOLCHAIN=local CGO_ENABLED=0

start=$(date +%s)
echo "build-kube-tools: building kube-apiserver + kubectl $kube_release and etcd $etcd_release with $("$go" env GOVERSION) (once per machine; several minutes)"

# The version the binaries report (`kubectl version`, /version), as Kubernetes' own build sets it.
version_flags() {
  local release=$1 major minor pkg flags=""
  major=${release#v}; major=${major%%.*}
  minor=${release#v*.}; minor=${minor%%.*}
  for pkg in k8s.io/client-go/pkg/version k8s.io/component-base/version; do
    flags+=" -X $pkg.gitVersion=$release -X $pkg.gitMajor=$major -X $pkg.gitMinor=$minor -X $pkg.gitTreeState=clean"
  done
  echo "$flags"
}

# Builds PACKAGES of MODULE (`go build -o DIR/OUT`) into a fresh directory beside FINAL and renames
# it into place, so an interrupted build leaves no half-made cache (a directory there is complete).
build_into() {
  local final=$1 module=$2 ldflags=$3 out=$4; shift 4
  [ -d "$final" ] && return 0
  local tmp
  tmp=$(mktemp -d "$final.partial.XXXXXX")
  chmod 755 "$tmp"
  (cd "$repo/$module" && "$go" build -ldflags "-s -w $ldflags" -o "$tmp/$out" "$@")
  mv "$tmp" "$final"
}
trap 'rm -rf "$cache"/*.partial.*' EXIT

build_into "$kube_dir" tools/kube "$(version_flags "$kube_release")" "" \
  k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kubectl
build_into "$etcd_dir" tools/etcd "" etcd go.etcd.io/etcd/server/v3

echo "build-kube-tools: built in $(( $(date +%s) - start )) s; module cache $(du -sh "$GOMODCACHE" | cut -f1), build cache $(du -sh "$GOCACHE" | cut -f1), removed"
"$go" clean -modcache
rm -rf "$GOCACHE" "$cache/go"
du -sh "$kube_dir" "$etcd_dir"
