#!/bin/sh
# Instructions per flow of the codec benchmark's four workloads (proto/benches/codec.rs),
# counted by callgrind: independent of the machine's load, unlike the bench's times. Each
# workload runs twice under callgrind (R1 and R2 runs); (I(R2) - I(R1)) / (R2 - R1) is one
# run's instructions without the setup, divided by its flows and by its bytes.
# Usage: scripts/codec-instructions.sh [R1 R2]   (needs valgrind; EXE=path skips the build and
# counts that bench executable instead)
set -eu
r1=${1:-2}
r2=${2:-12}
cd "$(dirname "$0")/.."
exe=${EXE:-$(cargo bench -p ofnode-proto --bench codec --no-run 2>&1 |
    sed -n 's/.*Executable.*(\(.*\)).*/\1/p' | tail -n 1)}
[ -x "$exe" ] || { echo "bench executable not found" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
count() { # workload runs -> instructions (and the driver's line in $tmp/line)
    valgrind --tool=callgrind --callgrind-out-file="$tmp/out" "$exe" --instructions "$1" "$2" \
        >"$tmp/line" 2>"$tmp/err"
    sed -n 's/.*Collected : \([0-9]*\).*/\1/p' "$tmp/err"
}
printf '%-12s %8s %8s %14s %14s\n' workload flows bytes instr/flow instr/byte
for w in pod_encode conj_encode pod_decode ct_decode ct_decode_1000; do
    i1=$(count "$w" "$r1")
    i2=$(count "$w" "$r2")
    flows=$(sed -n 's/.* runs of \([0-9]*\) flows.*/\1/p' "$tmp/line")
    bytes=$(sed -n 's/.* flows, \([0-9]*\) bytes.*/\1/p' "$tmp/line")
    awk -v w="$w" -v i1="$i1" -v i2="$i2" -v r1="$r1" -v r2="$r2" -v f="$flows" -v b="$bytes" \
        'BEGIN { run = (i2 - i1) / (r2 - r1); printf "%-12s %8d %8d %14.0f %14.2f\n", w, f, b, run / f, run / b }'
done
