#!/usr/bin/env bash
# A/B of two haul builds' live tuner on bench/retune-netem.sh, interleaved: each round runs the
# script once per build (REPS=1: one tuned run plus the static runs at LEVELS), and the order
# of the two builds alternates from round to round, so drift on a shared host hits both alike.
# Then bench/retune-netem-ab.py pools every round's static runs for one new best and compares
# the two builds' tuned runs against it.
#
# Usage (root): bench/retune-netem-ab.sh DIR_A DIR_B [ROUNDS]
#   DIR_A, DIR_B: directories holding a `haul` binary each (copies of target/release/haul)
#   ROUNDS: default 6; each round takes about 6 min (two runs of ~3 min)
# Other settings (LEVELS, default "32"; RTT, LOSS, ...) pass through to bench/retune-netem.sh.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
[ $# -ge 2 ] || { sed -n '2,13p' "$0" >&2; exit 2; }
a=$1 b=$2 rounds=${3:-6}
export LEVELS=${LEVELS:-32}
dirs=()
log=$(mktemp)
trap 'rm -f "$log"' EXIT
for r in $(seq 1 "$rounds"); do
    if (( r % 2 == 1 )); then order="$a $b"; else order="$b $a"; fi
    for bin in $order; do
        echo "[$(date +%T)] round $r: $bin/haul" >&2
        # The script's log goes to stderr as it runs (tee to the open fd: `tee /dev/stderr`
        # would reopen, and truncate, a log file that stderr is redirected to).
        BIN=$bin REPS=1 "$here/retune-netem.sh" 2>&1 | tee "$log" >&2
        out=$(sed -n 's/.*results in \(.*\)$/\1/p' "$log" | tail -1)
        [ -n "$out" ] && dirs+=("$out")
    done
done
python3 "$here/retune-netem-ab.py" "${dirs[@]}"
