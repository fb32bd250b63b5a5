#!/usr/bin/env bash
# The WAN study of the split-TCP overlay thesis (seed 002, §4.2 and §5.3-5.4) on haul's WAN
# emulator (`haul netem`), issue 25: many hosts, three relays, links that differ, a history of
# passive measurements built by transfers arriving at random, then the route chooser
# (`haul route`) run per host pair, and every predicted split checked against direct, back to
# back. Also leaves every node's history database behind as a predictor-accuracy corpus.
# Needs root (network namespaces).
#
#   bench/wan-study.sh                            # full size (HIST_N=360, EVAL_ROUNDS=3)
#   HIST_N=40 EVAL_ROUNDS=1 EVAL_PAIRS=8 bench/wan-study.sh   # a smoke run
#
# Topology (`haul netem up FILE`; written to OUT/topology.toml): a star around the core router
# x, which runs nothing but forwarding. End hosts a..f and relays r1..r3 each hang off x on one
# access link, so each has exactly one address (10.78.I.1 for link I) and the servers name every
# peer by one address. Direct a -> c crosses a-x and x-c (RTTs add, losses compound); through a
# relay r the legs are a-x-r and r-x-c, each with about one access link's RTT and loss.
#   a   40 ms  100 Mb/s  loss 0.05 %
#   b   70 ms  200 Mb/s  loss 0.02 %  Pareto cross traffic 24 sources each way (~30 % load)
#   c   25 ms  100 Mb/s  loss 0.1 %   Pareto cross traffic 16 sources each way (~40 % load)
#   d    5 ms   50 Mb/s  clean        (short and rate-limited: splitting cannot help)
#   e   10 ms  200 Mb/s  loss 0.01 %  small TCP buffers: tcp_rmem/tcp_wmem max 256 KiB
#   f   60 ms  150 Mb/s  loss 0.01 %  cross 20 sources f -> x (~33 %); the transient bad path
#   r1   2 ms  200 Mb/s  clean        relay
#   r2   4 ms  200 Mb/s  cross 20 sources each way (~25 %)   relay
#   r3   6 ms  100 Mb/s  loss 0.01 %  relay
# Every namespace: CUBIC, tcp_no_metrics_save=1, tcp_rmem/tcp_wmem max RMEM_MAX (64 MiB) except
# the small-buffer host (SMALL_BUF, 256 KiB).
#
# Every node but x runs `haul serve --anonymous --history DB` over its own random files
# (SIZES, in DATA/NODE); the relays also `--relay-allow 10.78.0.0/16 --relay-anonymous
# --relay-parallelism P`. Every transfer is a download made by its destination, one file into
# /dev/null (memory to memory), with the destination's own history (the same DB its server
# writes: `kind = cp` for its copies, `kind = serve` for what it served):
#   DST: haul cp -q --json -c 1 -p P --history DB_DST ftp://SRC:2811/F /dev/null
# Phases:
#   history  HIST_N transfers between random ordered pairs of all nine nodes (hosts and relays,
#            so the legs get measured too): the pairs in shuffled rounds of all 72, so every
#            pair gets HIST_N/72 of them; exponential gaps between starts (mean HIST_GAP_S),
#            at most HIST_INFLIGHT at once. Between transfers BAD_FROM and BAD_TO (% of HIST_N)
#            the link BAD_LINK turns bad (`haul netem set BAD_LINK BAD_SET`), then is restored.
#   eval     EVAL_ROUNDS rounds; each takes the 30 ordered host pairs (or EVAL_PAIRS of them) in
#            random order and runs, at the destination,
#              haul route ftp://SRC:2811/F /dev/null --relays R1,R2,R3 --threshold 0 --json
#            and, when it chooses relays, the split (`haul cp --route THOSE`) and direct back to
#            back, alternating which goes first, each with the same file. These copies enter the
#            histories too, as in the thesis.
# Goodput = bytes * 8 / (command start to exit), the thesis's metric.
# Results in OUT (bench/results/wan-study-STAMP): runs.csv (every transfer and route query),
# routes/*.json, runs/*.{out,err}, netem-stats.jsonl (every STATS_EVERY s and at each phase
# change), servers/*.log, history/NODE.sqlite (the corpus), README.md, summary.{md,csv}
# (bench/wan-study-summary.py).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
SRC_HAUL=${SRC_HAUL:-/work/main/target/release/haul}
BIN=${BIN:-/tmp/wan-bin}                       # a copy of the binary, so rebuilds cannot change it
HAUL=$BIN/haul
PREFIX=${PREFIX:-hws-}
STATE=${STATE:-/run/haul-netem-hws}
DATA=${DATA:-/dev/shm/wan-study}
CC=${CC:-cubic}
RMEM_MAX=${RMEM_MAX:-67108864}
SMALL_HOST=${SMALL_HOST:-e}
SMALL_BUF=${SMALL_BUF:-262144}
P=${P:-1}                                      # TCP streams per leg (the thesis: one)
SIZES=${SIZES:-8M 16M 24M 32M}
HIST_N=${HIST_N:-360}
HIST_GAP_S=${HIST_GAP_S:-2}
HIST_INFLIGHT=${HIST_INFLIGHT:-2}
BAD_LINK=${BAD_LINK:-f-x}
BAD_SET=${BAD_SET:---loss 0.3%}
BAD_RESTORE=${BAD_RESTORE:---loss 0.01%}
BAD_FROM=${BAD_FROM:-50}
BAD_TO=${BAD_TO:-65}
EVAL_ROUNDS=${EVAL_ROUNDS:-3}
EVAL_PAIRS=${EVAL_PAIRS:-0}                    # 0: all 30 ordered host pairs per round
EVAL_SPLIT=${EVAL_SPLIT:-explicit}             # explicit: --route R1[,R2]; auto: --route auto
GAP_S=${GAP_S:-1}
TIMEOUT_S=${TIMEOUT_S:-180}
ROUTE_TIMEOUT_S=${ROUTE_TIMEOUT_S:-60}
STATS_EVERY=${STATS_EVERY:-30}
DEADLINE_S=${DEADLINE_S:-0}                    # >0: start no evaluation query this long after the start
NICE=${NICE:--10}                              # ahead of compilers on a shared host
SEED=${SEED:-25}
LOCK=${LOCK:-/tmp/netem-bench.lock}
TS=$(date -u +%Y%m%dT%H%M%SZ)
OUT=${OUT:-$here/results/wan-study-$TS}

HOSTS="a b c d e f"
RELAYS="r1 r2 r3"
NODES="$HOSTS $RELAYS"

topology() {
    cat <<'EOF'
# WAN study (issue 25): a star around the core router x. Link I gets 10.78.I.0/24, its host
# end .1. Cross traffic: Pareto on/off sources of 5 Mb/s, half the time on (N x 2.5 Mb/s).
[[link]]
a = "a"
b = "x"
rtt = "40ms"
rate = "100mbit"
loss = "0.05%"

[[link]]
a = "b"
b = "x"
rtt = "70ms"
rate = "200mbit"
loss = "0.02%"
cross_sources = 24

[[link]]
a = "c"
b = "x"
rtt = "25ms"
rate = "100mbit"
loss = "0.1%"
cross_sources = 16

[[link]]
a = "d"
b = "x"
rtt = "5ms"
rate = "50mbit"

[[link]]
a = "e"
b = "x"
rtt = "10ms"
rate = "200mbit"
loss = "0.01%"

[[link]]
a = "f"
b = "x"
rtt = "60ms"
rate = "150mbit"
loss = "0.01%"
[link.ab]
cross_sources = 20

[[link]]
a = "r1"
b = "x"
rtt = "2ms"
rate = "200mbit"

[[link]]
a = "r2"
b = "x"
rtt = "4ms"
rate = "200mbit"
cross_sources = 20

[[link]]
a = "r3"
b = "x"
rtt = "6ms"
rate = "100mbit"
loss = "0.01%"
EOF
}

[ "$(id -u)" = 0 ] || { echo "needs root (network namespaces)" >&2; exit 2; }
[ -x "$SRC_HAUL" ] || { echo "missing $SRC_HAUL: cargo build --release -p haul" >&2; exit 2; }
mkdir -p "$OUT"/{runs,routes,servers,db,history} "$DATA"
log() { echo "[$(date -u +%H:%M:%S)] $*" | tee -a "$OUT/driver.log" >&2; }
netem() { "$HAUL" netem --state "$STATE" "$@" </dev/null; }
now() { date +%s.%N; }
bytes_of() { numfmt --from=iec "$1"; }

exec 9>"$LOCK"
log "waiting for $LOCK"
flock 9
log "holding $LOCK; results in $OUT"
# The binary under test, copied afresh under the lock (a copy left by an earlier run was once
# reused: wan-study-20261202T111905Z ran the build of 2026-12-02 05:34, not its git head).
mkdir -p "$BIN"; cp "$SRC_HAUL" "$HAUL.new" && mv "$HAUL.new" "$HAUL"
renice -n "$NICE" -p $$ >/dev/null   # inherited by everything started from here on

pids=()          # process-group leaders we started (servers, samplers)
# The corpus: every node's history, checkpointed and copied whole (after the servers stopped).
save_corpus() {
    local n
    [ -d "$OUT/db" ] || return 0
    for n in $NODES; do
        [ -e "$OUT/db/$n.sqlite" ] || continue
        sqlite3 "$OUT/db/$n.sqlite" "PRAGMA wal_checkpoint(TRUNCATE);" >/dev/null
        sqlite3 "$OUT/db/$n.sqlite" ".backup '$OUT/history/$n.sqlite'"
        echo "$n: $(sqlite3 "$OUT/history/$n.sqlite" "select kind || '=' || count(*) from transfers group by kind" | tr '\n' ' ')"
    done | tee "$OUT/history/counts.txt" >&2
    rm -rf "$OUT/db"
}
cleanup() {
    local rc=$?
    set +e
    for p in "${pids[@]}"; do kill -- "-$p" 2>/dev/null || kill "$p" 2>/dev/null; done
    for p in "${pids[@]}"; do wait "$p" 2>/dev/null; done
    pids=()
    save_corpus
    netem down --prefix "$PREFIX" >>"$OUT/driver.log" 2>&1
    log "testbed $PREFIX down (exit $rc)"
    exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM
if [ -e "$STATE/state.json" ] || ls /run/netns/"$PREFIX"* >/dev/null 2>&1; then
    log "removing a leftover $PREFIX testbed"; netem down --prefix "$PREFIX" >>"$OUT/driver.log" 2>&1 || true
fi

T0=$(date +%s)
cat >"$OUT/config.json" <<EOF
{"started_utc":"$TS","hosts":"$HOSTS","relays":"$RELAYS","streams":$P,"sizes":"$SIZES",
 "hist_n":$HIST_N,"hist_gap_s":$HIST_GAP_S,"hist_inflight":$HIST_INFLIGHT,
 "bad_link":"$BAD_LINK","bad_set":"$BAD_SET","bad_restore":"$BAD_RESTORE","bad_from_pct":$BAD_FROM,"bad_to_pct":$BAD_TO,
 "eval_rounds":$EVAL_ROUNDS,"eval_pairs":$EVAL_PAIRS,"eval_split":"$EVAL_SPLIT","gap_s":$GAP_S,
 "timeout_s":$TIMEOUT_S,"congestion":"$CC","rmem_max":$RMEM_MAX,"small_host":"$SMALL_HOST","small_buf":$SMALL_BUF,
 "deadline_s":$DEADLINE_S,"nice":$NICE,"seed":$SEED,"haul":"$SRC_HAUL","haul_copy":"$HAUL","haul_sha256":"$(sha256sum "$HAUL" | cut -c1-16)",
 "haul_version":"$("$HAUL" --version 2>&1 | head -1)",
 "git_head":"$(git -C "$here/.." rev-parse --short HEAD 2>/dev/null)","kernel":"$(uname -r)","nproc":$(nproc)}
EOF

# ---- testbed --------------------------------------------------------------------------------
topology >"$OUT/topology.toml"
netem up "$OUT/topology.toml" --prefix "$PREFIX" | tee "$OUT/netem-up.txt" >&2
declare -A ADDR NAME
for n in $NODES x; do ADDR[$n]=$(netem addr "$n"); done
for n in $NODES; do NAME[${ADDR[$n]}]=$n; done
for n in $NODES x; do
    m=$RMEM_MAX; [ "$n" = "$SMALL_HOST" ] && m=$SMALL_BUF
    ip netns exec "$PREFIX$n" sysctl -qw "net.ipv4.tcp_congestion_control=$CC" \
        "net.ipv4.tcp_rmem=4096 131072 $m" "net.ipv4.tcp_wmem=4096 16384 $m" \
        net.ipv4.tcp_no_metrics_save=1
done
{ for n in $NODES x; do echo "$n ${ADDR[$n]}: $(ip netns exec "$PREFIX$n" sysctl -n net.ipv4.tcp_congestion_control) rmem $(ip netns exec "$PREFIX$n" sysctl -n net.ipv4.tcp_rmem) wmem $(ip netns exec "$PREFIX$n" sysctl -n net.ipv4.tcp_wmem)"; done; } >"$OUT/sysctl.txt"
for n in $NODES; do echo "$n,${ADDR[$n]}"; done >"$OUT/addresses.csv"

# ---- data -----------------------------------------------------------------------------------
for n in $NODES; do
    mkdir -p "$DATA/$n"
    for s in $SIZES; do
        b=$(bytes_of "$s"); f="$DATA/$n/f$s.bin"
        [ "$(stat -c %s "$f" 2>/dev/null || echo 0)" = "$b" ] || { head -c "$b" /dev/urandom >"$f.tmp" && mv "$f.tmp" "$f"; }
    done
done
chmod -R a+rX "$DATA"

# ---- servers --------------------------------------------------------------------------------
start_in() { # node log cmd...
    local node=$1 logf=$2; shift 2
    setsid ip netns exec "$PREFIX$node" "$@" >"$logf" 2>&1 &
    LAST_PID=$!
    pids+=("$LAST_PID")
}
wait_tcp() { # from addr port
    for _ in $(seq 200); do
        ip netns exec "$PREFIX$1" bash -c "exec 3<>/dev/tcp/$2/$3" 2>/dev/null && return 0
        sleep 0.1
    done
    log "nothing listens on $2:$3 (seen from $1)"; return 1
}
declare -A SPID
RELAY_LIST=
for n in $NODES; do
    extra=()
    case " $RELAYS " in *" $n "*)
        extra=(--relay-allow 10.78.0.0/16 --relay-anonymous --relay-parallelism "$P")
        RELAY_LIST+="${RELAY_LIST:+,}${ADDR[$n]}:2811" ;;
    esac
    start_in "$n" "$OUT/servers/$n.log" env HAUL_LOG=info,haul_overlay=info "$HAUL" serve --root "$DATA/$n" \
        --listen "${ADDR[$n]}:2811" --anonymous --history "$OUT/db/$n.sqlite" "${extra[@]}"
    SPID[$n]=$LAST_PID
done
for n in $NODES; do wait_tcp d "${ADDR[$n]}" 2811; done
DPID=$(cat "$STATE/daemon.pid")
log "servers up; relays $RELAY_LIST; emulator pid $DPID"

# netem counters every STATS_EVERY s (one JSON line each: {"t":..,"tag":..,"links":[..]})
stats_line() { # tag
    printf '{"t":%s,"tag":"%s","links":%s}\n' "$(now)" "$1" "$(netem stats --json | jq -c .)" >>"$OUT/netem-stats.jsonl"
}
( while :; do stats_line periodic; sleep "$STATS_EVERY"; done ) &
pids+=("$!")
stats_line start

echo "phase,idx,round,pair,order,t_start,src,dst,route,file,bytes,rc,wall_s,goodput_mbps,haul_mbps,inflight,bad,pred_direct_mbps,pred_split_mbps,pred_gain,reason" >"$OUT/runs.csv"

# One copy at DST from SRC, optionally through relays (comma-separated names); appends its row.
# copy PHASE IDX ROUND PAIR ORDER SRC DST RELAYS SIZE INFLIGHT BAD PRED_D PRED_S GAIN
copy() {
    local phase=$1 idx=$2 round=$3 pair=$4 order=$5 src=$6 dst=$7 relays=$8 size=$9
    local inflight=${10} bad=${11} pd=${12} ps=${13} gain=${14}
    local bytes f name route rc s0 s1 hm rl=() r
    bytes=$(bytes_of "$size"); f="f$size.bin"
    route=direct
    if [ -n "$relays" ]; then
        route=${relays//,/+}
        for r in ${relays//,/ }; do rl+=("${ADDR[$r]}:2811"); done
    fi
    name="$phase-$idx-$src-$dst-$route"
    local cmd=("$HAUL" cp -q --json -c 1 -p "$P" --history "$OUT/db/$dst.sqlite")
    if [ -n "$relays" ]; then
        if [ "$EVAL_SPLIT" = auto ]; then
            cmd+=(--route auto --relays "$RELAY_LIST" --threshold 0 --relay-streams "$P")
        else
            cmd+=(--route "$(IFS=,; echo "${rl[*]}")" --relay-streams "$P")
        fi
    fi
    cmd+=("ftp://${ADDR[$src]}:2811/$f" /dev/null)
    echo "${cmd[*]}" >"$OUT/runs/$name.cmd"
    rc=0
    s0=$(now)
    ip netns exec "$PREFIX$dst" timeout "$TIMEOUT_S" "${cmd[@]}" </dev/null >"$OUT/runs/$name.out" 2>"$OUT/runs/$name.err" || rc=$?
    s1=$(now)
    hm=$(jq -r '(.bytes // .summary.bytes // empty) as $b | (.seconds // .duration_s // .summary.seconds // empty) as $s | if $b and $s and $s > 0 then ($b * 8 / $s / 1e6) else empty end' "$OUT/runs/$name.out" 2>/dev/null | head -1 || true)
    awk -v ph="$phase" -v i="$idx" -v rd="$round" -v pr="$pair" -v o="$order" -v s0="$s0" -v s1="$s1" \
        -v src="$src" -v dst="$dst" -v route="$route" -v f="$f" -v n="$bytes" -v rc="$rc" \
        -v hm="$hm" -v inf="$inflight" -v bad="$bad" -v pd="$pd" -v ps="$ps" -v g="$gain" \
        'BEGIN { w = s1 - s0; printf "%s,%s,%s,%s,%s,%.3f,%s,%s,%s,%s,%s,%s,%.3f,%.3f,%s,%s,%s,%s,%s,%s,\n",
            ph, i, rd, pr, o, s0, src, dst, route, f, n, rc, w, (rc == 0 ? n * 8 / w / 1e6 : 0), hm, inf, bad, pd, ps, g }' >>"$OUT/runs.csv"
    if [ "$rc" != 0 ]; then
        log "  $name: exit $rc: $(tail -c 300 "$OUT/runs/$name.err" | tr '\n' ' ')"
    fi
}

servers_alive() {
    local n
    for n in $NODES; do kill -0 "${SPID[$n]}" 2>/dev/null || { log "the server on $n died"; return 1; }; done
}

# ---- schedules (seeded) ----------------------------------------------------------------------
python3 - "$SEED" "$HIST_N" "$HIST_GAP_S" "$EVAL_ROUNDS" "$EVAL_PAIRS" "$NODES" "$HOSTS" "$SIZES" "$OUT" <<'PY'
import random, sys
seed, hist_n, gap, rounds, npairs = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
nodes, hosts, sizes, out = sys.argv[6].split(), sys.argv[7].split(), sys.argv[8].split(), sys.argv[9]
rng = random.Random(seed)
pairs = [(s, d) for s in nodes for d in nodes if s != d]
seq = []
while len(seq) < hist_n:
    r = pairs[:]
    rng.shuffle(r)
    seq += r
with open(f"{out}/schedule-history.csv", "w") as fh:
    for i, (s, d) in enumerate(seq[:hist_n]):
        fh.write(f"{i},{s},{d},{rng.choice(sizes)},{rng.expovariate(1 / gap):.2f}\n")
hp = [(s, d) for s in hosts for d in hosts if s != d]
k = 0
with open(f"{out}/schedule-eval.csv", "w") as fh:
    for rd in range(1, rounds + 1):
        r = hp[:]
        rng.shuffle(r)
        if npairs > 0:
            r = r[:npairs]
        for s, d in r:
            fh.write(f"{rd},{s},{d},{rng.choice(sizes)},{'split' if k % 2 == 0 else 'direct'}\n")
            k += 1
PY

# ---- history phase ---------------------------------------------------------------------------
bad_from=$(( HIST_N * BAD_FROM / 100 )); bad_to=$(( HIST_N * BAD_TO / 100 ))
bad=0
jobs_running=()
prune() {
    local keep=() p
    for p in "${jobs_running[@]}"; do kill -0 "$p" 2>/dev/null && keep+=("$p") || wait "$p" 2>/dev/null || true; done
    jobs_running=("${keep[@]}")
}
log "== history: $HIST_N transfers, mean gap ${HIST_GAP_S} s, at most $HIST_INFLIGHT at once; $BAD_LINK bad ($BAD_SET) from #$bad_from to #$bad_to"
TH0=$(date +%s)
while IFS=, read -r i src dst size gap; do
    sleep "$gap"
    if [ "$i" = "$bad_from" ] && [ "$bad_to" -gt "$bad_from" ]; then
        # shellcheck disable=SC2086
        netem set "$BAD_LINK" $BAD_SET >>"$OUT/driver.log" 2>&1; bad=1
        echo "bad_start,$(now),$i,$BAD_LINK,$BAD_SET" >>"$OUT/events.csv"; stats_line bad_start
        log "history #$i: $BAD_LINK turns bad ($BAD_SET)"
    fi
    if [ "$i" = "$bad_to" ] && [ "$bad" = 1 ]; then
        # shellcheck disable=SC2086
        netem set "$BAD_LINK" $BAD_RESTORE >>"$OUT/driver.log" 2>&1; bad=0
        echo "bad_end,$(now),$i,$BAD_LINK,$BAD_RESTORE" >>"$OUT/events.csv"; stats_line bad_end
        log "history #$i: $BAD_LINK restored ($BAD_RESTORE)"
    fi
    while prune; [ "${#jobs_running[@]}" -ge "$HIST_INFLIGHT" ]; do sleep 0.2; done
    copy history "$i" 0 "$src-$dst" - "$src" "$dst" "" "$size" $(( ${#jobs_running[@]} + 1 )) "$bad" "" "" "" &
    jobs_running+=("$!")
    if [ $(( i % 20 )) = 0 ]; then
        servers_alive || exit 1
        log "history #$i started ($(( $(date +%s) - TH0 )) s); $(grep -c '^history' "$OUT/runs.csv") done, $(awk -F, '$1 == "history" && $12 != 0' "$OUT/runs.csv" | wc -l) failed"
    fi
done <"$OUT/schedule-history.csv"
for p in "${jobs_running[@]}"; do wait "$p" 2>/dev/null || true; done
if [ "$bad" = 1 ]; then
    # shellcheck disable=SC2086
    netem set "$BAD_LINK" $BAD_RESTORE >>"$OUT/driver.log" 2>&1
    echo "bad_end,$(now),end,$BAD_LINK,$BAD_RESTORE" >>"$OUT/events.csv"; stats_line bad_end
fi
stats_line history_end
echo "history_end,$(now),,," >>"$OUT/events.csv"
log "history done in $(( $(date +%s) - TH0 )) s: $(awk -F, '$1 == "history" && $12 == 0' "$OUT/runs.csv" | wc -l) ok, $(awk -F, '$1 == "history" && $12 != 0' "$OUT/runs.csv" | wc -l) failed"
servers_alive || exit 1
sleep 11   # the servers recompute their SITE BTC answers at most every 10 s

# ---- evaluation phase -----------------------------------------------------------------------
log "== evaluation: $EVAL_ROUNDS rounds"
TE0=$(date +%s)
k=0
while IFS=, read -r rd src dst size first; do
    k=$((k + 1))
    if [ "$DEADLINE_S" -gt 0 ] && [ $(( $(date +%s) - T0 )) -ge "$DEADLINE_S" ]; then
        log "deadline (${DEADLINE_S} s after the start): no more evaluation queries ($k of $(wc -l <"$OUT/schedule-eval.csv") reached)"
        echo "deadline,$(now),$k,," >>"$OUT/events.csv"
        break
    fi
    rj="$OUT/routes/r$rd-$src-$dst.json"
    rc=0
    ip netns exec "$PREFIX$dst" timeout "$ROUTE_TIMEOUT_S" "$HAUL" route "ftp://${ADDR[$src]}:2811/f$size.bin" /dev/null \
        --relays "$RELAY_LIST" --threshold 0 --json --history "$OUT/db/$dst.sqlite" </dev/null >"$rj" 2>"$rj.err" || rc=$?
    if [ "$rc" != 0 ] || ! jq -e . "$rj" >/dev/null 2>&1; then
        log "eval r$rd $src->$dst: haul route failed (exit $rc): $(tail -c 300 "$rj.err" | tr '\n' ' ')"
        echo "route,$k,$rd,$src-$dst,-,$(now),$src,$dst,error,f$size.bin,0,$rc,0,0,,,0,,,,route failed" >>"$OUT/runs.csv"
        continue
    fi
    relays=$(jq -r '.relays | join(" ")' "$rj")
    names=
    for a in $relays; do names+="${names:+,}${NAME[${a%:*}]:-$a}"; done
    pd=$(jq -r 'if .direct_bps == null then "" else .direct_bps / 1e6 end' "$rj")
    ps=$(jq -r '.predicted_bps / 1e6' "$rj")
    g=$(jq -r 'if .gain == null then "" else .gain end' "$rj")
    reason=$(jq -r '.reason' "$rj" | tr ',' ';')
    echo "route,$k,$rd,$src-$dst,-,$(now),$src,$dst,$(echo "${names:-direct}" | tr , +),f$size.bin,0,0,0,0,,,0,$pd,$ps,$g,$reason" >>"$OUT/runs.csv"
    if [ -z "$names" ]; then
        log "eval r$rd $src->$dst: direct (direct ${pd:-?} Mbit/s; $reason)"
        continue
    fi
    log "eval r$rd $src->$dst: via $names, predicted ${ps} vs direct ${pd:-?} Mbit/s (gain ${g:-?}); $first first"
    if [ "$first" = split ]; then
        copy eval "$k" "$rd" "$src-$dst" 1 "$src" "$dst" "$names" "$size" 1 0 "$pd" "$ps" "$g"; sleep "$GAP_S"
        copy eval "$k" "$rd" "$src-$dst" 2 "$src" "$dst" "" "$size" 1 0 "$pd" "$ps" "$g"
    else
        copy eval "$k" "$rd" "$src-$dst" 1 "$src" "$dst" "" "$size" 1 0 "$pd" "$ps" "$g"; sleep "$GAP_S"
        copy eval "$k" "$rd" "$src-$dst" 2 "$src" "$dst" "$names" "$size" 1 0 "$pd" "$ps" "$g"
    fi
    log "  $(tail -2 "$OUT/runs.csv" | awk -F, '{ printf "%s %s s %s Mbit/s (exit %s); ", $9, $13, $14, $12 }')"
    servers_alive || exit 1
    sleep "$GAP_S"
done <"$OUT/schedule-eval.csv"
stats_line eval_end
echo "eval_end,$(now),,," >>"$OUT/events.csv"
log "evaluation done in $(( $(date +%s) - TE0 )) s"

# ---- the corpus -----------------------------------------------------------------------------
for p in "${pids[@]}"; do kill -- "-$p" 2>/dev/null || kill "$p" 2>/dev/null; done
for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
pids=()
netem stats --json >"$OUT/netem-stats-end.json"
save_corpus
log "all done in $(( $(date +%s) - T0 )) s"
python3 "$here/wan-study-summary.py" "$OUT" >"$OUT/summary.md" || log "summary failed"
