#!/usr/bin/env bash
# Builds the estimator replay corpus (docs/tuning.md, "Early-stopping estimators"): real `haul cp`
# memory-to-memory transfers recording 100 ms throughput samples into one history database, on two
# emulated paths and on loopback. Needs root (`haul netem`). Replay it with
#   haul history replay --history bench/results/replay-corpus-20261122.sqlite
#
#   BIN=/tmp/replay-bin DB=/tmp/replay-corpus.sqlite BATCH=1 bench/results/replay-corpus-20261122.sh
#   BIN=/tmp/replay-bin DB=/tmp/replay-corpus.sqlite MAX_WALL_S=330 BATCH=2 bench/results/replay-corpus-20261122.sh
#
# Those are the invocations that recorded the corpus (batch 1: 480 s, batch 2: 176 s). In that run
# the servers were stopped by the pid of a wrapper, which left them running (they were killed by
# hand afterwards); batch 2's loopback transfer (record 36) therefore went to batch 1's loopback
# server, the same binary. The script now ends the server's process group.
#
# Each transfer's length is chosen from the previous transfer's rate at the same settings so it
# lasts about TARGET seconds (first guesses: GUESS). The sender is the server in host b, so the
# congestion control is set in b's namespace before each transfer. Only the testbed's own namespaces
# (PREFIX*) and loopback receive traffic; the testbed is torn down on any exit.
set -euo pipefail

BIN=${BIN:-/tmp/replay-bin}
HAUL=${HAUL:-$BIN/haul}
PREFIX=${PREFIX:-hrc-}
STATE=${STATE:-/run/haul-netem-${PREFIX%-}}
DB=${DB:-/tmp/replay-corpus.sqlite}
PORT=${PORT:-5411}
LOG=${LOG:-/tmp/replay-corpus.log}
MAX_WALL_S=${MAX_WALL_S:-600}    # no new transfer starts after this many seconds

[ -x "$HAUL" ] || { echo "missing $HAUL (cargo build --release -p haul; copy it to $BIN)" >&2; exit 2; }
[ "$(id -u)" = 0 ] || { echo "needs root (network namespaces)" >&2; exit 2; }
netem() { "$HAUL" netem --state "$STATE" "$@"; }
log() { echo "[$(date -u +%H:%M:%S)] $*" | tee -a "$LOG" >&2; }
T0=$(date +%s)

server_pid=
srvroot=$(mktemp -d /tmp/replay-srv.XXXXXX)
stop_server() {   # the server runs in a process group of its own (setsid): end the group
    if [ -n "$server_pid" ]; then
        kill -- "-$server_pid" 2>/dev/null || kill "$server_pid" 2>/dev/null || true
        wait "$server_pid" 2>/dev/null || true
        server_pid=
    fi
}
cleanup() {
    set +e
    stop_server
    netem down --prefix "$PREFIX" >/dev/null 2>&1
    rm -rf "$srvroot"
}
trap cleanup EXIT INT TERM

# on HOST CMD...: run CMD in a netem host, or directly for HOST=lo.
on() {
    local h=$1; shift
    if [ "$h" = lo ]; then "$@"; else netem run "$h" -- "$@"; fi
}

# The congestion control is set per namespace; on loopback (the host's namespace) it is left alone.
ccset() { if [ "$1" = default ]; then echo true; else echo "sysctl -qw net.ipv4.tcp_congestion_control=$1"; fi; }

# start_server HOST ADDR CC
start_server() {
    local h=$1 addr=$2 cc=$3
    local argv=(sh -c "$(ccset "$cc"); exec $HAUL serve --root $srvroot --listen $addr:$PORT --anonymous")
    [ "$h" = lo ] || argv=("$HAUL" netem --state "$STATE" run "$h" -- "${argv[@]}")
    setsid "${argv[@]}" >>"$LOG" 2>&1 &
    server_pid=$!
    for _ in $(seq 50); do
        if on "${h/b/a}" bash -c "echo >/dev/tcp/$addr/$PORT" 2>/dev/null; then return 0; fi
        sleep 0.2
    done
    log "server on $h $addr:$PORT did not come up"; return 1
}

declare -A RATE   # bits/s of the last transfer per path/p/cc
declare -A GUESS=(   # first guesses, Mb/s, per path/p
    [rtt40/1]=300 [rtt40/2]=450 [rtt40/4]=600 [rtt40/8]=700
    [rtt100-loss/1]=40 [rtt100-loss/2]=80 [rtt100-loss/4]=200 [rtt100-loss/8]=400
    [loopback/1]=3000 [loopback/2]=3000 [loopback/4]=3000 [loopback/8]=3000
)
# xfer PATH HOST ADDR CC P C TARGET_S
xfer() {
    local path=$1 h=$2 addr=$3 cc=$4 p=$5 c=$6 target=$7
    if [ $(( $(date +%s) - T0 )) -ge "$MAX_WALL_S" ]; then log "wall-clock budget spent; skipping"; return 0; fi
    local key="$path/$p/$cc"
    [ "$path" = loopback ] && key=loopback   # CPU-bound: p matters little
    local bps=${RATE[$key]:-${RATE[$path/$p/cubic]:-$(( ${GUESS[$path/$p]} * 1000000 ))}}
    local len
    len=$(python3 -c "print(int($bps/8*$target) // 1048576 * 1048576)")
    log "$path cc=$cc p=$p c=$c len=$len (~${target}s)"
    [ "$h" = lo ] || on b sh -c "$(ccset "$cc")"
    local out
    if out=$(on "$h" timeout 60 sh -c "$(ccset "$cc"); exec $HAUL cp --json --sample-ms 100 -p $p -c $c --len $len ftp://$addr:$PORT/dev/zero /dev/null --history $DB" 2>>"$LOG"); then
        local got
        got=$(echo "$out" | jq -r '.throughput_bps')
        RATE[$key]=$got
        log "  -> $(python3 -c "print(f'{$got/1e6:.0f} Mb/s, {($len*8)/$got:.1f} s')")"
    else
        log "  -> FAILED"
    fi
}

run_path() {   # run_path NAME NETEM_FLAGS "CC P C TARGET_S"...
    local name=$1 flags=$2
    shift 2
    log "path $name: netem up --pair $flags"
    # shellcheck disable=SC2086
    netem up --pair --prefix "$PREFIX" $flags >>"$LOG"
    local b
    b=$(netem addr b)
    start_server b "$b" cubic
    for spec in "$@"; do
        # shellcheck disable=SC2086
        set -- $spec
        xfer "$name" a "$b" "$1" "$2" "$3" "$4"
    done
    stop_server
    netem down --prefix "$PREFIX" >>"$LOG" 2>&1
}

# The corpus of 2026-11-22 was recorded in two invocations into the same database: BATCH=1, then
# BATCH=2 (more 15-30 s transfers on the emulated paths, where batch 1 had several short ones).
BATCH=${BATCH:-1}
log "corpus batch $BATCH -> $DB"
if [ "$BATCH" = 1 ]; then
    run_path rtt40 "--rtt 40ms --rate 1gbit" \
        "cubic 1 1 12" "cubic 2 2 15" "cubic 4 2 20" "cubic 8 4 25" \
        "cubic 1 2 25" "cubic 4 1 12" "cubic 8 2 15" "cubic 2 1 20" \
        "bbr 1 1 15" "bbr 4 2 15" "bbr 8 2 20"
    run_path rtt100-loss "--rtt 100ms --rate 1gbit --loss 0.01%" \
        "cubic 1 1 12" "cubic 2 2 15" "cubic 4 2 20" "cubic 8 4 25" \
        "cubic 1 2 25" "cubic 4 1 12" "cubic 8 2 15" "cubic 2 1 20" \
        "bbr 1 1 15" "bbr 4 2 15" "bbr 8 2 20"
    start_server lo 127.0.0.1 default
    for spec in "1 1 10" "4 2 12" "8 2 10" "2 1 12"; do
        # shellcheck disable=SC2086
        set -- $spec
        xfer loopback lo 127.0.0.1 default "$1" "$2" "$3"
    done
    stop_server
else
    run_path rtt40 "--rtt 40ms --rate 1gbit" \
        "cubic 1 2 15" "cubic 2 2 18" "cubic 4 4 15" "cubic 8 2 20" "bbr 2 2 15"
    # First guesses from batch 1's rates on this path (Mb/s): p1 85, p2 190, p4 210, p8 285.
    GUESS[rtt100-loss/1]=85; GUESS[rtt100-loss/2]=150; GUESS[rtt100-loss/4]=210; GUESS[rtt100-loss/8]=285
    run_path rtt100-loss "--rtt 100ms --rate 1gbit --loss 0.01%" \
        "cubic 2 2 18" "cubic 4 2 15" "cubic 8 2 18" "bbr 2 2 20" "bbr 8 4 20"
    start_server lo 127.0.0.1 default
    RATE[loopback]=${LOOPBACK_BPS:-22000000000}
    xfer loopback lo 127.0.0.1 default 1 1 12
    stop_server
fi
log "done in $(( $(date +%s) - T0 )) s: $(sqlite3 "$DB" 'select count(*) from transfers') transfers in $DB"
