#!/bin/bash
# The issue 22 A/B runs (the build before the issue against this one) and the UDT run, one
# after another; needs root, haul netem, the Globus programs, and the old build in B:
#   git worktree add /tmp/haul-before 90e68c6 && (cd /tmp/haul-before && cargo build --release -p haul)
#   cargo build --release -p haul -p haul-bench && bench/issue22-ab.sh
cd "$(dirname "$0")/.."
B=${B:-/tmp/haul-before/target/release}
A=$PWD/target/release
run() { echo "=== $(date -u +%H:%M:%S) $*"; "$@"; echo "=== rc=$?"; }
run ./target/release/haul-bench run bench/scenarios/gridftp-mem2mem-ab.toml --var before=$B --var after=$A
run ./target/release/haul-bench run bench/scenarios/gridftp-smallfiles-tmpfs-ab.toml --var before=$B --var after=$A
run ./target/release/haul-bench run bench/scenarios/cp-onefile-latency-ab.toml --var before=$B --var after=$A
run flock /tmp/netem-bench.lock ./target/release/haul-bench run bench/scenarios/cp-udt-netem.toml --netem-prefix hcu-
run flock /tmp/netem-bench.lock ./target/release/haul-bench run bench/scenarios/plut-lfn-mem-ab.toml --netem-prefix hpa- --var before=$B --var after=$A
run flock /tmp/netem-bench.lock ./target/release/haul-bench run bench/scenarios/tune-mixed-ab.toml --netem-prefix htm- --var prev=$B/haul
echo "=== ALL DONE $(date -u +%H:%M:%S)"
