#!/usr/bin/env bash
# FastProf on an emulated WAN path: an exhaustive (block, buffer) sweep against RUNS random-start
# `haul profile tune` runs, each probe a short real profiling run. Needs root (`haul netem`).
#
#   bench/fastprof-netem.sh                 # defaults below; override any by environment
#   RUNS=5 PROBE_S=3 bench/fastprof-netem.sh
#
# Steps: `haul netem up --pair` with its own prefix and state directory; `haul profile serve` in
# host b; `haul profile sweep` over the grid (every integer iterate of FastProf's buffer axis x
# GRID_BLOCK_ITERS on its block axis, same mapping as the tuner); RUNS `haul profile tune` runs
# with seeds SEED0.. from host a; then one re-measurement of each run's chosen setting, with the
# exhaustive best's setting re-measured before every REMEASURE_EVERY of them and once at the end
# (alternating); a summary. Everything lands in OUT. The testbed is torn down on any exit.
#
# Only the testbed's own namespaces (PREFIX*) receive traffic; binaries come from BIN (copies,
# so concurrent rebuilds of target/ do not change them mid-run).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
BIN=${BIN:-/tmp/fastprof-bin}               # haul and haul-bench (copies of target/release)
HAUL=${HAUL:-$BIN/haul}
BENCH=${BENCH:-$BIN/haul-bench}
PREFIX=${PREFIX:-hfp-}                       # namespace prefix: hfp-a, hfp-b
STATE=${STATE:-/run/haul-netem-${PREFIX%-}}  # netem state directory of this testbed only
RTT=${RTT:-100ms}
RATE=${RATE:-1gbit}
LOSS=${LOSS:-0}
MTU=${MTU:-1500}
PORT=${PORT:-5301}
TRANSPORT=${TRANSPORT:-tcp}                  # tcp (udt: the sweep's `buffer` sets UDP buffers to f, FastProf to f/2)
CC=${CC:-cubic}                              # TCP congestion control (the host default is bbr)
PROBE_S=${PROBE_S:-2}                        # seconds per probe (sweep, tune and re-measure alike)
PACKET=${PACKET:-1472}                       # m; the block axis unit is m - 16
BLOCK_RANGE=${BLOCK_RANGE:-1:25}             # payloads (m - 16), FastProf's l_min:l_max
BUFFER_RANGE=${BUFFER_RANGE:-256K:8M}        # bytes (binary suffixes), FastProf's f range
BUFFER_EXP=${BUFFER_EXP:-0}                  # 1: exponential buffer axis (--buffer-exp)
GRID_BLOCK_ITERS=${GRID_BLOCK_ITERS:-1 13 25}        # block-axis iterates in the exhaustive grid
GRID_BUFFER_ITERS=${GRID_BUFFER_ITERS:-$(seq -s ' ' 1 25)}  # buffer-axis iterates (all 25)
RUNS=${RUNS:-20}
SEED0=${SEED0:-1}
MAX_PROBES=${MAX_PROBES:-60}                 # ℳ
PATIENCE=${PATIENCE:-12}                     # ℛ
GAIN_TARGET=${GAIN_TARGET:-}                 # B for 𝒞 (bits/s); empty: 𝒞 off
REMEASURE_EVERY=${REMEASURE_EVERY:-4}
GOAL=${GOAL:-0.9}                            # fraction of the exhaustive best that counts as reached
MAX_WALL_S=${MAX_WALL_S:-2700}               # no new tune run starts after this (re-measures still run)
TS=$(date -u +%Y%m%dT%H%M%SZ)
OUT=${OUT:-$here/results/fastprof-netem-$TS}

for f in "$HAUL" "$BENCH"; do [ -x "$f" ] || { echo "missing $f (build, then copy target/release/{haul,haul-bench} to $BIN)" >&2; exit 2; }; done
[ "$(id -u)" = 0 ] || { echo "needs root (network namespaces)" >&2; exit 2; }
mkdir -p "$OUT"/tune "$OUT"/remeasure "$OUT"/sweep
log() { echo "[$(date -u +%H:%M:%S)] $*" | tee -a "$OUT/driver.log" >&2; }
netem() { "$HAUL" netem --state "$STATE" "$@"; }

server_pid=
cleanup() {
    local rc=$?
    set +e
    if [ -n "$server_pid" ]; then kill -- "-$server_pid" 2>/dev/null || kill "$server_pid" 2>/dev/null; wait "$server_pid" 2>/dev/null; fi
    netem stats --json >"$OUT/netem-stats.json" 2>/dev/null
    netem down --prefix "$PREFIX" >>"$OUT/driver.log" 2>&1
    log "testbed $PREFIX down (exit $rc)"
    exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# A testbed of ours left over from a killed run: remove it (our prefix and state dir only).
if [ -e "$STATE/state.json" ] || ls /run/netns/"$PREFIX"* >/dev/null 2>&1; then
    log "removing a leftover $PREFIX testbed"; netem down --prefix "$PREFIX" >>"$OUT/driver.log" 2>&1 || true
fi

t0=$(date +%s)
theta=(--transport "$TRANSPORT" -t "$PROBE_S" -i 0 --no-history)
[ "$TRANSPORT" = tcp ] && theta+=(-C "$CC")
[ "$PACKET" != 1472 ] && theta+=(-M "$PACKET")
tune_space=(--block-range "$BLOCK_RANGE" --buffer-range "$BUFFER_RANGE")
[ "$BUFFER_EXP" = 1 ] && tune_space+=(--buffer-exp)

# The grid in real units, with the tuner's mapping (haul_tune::space::Axis::to_real):
# λ(θ') = min + (θ'-1)/24 (max-min) (or min (max/min)^((θ'-1)/24)); real = round(λ μ).
read -r GRID_BLOCKS GRID_BUFFERS < <(python3 - "$PACKET" "$BLOCK_RANGE" "$BUFFER_RANGE" "$BUFFER_EXP" "$GRID_BLOCK_ITERS" "$GRID_BUFFER_ITERS" <<'PY'
import math, sys
packet, brange, frange, fexp, bits, fits = sys.argv[1:]
MIB = 1048576.0
def size(s):
    s = s.strip(); mult = {"k": 1024, "m": MIB, "g": MIB * 1024, "t": MIB * MIB}
    return float(s[:-1]) * mult[s[-1].lower()] if s[-1].lower() in mult else float(s)
def lam(it, lo, hi, exp):
    u = (it - 1.0) / 24.0
    return lo * (hi / lo) ** u if exp else u * (hi - lo) + lo
def real(x): return int(math.floor(x + 0.5))
bl, bh = (float(v) for v in brange.split(":"))
fl, fh = (size(v) / MIB for v in frange.split(":"))
mu = int(packet) - 16
blocks = [real(lam(float(i), bl, bh, False) * mu) for i in bits.split()]
bufs = [real(lam(float(i), fl, fh, fexp == "1") * MIB) for i in fits.split()]
print(",".join(map(str, blocks)), ",".join(map(str, bufs)))
PY
)

cat >"$OUT/config.json" <<EOF
{"started_utc":"$TS","rtt":"$RTT","rate":"$RATE","loss":"$LOSS","mtu":$MTU,"prefix":"$PREFIX","transport":"$TRANSPORT",
 "congestion":"$CC","probe_s":$PROBE_S,"packet":$PACKET,"block_range_payloads":"$BLOCK_RANGE","buffer_range":"$BUFFER_RANGE",
 "buffer_exp":$BUFFER_EXP,"grid_block_iterates":"$GRID_BLOCK_ITERS","grid_buffer_iterates":"$GRID_BUFFER_ITERS",
 "grid_blocks":"$GRID_BLOCKS","grid_buffers":"$GRID_BUFFERS","runs":$RUNS,"seed0":$SEED0,"max_probes":$MAX_PROBES,
 "patience":$PATIENCE,"gain_target":"$GAIN_TARGET","remeasure_every":$REMEASURE_EVERY,"goal":$GOAL,
 "haul":"$HAUL","haul_version":"$("$HAUL" --version 2>&1 | head -1)","kernel":"$(uname -r)",
 "net_core_rmem_max":$(cat /proc/sys/net/core/rmem_max),"net_core_wmem_max":$(cat /proc/sys/net/core/wmem_max),"nproc":$(nproc)}
EOF

log "netem up --pair --rtt $RTT --rate $RATE --loss $LOSS --mtu $MTU --prefix $PREFIX (state $STATE)"
netem up --pair --rtt "$RTT" --rate "$RATE" --loss "$LOSS" --mtu "$MTU" --prefix "$PREFIX" | tee "$OUT/netem-up.txt"
ADDR_B=$(netem addr b)
SERVER="$ADDR_B:$PORT"

setsid "$HAUL" netem --state "$STATE" run b -- "$HAUL" profile serve --listen "$SERVER" >"$OUT/serve.log" 2>&1 &
server_pid=$!
for _ in $(seq 100); do
    netem run a -- "$BENCH" probe-tcp "$SERVER" && break
    kill -0 "$server_pid" 2>/dev/null || { cat "$OUT/serve.log" >&2; exit 1; }
    sleep 0.1
done
netem run a -- "$BENCH" probe-tcp "$SERVER" || { log "server never came up"; exit 1; }
alive() { kill -0 "$server_pid" 2>/dev/null || { log "server died"; cat "$OUT/serve.log" >&2; exit 1; }; }
log "server $SERVER up; grid blocks {$GRID_BLOCKS} x buffers {$GRID_BUFFERS}"

# 1. Exhaustive sweep (one probe per grid point).
ncells=$(( $(tr ',' '\n' <<<"$GRID_BLOCKS" | wc -l) * $(tr ',' '\n' <<<"$GRID_BUFFERS" | wc -l) ))
log "sweep: $ncells points x ${PROBE_S}s"
netem run a -- "$HAUL" profile sweep "$SERVER" "${theta[@]}" --vary "block=$GRID_BLOCKS" --vary "buffer=$GRID_BUFFERS" \
    --out "$OUT/sweep" --name exhaustive 2>"$OUT/sweep/sweep.log" >/dev/null
alive
read -r BEST_BLOCK BEST_BUFFER BEST_BPS < <(awk -F, 'NR > 1 && $NF == "" && $5 + 0 > best { best = $5 + 0; l = $1; f = $2 } END { printf "%d %d %.0f\n", l, f, best }' "$OUT/sweep/exhaustive.csv")
[ "$BEST_BLOCK" != 0 ] || { log "no grid point succeeded (see $OUT/sweep/)"; exit 1; }
log "sweep done in $(( $(date +%s) - t0 ))s: best block $BEST_BLOCK buffer $BEST_BUFFER: $(awk -v b="$BEST_BPS" 'BEGIN { printf "%.1f Mbit/s", b / 1e6 }')"

# 2. RUNS random-start FastProf runs.
: >"$OUT/tune/runs.txt"
for i in $(seq 1 "$RUNS"); do
    if (( $(date +%s) - t0 > MAX_WALL_S )); then log "wall budget ${MAX_WALL_S}s spent: run $i and later not started"; break; fi
    seed=$(( SEED0 + i - 1 )); n=$(printf %02d "$i")
    extra=(); [ -n "$GAIN_TARGET" ] && extra=(--target "$GAIN_TARGET")
    s=$(date +%s.%N)
    rc=0
    netem run a -- "$HAUL" profile tune "$SERVER" "${theta[@]}" "${tune_space[@]}" --max-probes "$MAX_PROBES" \
        --patience "$PATIENCE" --seed "$seed" "${extra[@]}" --json >"$OUT/tune/run-$n.json" 2>"$OUT/tune/run-$n.log" || rc=$?
    wall=$(awk -v s="$s" -v e="$(date +%s.%N)" 'BEGIN { printf "%.1f", e - s }')
    echo "$i $seed $rc $wall" >>"$OUT/tune/runs.txt"
    log "tune run $i (seed $seed): exit $rc, ${wall}s, load $(cut -d" " -f1-3 /proc/loadavg), $(jq -r '"\(.trace.probes | length) probes, best \(.best.y / 1e6 | floor) Mbit/s at block \(.best_params.block) buffer \(.best_params.buffer), stop \(.trace.stop)"' "$OUT/tune/run-$n.json" 2>/dev/null || echo 'no result')"
    alive
done

# 3. Re-measure: each run's chosen setting once; the exhaustive best's setting before every
#    REMEASURE_EVERY runs' settings and once at the end.
remeasure() { # label block buffer
    local r=0
    netem run a -- "$HAUL" profile run "$SERVER" "${theta[@]}" -l "$2" -w "$3" --json >"$OUT/remeasure/$1.json" 2>"$OUT/remeasure/$1.log" || r=$?
    echo "$1,$2,$3,$(jq -r '.aggregate_bps // empty' "$OUT/remeasure/$1.json" 2>/dev/null),$r" >>"$OUT/remeasure.csv"
}
echo "label,block,buffer,aggregate_bps,exit" >"$OUT/remeasure.csv"
k=0; e=0
for f in "$OUT"/tune/run-*.json; do
    n=$(basename "$f" .json); n=${n#run-}
    if (( k % REMEASURE_EVERY == 0 )); then e=$((e + 1)); remeasure "exhaustive-$e" "$BEST_BLOCK" "$BEST_BUFFER"; fi
    read -r l b < <(jq -r '"\(.best_params.block // 0) \(.best_params.buffer // 0)"' "$f" 2>/dev/null || echo "0 0")
    if [ "$l" != 0 ]; then remeasure "run-$n" "$l" "$b"; fi
    k=$((k + 1))
done
e=$((e + 1)); remeasure "exhaustive-$e" "$BEST_BLOCK" "$BEST_BUFFER"
log "re-measures done"

# 4. Summary.
python3 "$here/fastprof-netem-summary.py" "$OUT" | tee "$OUT/summary.txt"
log "total $(( $(date +%s) - t0 ))s; results in $OUT"
