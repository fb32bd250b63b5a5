#!/usr/bin/env bash
# Re-tuning on an emulated WAN path: `haul cp -r --tune` downloads a tree of equal files while
# Pareto on/off cross traffic is switched on in the data direction (b→a) CHANGE_S seconds into
# the transfer. Static runs at fixed concurrencies, with and without that cross traffic, give the
# "old best" and the "new best". Needs root (`haul netem`).
#
#   bench/retune-netem.sh                       # defaults below; override any by environment
#   MODE=pilot PILOT="1:off 32:off 32:on" bench/retune-netem.sh   # only these static runs
#
# Steps: `haul netem up --pair` with its own prefix and state directory, CUBIC in both hosts;
# `haul serve --anonymous` in host b over DATA/src (FILES random files of FILE_SIZE, generated
# once); then REPS rounds of { one tuned run; the static grid LEVELS x {no cross, cross} }. The
# static grid's level order alternates (ascending, descending) from round to round and so does
# the order of the two conditions at each level. A tuned run: `haul cp -r --tune --sample-ms
# SAMPLE_MS --json` from host a with a fresh history file, over the first TUNED_FILES files;
# CHANGE_S s after the transfer started (the tuner's first "tuner: concurrency" log line) `haul
# netem set a-b --dir ba --cross-sources CROSS_SOURCES --cross-rate CROSS_RATE` turns the cross
# traffic on; it is turned off after the run. A static run: `haul cp -r --clusters mc -c LEVEL`
# (the same clusters, hence the same p and pipelining, as --tune uses; only the concurrency is
# fixed) over a subset sized to take about STATIC_S seconds. The destination directory is
# deleted after every run. Everything lands in OUT; the testbed is torn down on any exit.
#
# Coordination: waits until no namespace starting with WAIT_FOR exists, then holds an exclusive
# flock on LOCK for the whole measurement phase (other netem benchmarks use the same lock). Only
# the testbed's own namespaces (PREFIX*) receive traffic; binaries come from BIN (copies, so
# concurrent rebuilds of target/ do not change them mid-run).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
BIN=${BIN:-/tmp/retune-bin}                  # a copy of target/release/haul
HAUL=${HAUL:-$BIN/haul}
PREFIX=${PREFIX:-hrt-}                       # namespace prefix: hrt-a, hrt-b
STATE=${STATE:-/run/haul-netem-${PREFIX%-}}  # netem state directory of this testbed only
RTT=${RTT:-40ms}
RATE=${RATE:-1gbit}
LOSS=${LOSS:-0.01%}
MTU=${MTU:-1500}
PORT=${PORT:-5311}
CC=${CC:-cubic}                              # TCP congestion control in both hosts (host default: bbr)
DATA=${DATA:-/var/tmp/retune-data}           # src/tree (server root is src), dst (downloads)
FILES=${FILES:-1200}                         # files in the tree
FILE_SIZE=${FILE_SIZE:-8388608}              # bytes per file
TUNED_FILES=${TUNED_FILES:-820}              # files per tuned run (the first ones): ~85 s at 600-650 Mb/s
SAMPLE_MS=${SAMPLE_MS:-200}
CHANGE_S=${CHANGE_S:-40}                     # cross traffic on at this transfer time (tuned runs)
CROSS_SOURCES=${CROSS_SOURCES:-160}          # N sources x 5 Mb/s x 50% duty = 400 Mb/s on average
CROSS_RATE=${CROSS_RATE:-5mbit}
CROSS_ON=${CROSS_ON:-1.5s}
CROSS_OFF=${CROSS_OFF:-1.5s}
REPS=${REPS:-3}                              # rounds: tuned runs and static repetitions
LEVELS=${LEVELS:-1 2 4 8 16 32}              # static concurrencies
STATIC_S=${STATIC_S:-14}                     # target steady part of a static run without cross traffic
# Expected no-cross throughput per level (Mb/s), only to size the static subsets (pilot values):
# files = EXPECT x STATIC_S / FILE_SIZE + 4 x LEVEL (the draining tail: every session holds a
# batch of pp = 4 files of this size, see docs/tuning.md).
# Caveat (20261122T051953Z): on this path a new CUBIC connection overshoots in slow start and
# decays to its loss-limited rate over ~5-10 s, so the 11-51-file subsets of cc 1-4 (2-18 s runs)
# are dominated by that transient; raise STATIC_S (or EXPECT) for clean low-level numbers.
EXPECT_MBPS=${EXPECT_MBPS:-1:35 2:70 4:170 8:300 16:530 32:650}
STATIC_MIN_FILES=${STATIC_MIN_FILES:-8}
MODE=${MODE:-full}                           # full | pilot
PILOT=${PILOT:-1:off 4:off 16:off}          # MODE=pilot: static runs LEVEL:off|on, nothing else
NICE=${NICE:--10}                            # niceness of the measurement phase (netem daemon, server,
                                             # clients); the box is shared with compilers
WAIT_FOR=${WAIT_FOR:-hfp-}                   # wait until no namespace with this prefix exists
LOCK=${LOCK:-/tmp/netem-bench.lock}
MAX_WALL_S=${MAX_WALL_S:-1350}               # no new run starts after this (measurement phase)
TS=$(date -u +%Y%m%dT%H%M%SZ)
OUT=${OUT:-$here/results/retune-netem-$TS}
[ "$MODE" = pilot ] && OUT=${OUT/retune-netem-/retune-netem-pilot-}

[ -x "$HAUL" ] || { echo "missing $HAUL (build, then copy target/release/haul to $BIN)" >&2; exit 2; }
[ "$(id -u)" = 0 ] || { echo "needs root (network namespaces)" >&2; exit 2; }
mkdir -p "$OUT"/static "$OUT"/tuned
log() { echo "[$(date -u +%H:%M:%S)] $*" | tee -a "$OUT/driver.log" >&2; }
netem() { "$HAUL" netem --state "$STATE" "$@"; }
now() { date +%s.%N; }

# The tree, generated once (deterministic pseudo-random bytes, one file at a time).
SRC=$DATA/src
DST=$DATA/dst
mkdir -p "$SRC/tree"
have=$(find "$SRC/tree" -maxdepth 1 -name 'f*.bin' -size "${FILE_SIZE}c" | wc -l)
if [ "$have" -lt "$FILES" ]; then
    log "generating $FILES files of $FILE_SIZE bytes in $SRC/tree (have $have)"
    nice -n 19 python3 - "$SRC/tree" "$FILES" "$FILE_SIZE" <<'PY'
import os, random, sys
d, n, size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
for i in range(n):
    p = os.path.join(d, f"f{i:05d}.bin")
    if os.path.exists(p) and os.path.getsize(p) == size:
        continue
    rng = random.Random(20261122 * 100000 + i)
    with open(p + ".tmp", "wb") as f:
        f.write(rng.randbytes(size))
    os.rename(p + ".tmp", p)
PY
fi
# A subset directory of the first N files, as hard links (same inodes, same page cache).
subset() { # name count
    local d="$SRC/$1"
    if [ "$(find "$d" -maxdepth 1 -name 'f*.bin' 2>/dev/null | wc -l)" != "$2" ]; then
        rm -rf "$d"; mkdir -p "$d"
        find "$SRC/tree" -maxdepth 1 -name 'f*.bin' | sort | awk -v n="$2" 'NR <= n' | xargs -r ln -t "$d"
    fi
}
declare -A NFILES
for kv in $EXPECT_MBPS; do
    l=${kv%%:*}; mbps=${kv#*:}
    n=$(awk -v m="$mbps" -v s="$STATIC_S" -v f="$FILE_SIZE" -v lo="$STATIC_MIN_FILES" -v l="$l" \
        'BEGIN { n = int(m * 1e6 / 8 * s / f + 0.5) + 4 * l; if (n < lo) n = lo; print n }')
    NFILES[$l]=$n
done
PILOT_LEVELS=$(for kv in $PILOT; do echo "${kv%%:*}"; done | sort -un | tr '\n' ' ')
for l in $LEVELS $PILOT_LEVELS; do [ -n "${NFILES[$l]:-}" ] || { echo "no EXPECT_MBPS entry for level $l" >&2; exit 2; }; done
for l in $(printf '%s\n' $LEVELS $PILOT_LEVELS | sort -un); do subset "sub-$l" "${NFILES[$l]}"; done
subset tuned "$TUNED_FILES"

# Wait for the other testbed, then hold the lock for the whole measurement phase.
waited=0
while ip netns list | grep -q "^$WAIT_FOR"; do
    [ $((waited % 60)) = 0 ] && log "waiting: namespaces $WAIT_FOR* still exist"
    sleep 10; waited=$((waited + 10))
done
exec 9>"$LOCK"
log "waiting for $LOCK"
flock 9
log "holding $LOCK"
renice -n "$NICE" -p $$ >/dev/null   # inherited by everything started from here on

server_pid=
cp_pid=
cleanup() {
    local rc=$?
    set +e
    if [ -n "$cp_pid" ]; then kill "$cp_pid" 2>/dev/null; wait "$cp_pid" 2>/dev/null; fi
    if [ -n "$server_pid" ]; then kill -- "-$server_pid" 2>/dev/null || kill "$server_pid" 2>/dev/null; wait "$server_pid" 2>/dev/null; fi
    netem stats --json >"$OUT/netem-stats.json" 2>/dev/null
    netem down --prefix "$PREFIX" >>"$OUT/driver.log" 2>&1
    rm -rf "$DST"
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
static_files_json=$(for l in $(printf '%s\n' $LEVELS $PILOT_LEVELS | sort -un); do printf '"%s":%s,' "$l" "${NFILES[$l]}"; done)
cat >"$OUT/config.json" <<EOF
{"started_utc":"$TS","mode":"$MODE","rtt":"$RTT","rate":"$RATE","loss":"$LOSS","mtu":$MTU,"prefix":"$PREFIX",
 "congestion":"$CC","files":$FILES,"file_size":$FILE_SIZE,"tuned_files":$TUNED_FILES,"sample_ms":$SAMPLE_MS,
 "change_s":$CHANGE_S,"cross_sources":$CROSS_SOURCES,"cross_rate":"$CROSS_RATE","cross_on":"$CROSS_ON",
 "cross_off":"$CROSS_OFF","reps":$REPS,"levels":"$LEVELS","pilot":"$PILOT","nice":$NICE,"static_s":$STATIC_S,
 "static_files":{${static_files_json%,}},"haul":"$HAUL","haul_version":"$("$HAUL" --version 2>&1 | head -1)",
 "kernel":"$(uname -r)","nproc":$(nproc)}
EOF

log "netem up --pair --rtt $RTT --rate $RATE --loss $LOSS --mtu $MTU --prefix $PREFIX (state $STATE)"
netem up --pair --rtt "$RTT" --rate "$RATE" --loss "$LOSS" --mtu "$MTU" --prefix "$PREFIX" | tee "$OUT/netem-up.txt"
for h in a b; do netem run "$h" -- sysctl -qw "net.ipv4.tcp_congestion_control=$CC"; done
log "congestion control: a $(netem run a -- sysctl -n net.ipv4.tcp_congestion_control), b $(netem run b -- sysctl -n net.ipv4.tcp_congestion_control); tcp_rmem a: $(netem run a -- sysctl -n net.ipv4.tcp_rmem)"
ADDR_B=$(netem addr b)
URL="ftp://$ADDR_B:$PORT"

setsid "$HAUL" netem --state "$STATE" run b -- "$HAUL" serve --root "$SRC" --listen "$ADDR_B:$PORT" --anonymous >"$OUT/serve.log" 2>&1 &
server_pid=$!
up=0
for _ in $(seq 100); do
    if netem run a -- bash -c "exec 3<>/dev/tcp/$ADDR_B/$PORT" 2>/dev/null; then up=1; break; fi
    kill -0 "$server_pid" 2>/dev/null || { cat "$OUT/serve.log" >&2; exit 1; }
    sleep 0.1
done
[ "$up" = 1 ] || { log "server never came up"; exit 1; }
alive() { kill -0 "$server_pid" 2>/dev/null || { log "server died"; cat "$OUT/serve.log" >&2; exit 1; }; }
log "server $URL up (root $SRC)"

cross() { # on|off
    if [ "$1" = on ]; then
        netem set a-b --dir ba --cross-sources "$CROSS_SOURCES" --cross-rate "$CROSS_RATE" --cross-on "$CROSS_ON" --cross-off "$CROSS_OFF" >/dev/null
    else
        netem set a-b --dir ba --cross-sources 0 >/dev/null
    fi
}
fresh_dst() { rm -rf "$DST"; mkdir -p "$DST"; sync; }
budget_left() { (( $(date +%s) - t0 < MAX_WALL_S )); }

echo "name,kind,round,level,cross,rc,wall_s,launch,end,load1" >"$OUT/runs.csv"

static_run() { # round level on|off
    local name="static-c$2-$3-r$1" rc=0 s e
    fresh_dst
    cross "$3"
    netem stats --json >"$OUT/static/$name.stats0.json"
    s=$(now)
    netem run a -- "$HAUL" cp -r --clusters mc -c "$2" --sample-ms "$SAMPLE_MS" --json --history "$OUT/static/history.sqlite" \
        "$URL/sub-$2/" "$DST/" >"$OUT/static/$name.json" 2>"$OUT/static/$name.log" || rc=$?
    e=$(now)
    netem stats --json >"$OUT/static/$name.stats1.json"
    cross off
    rm -rf "$DST"
    echo "$name,static,$1,$2,$3,$rc,$(awk -v s="$s" -v e="$e" 'BEGIN { printf "%.2f", e - s }'),$s,$e,$(cut -d' ' -f1 /proc/loadavg)" >>"$OUT/runs.csv"
    log "$name: exit $rc, $(jq -r '"\(.files) files in \(.duration_s * 10 | floor / 10) s, \(.throughput_bps / 1e6 | floor) Mb/s"' "$OUT/static/$name.json" 2>/dev/null || echo 'no result'), load $(cut -d' ' -f1-3 /proc/loadavg)"
    alive
}

tuned_run() { # round
    local name="tuned-r$1" rc=0 s e start line t_change0 t_change1 hist="$OUT/tuned/history-r$1.sqlite" d
    rm -f "$hist" "$hist"-*
    fresh_dst
    cross off
    netem stats --json >"$OUT/tuned/$name.stats0.json"
    s=$(now)
    netem run a -- env HAUL_LOG=haul=info "$HAUL" cp -r --tune --sample-ms "$SAMPLE_MS" --json --history "$hist" \
        "$URL/tuned/" "$DST/" >"$OUT/tuned/$name.json" 2>"$OUT/tuned/$name.log" &
    cp_pid=$!
    line=
    for _ in $(seq 1500); do
        line=$(grep -m1 'tuner: concurrency' "$OUT/tuned/$name.log" || true)
        [ -n "$line" ] && break
        kill -0 "$cp_pid" 2>/dev/null || break
        sleep 0.02
    done
    t_change0=; t_change1=; start=
    if [ -n "$line" ]; then
        # tracing's timestamp (UTC, RFC 3339) of the tuner's first set_concurrency = transfer start.
        start=$(date -d "$(sed 's/\x1b\[[0-9;]*m//g' <<<"$line" | awk '{ print $1 }')" +%s.%N)
        d=$(awk -v a="$start" -v c="$CHANGE_S" -v n="$(now)" 'BEGIN { d = a + c - n; printf "%.3f", (d > 0 ? d : 0) }')
        sleep "$d"
        if kill -0 "$cp_pid" 2>/dev/null; then
            t_change0=$(now); cross on; t_change1=$(now)
            netem stats --json >"$OUT/tuned/$name.stats1.json"
        fi
    fi
    wait "$cp_pid" || rc=$?
    cp_pid=
    e=$(now)
    netem stats --json >"$OUT/tuned/$name.stats2.json"
    cross off
    rm -rf "$DST"
    cat >"$OUT/tuned/$name.meta.json" <<EOF
{"launch":$s,"transfer_start":${start:-null},"change_begin":${t_change0:-null},"change_end":${t_change1:-null},"end":$e,"rc":$rc}
EOF
    echo "$name,tuned,$1,,,$rc,$(awk -v s="$s" -v e="$e" 'BEGIN { printf "%.2f", e - s }'),$s,$e,$(cut -d' ' -f1 /proc/loadavg)" >>"$OUT/runs.csv"
    log "$name: exit $rc, $(jq -r '"\(.files) files in \(.duration_s * 10 | floor / 10) s, \(.throughput_bps / 1e6 | floor) Mb/s, \(.tuning | length) search steps"' "$OUT/tuned/$name.json" 2>/dev/null || echo 'no result'), change at $(awk -v a="${start:-0}" -v c="${t_change0:-0}" 'BEGIN { printf "%.2f", c - a }') s, load $(cut -d' ' -f1-3 /proc/loadavg)"
    alive
}

if [ "$MODE" = pilot ]; then
    for kv in $PILOT; do static_run 1 "${kv%%:*}" "${kv#*:}"; done
else
    for r in $(seq 1 "$REPS"); do
        budget_left || { log "wall budget ${MAX_WALL_S}s spent: round $r and later not started"; break; }
        tuned_run "$r"
        if (( r % 2 == 1 )); then order=$LEVELS; else order=$(printf '%s\n' $LEVELS | sort -rn | tr '\n' ' '); fi
        k=0
        for l in $order; do
            budget_left || { log "wall budget ${MAX_WALL_S}s spent: static runs of round $r from level $l on not started"; break; }
            if (( (k + r) % 2 == 0 )); then conds="off on"; else conds="on off"; fi
            for c in $conds; do static_run "$r" "$l" "$c"; done
            k=$((k + 1))
        done
    done
fi

log "measurements done in $(( $(date +%s) - t0 ))s"
python3 "$here/retune-netem-summary.py" "$OUT" | tee "$OUT/summary.txt" || log "summary failed"
log "results in $OUT"
