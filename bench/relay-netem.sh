#!/usr/bin/env bash
# The split-TCP relay (`haul serve --relay-allow`) on haul's WAN emulator: the emulation of the
# GridFTP overlay thesis (seed 002, §5.2: hosts A-B-C, 100 Mb/s links, latency split 10:90,
# Pareto on/off cross traffic on the A-B link, transfers from A to C, split at B), plus a case
# where the B-C leg is the bottleneck and a long lossy 1 Gb/s path. Needs root (`haul netem`).
#
#   bench/relay-netem.sh                          # all scenarios below, in this order
#   bench/relay-netem.sh t70 t90                  # only these
#   REPS=3 SIZE_t70=32M bench/relay-netem.sh t70  # any setting below can be overridden
#
# Every scenario brings up its own chain a - b - c (`haul netem up FILE`, the topology file is
# written to OUT/SCENARIO/topology.toml), sets CUBIC, tcp_rmem/tcp_wmem max 64 MiB and
# tcp_no_metrics_save=1 (no ssthresh carried from one run to the next) in all three hosts, and
# starts:
#   a: `haul serve --anonymous` on 10.78.0.1:2811 (the origin) and globus-gridftp-server
#      (anonymous, nobody) on 10.78.0.1:2812, both over DATA (random files in /dev/shm);
#   b: `haul serve --anonymous --relay-allow 10.78.0.1:2811 --relay-anonymous
#      --relay-parallelism P` on 10.78.1.1:2811 over DATA too (so c can also fetch from b alone).
# Contenders, each one file into /dev/null (memory to memory, unverified, like the thesis's
# goodput = size / (client start to exit)); data always flows a -> b -> c:
#   haul-direct  c: haul cp -c 1 -p P ftp://10.78.0.1:2811/F /dev/null      (kernel forwards in b)
#   haul-relay   c: haul cp -c 1 -p P ftp://10.78.1.1:2811/ftp://10.78.0.1:2811/F /dev/null
#   guc-direct   c: globus-url-copy -p P ftp://10.78.0.1:2812/DATA/F file:///dev/null
#   leg-ab       b: haul cp -c 1 -p P ftp://10.78.0.1:2811/F /dev/null      (the first leg alone)
#   leg-bc       c: haul cp -c 1 -p P ftp://10.78.1.1:2811/F /dev/null      (the second leg alone)
#   haul-direct-b, haul-relay-b: the same as haul-direct and haul-relay with a second build,
#                SRC_HAUL_B, as client and as relay (its own relay on 10.78.1.1:2813; the
#                origin stays SRC_HAUL's): an A/B of two builds in one run, alternating.
# A scenario runs REPS rounds of its contenders in a fixed order (A B C A B C ...), 2 s apart.
# Per run: wall time, haul's --json, netem stats before and after (cross traffic, drops), the
# CPU seconds of the relay, the origin and the emulator daemon, the host's busy share, and
# `ss -tin` of the senders (a and b) every second. The summary is relay-netem-summary.py.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
SRC_HAUL=${SRC_HAUL:-/tmp/target-bench/release/haul}
BIN=${BIN:-/tmp/relay-bench-bin}              # a copy of the binary, so rebuilds cannot change it
HAUL=$BIN/haul
SRC_HAUL_B=${SRC_HAUL_B:-}                    # a second build, for the -b contenders
HAUL_B=$BIN/haul-b
PREFIX=${PREFIX:-hrl-}
STATE=${STATE:-/run/haul-netem-${PREFIX%-}}
DATA=${DATA:-/dev/shm/relay-bench}
CC=${CC:-cubic}
RMEM_MAX=${RMEM_MAX:-67108864}
REPS=${REPS:-}                                # overrides every scenario's own count
GAP_S=${GAP_S:-2}
NICE=${NICE:-0}                               # e.g. -10: ahead of compilers on a shared host
TIMEOUT_S=${TIMEOUT_S:-240}
LOCK=${LOCK:-/tmp/netem-bench.lock}
TS=$(date -u +%Y%m%dT%H%M%SZ)
OUT=${OUT:-$here/results/relay-netem-$TS}
SCENARIOS=${*:-t70 t90 t90p4 bc50 lossy}

# Per scenario: streams, file size, rounds, contenders, topology.
P_t70=1;   SIZE_t70=${SIZE_t70:-32M};   REPS_t70=5; C_t70=${C_t70:-haul-direct haul-relay guc-direct leg-ab}
P_t90=1;   SIZE_t90=${SIZE_t90:-10M};   REPS_t90=5; C_t90=${C_t90:-haul-direct haul-relay guc-direct leg-ab}
P_t90p4=4; SIZE_t90p4=${SIZE_t90p4:-16M}; REPS_t90p4=3; C_t90p4=${C_t90p4:-haul-direct haul-relay guc-direct}
P_bc50=1;  SIZE_bc50=${SIZE_bc50:-64M}; REPS_bc50=3; C_bc50=${C_bc50:-haul-direct haul-relay guc-direct leg-bc}
P_lossy=1; SIZE_lossy=${SIZE_lossy:-24M}; REPS_lossy=3; C_lossy=${C_lossy:-haul-direct haul-relay guc-direct leg-ab}
# Cross sources: utilisation = N x 5 Mb/s x 50 % duty / 100 Mb/s (70 % = 28, 90 % = 36).
X70=${X70:-28}
X90=${X90:-36}

topology() { # scenario
    case $1 in
    t70|t90|t90p4)
        local n=$X70; [ "$1" = t70 ] || n=$X90
        cat <<EOF
# Thesis §5.2 (second experiment): L1 = a-b 100 Mb/s, L2 = b-c 100 Mb/s, RTT 10 + 90 ms,
# Pareto on/off cross traffic on L1 in the data direction (a -> b), none on L2.
[[link]]
a = "a"
b = "b"
rate = "100mbit"
rtt = "10ms"
[link.ab]
cross_sources = $n

[[link]]
a = "b"
b = "c"
rate = "100mbit"
rtt = "90ms"
EOF
        ;;
    bc50)
        cat <<EOF
# The second leg is the bottleneck: a-b 100 Mb/s 10 ms, b-c 50 Mb/s 90 ms, no cross traffic.
[[link]]
a = "a"
b = "b"
rate = "100mbit"
rtt = "10ms"

[[link]]
a = "b"
b = "c"
rate = "50mbit"
rtt = "90ms"
EOF
        ;;
    lossy)
        cat <<EOF
# A long lossy path: 1 Gb/s, RTT 50 + 50 ms, Bernoulli loss 0.05 % on each link in the data
# direction (a -> b, b -> c): end to end 1 - 0.9995^2 = 0.09998 %; ACKs are not lost.
[[link]]
a = "a"
b = "b"
rate = "1gbit"
rtt = "50ms"
[link.ab]
loss = "0.05%"

[[link]]
a = "b"
b = "c"
rate = "1gbit"
rtt = "50ms"
[link.ab]
loss = "0.05%"
EOF
        ;;
    *) echo "unknown scenario $1" >&2; return 2 ;;
    esac
}

[ "$(id -u)" = 0 ] || { echo "needs root (network namespaces)" >&2; exit 2; }
[ -x "$SRC_HAUL" ] || { echo "missing $SRC_HAUL: CARGO_TARGET_DIR=/tmp/target-bench cargo build --release -p haul" >&2; exit 2; }
command -v globus-url-copy >/dev/null && [ -x /usr/sbin/globus-gridftp-server ] || { echo "needs globus-url-copy and globus-gridftp-server" >&2; exit 2; }
mkdir -p "$BIN" "$OUT" "$DATA"
cp "$SRC_HAUL" "$HAUL.new" && mv "$HAUL.new" "$HAUL"
if [ -n "$SRC_HAUL_B" ]; then cp "$SRC_HAUL_B" "$HAUL_B.new" && mv "$HAUL_B.new" "$HAUL_B"; fi
for s in $SCENARIOS; do topology "$s" >/dev/null; done
log() { echo "[$(date -u +%H:%M:%S)] $*" | tee -a "$OUT/driver.log" >&2; }
netem() { "$HAUL" netem --state "$STATE" "$@"; }
now() { date +%s.%N; }
cpu_of() { [ -n "${1:-}" ] && [ -r "/proc/$1/stat" ] && awk '{ print $14 + $15 }' "/proc/$1/stat" || echo 0; }
busy() { awk '/^cpu / { print $2 + $3 + $4 + $7 + $8, $2 + $3 + $4 + $5 + $6 + $7 + $8 }' /proc/stat; }
bytes_of() { numfmt --from=iec "$1"; }

exec 9>"$LOCK"
log "waiting for $LOCK"
flock 9
log "holding $LOCK; results in $OUT"
renice -n "$NICE" -p $$ >/dev/null   # inherited by everything started from here on

pids=()          # process-group leaders we started (servers)
sampler_pid=
cleanup() {
    local rc=$?
    set +e
    [ -n "$sampler_pid" ] && kill "$sampler_pid" 2>/dev/null
    for p in "${pids[@]}"; do kill -- "-$p" 2>/dev/null || kill "$p" 2>/dev/null; done
    for p in "${pids[@]}"; do wait "$p" 2>/dev/null; done
    pids=()
    netem down --prefix "$PREFIX" >>"$OUT/driver.log" 2>&1
    log "testbed $PREFIX down (exit $rc)"
    exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM
if [ -e "$STATE/state.json" ] || ls /run/netns/"$PREFIX"* >/dev/null 2>&1; then
    log "removing a leftover $PREFIX testbed"; netem down --prefix "$PREFIX" >>"$OUT/driver.log" 2>&1 || true
fi

cat >"$OUT/config.json" <<EOF
{"started_utc":"$TS","scenarios":"$SCENARIOS","congestion":"$CC","rmem_max":$RMEM_MAX,"reps_override":"$REPS",
 "nice":$NICE,"x70":$X70,"x90":$X90,"haul":"$SRC_HAUL","haul_version":"$("$HAUL" --version 2>&1 | head -1)",
 "git_head":"$(git -C "$here/.." rev-parse --short HEAD 2>/dev/null)","git_dirty":$(git -C "$here/.." status --porcelain 2>/dev/null | grep -q . && echo true || echo false),
 "globus_url_copy":"$(globus-url-copy -version 2>&1 | head -1)","kernel":"$(uname -r)","nproc":$(nproc)}
EOF
echo "scenario,rep,contender,streams,bytes,rc,wall_s,goodput_mbps,relay_cpu_s,origin_cpu_s,netem_cpu_s,host_busy_pct,load1" >"$OUT/runs.csv"

# `ip netns exec` in a fresh process group (setsid and ip exec, so $! is the program's pid);
# sets LAST_PID.
start_in() { # host log cmd...
    local host=$1 logf=$2; shift 2
    setsid ip netns exec "$PREFIX$host" "$@" >"$logf" 2>&1 &
    LAST_PID=$!
    pids+=("$LAST_PID")
}
wait_tcp() { # host addr port
    for _ in $(seq 200); do
        ip netns exec "$PREFIX$1" bash -c "exec 3<>/dev/tcp/$2/$3" 2>/dev/null && return 0
        sleep 0.1
    done
    log "nothing listens on $2:$3 (seen from $1)"; return 1
}

scenario() { # name
    local s=$1 d="$OUT/$1" p size bytes reps conts f
    p=$(eval echo "\$P_$s"); size=$(eval echo "\$SIZE_$s"); reps=${REPS:-$(eval echo "\$REPS_$s")}
    conts=$(eval echo "\$C_$s"); bytes=$(bytes_of "$size")
    mkdir -p "$d/runs"
    f="f-$bytes.bin"
    if [ "$(stat -c %s "$DATA/$f" 2>/dev/null || echo 0)" != "$bytes" ]; then
        head -c "$bytes" /dev/urandom >"$DATA/$f.tmp" && mv "$DATA/$f.tmp" "$DATA/$f"
    fi
    chmod 755 "$DATA"; chmod 644 "$DATA/$f"
    topology "$s" >"$d/topology.toml"
    log "== $s: $size ($bytes B), $p stream(s) per leg, $reps rounds of: $conts"
    netem up "$d/topology.toml" --prefix "$PREFIX" | tee "$d/netem-up.txt" >&2
    for h in a b c; do
        ip netns exec "$PREFIX$h" sysctl -qw "net.ipv4.tcp_congestion_control=$CC" \
            "net.ipv4.tcp_rmem=4096 131072 $RMEM_MAX" "net.ipv4.tcp_wmem=4096 16384 $RMEM_MAX" \
            net.ipv4.tcp_no_metrics_save=1
    done
    { for h in a b c; do echo "$h: $(ip netns exec "$PREFIX$h" sysctl -n net.ipv4.tcp_congestion_control) rmem $(ip netns exec "$PREFIX$h" sysctl -n net.ipv4.tcp_rmem) wmem $(ip netns exec "$PREFIX$h" sysctl -n net.ipv4.tcp_wmem)"; done; } >"$d/sysctl.txt"
    local A=10.78.0.1 B=10.78.1.1 origin relay globus dpid
    printf '127.0.0.1 localhost\n%s haul-a\n' "$A" >"$d/hosts"
    start_in a "$d/origin.log" "$HAUL" serve --root "$DATA" --listen "$A:2811" --anonymous
    origin=$LAST_PID
    start_in a "$d/globus.log" unshare -m sh -c "mount --bind $d/hosts /etc/hosts && exec /usr/sbin/globus-gridftp-server -c /dev/null -aa -anonymous-user nobody -p 2812 -control-interface $A -data-interface $A -home-dir /"
    globus=$LAST_PID
    start_in b "$d/relay.log" env HAUL_LOG=haul_overlay=info "$HAUL" serve --root "$DATA" --listen "$B:2811" \
        --anonymous --relay-allow "$A:2811" --relay-anonymous --relay-parallelism "$p"
    relay=$LAST_PID
    local relay_b=""
    if [ -n "$SRC_HAUL_B" ]; then
        start_in b "$d/relay-b.log" env HAUL_LOG=haul_overlay=info "$HAUL_B" serve --root "$DATA" \
            --listen "$B:2813" --anonymous --relay-allow "$A:2811" --relay-anonymous --relay-parallelism "$p"
        relay_b=$LAST_PID
        wait_tcp c "$B" 2813
    fi
    wait_tcp c "$A" 2811; wait_tcp c "$A" 2812; wait_tcp c "$B" 2811
    dpid=$(cat "$STATE/daemon.pid")
    log "origin pid $origin, globus pid $globus, relay pid $relay, emulator pid $dpid"

    local r c host cmd rc s0 s1 b0 b1 rc0 rc1 oc0 oc1 nc0 nc1 name tck
    tck=$(getconf CLK_TCK)
    for r in $(seq 1 "$reps"); do
        for c in $conts; do
            name="$c-r$r"
            case $c in
            haul-direct) host=c; cmd=("$HAUL" cp -q --json -c 1 -p "$p" --history "$d/history.sqlite" "ftp://$A:2811/$f" /dev/null) ;;
            haul-relay)  host=c; cmd=("$HAUL" cp -q --json -c 1 -p "$p" --history "$d/history.sqlite" "ftp://$B:2811/ftp://$A:2811/$f" /dev/null) ;;
            guc-direct)  host=c; cmd=(globus-url-copy -p "$p" "ftp://$A:2812$DATA/$f" file:///dev/null) ;;
            leg-ab)      host=b; cmd=("$HAUL" cp -q --json -c 1 -p "$p" --history "$d/history.sqlite" "ftp://$A:2811/$f" /dev/null) ;;
            leg-bc)      host=c; cmd=("$HAUL" cp -q --json -c 1 -p "$p" --history "$d/history.sqlite" "ftp://$B:2811/$f" /dev/null) ;;
            haul-direct-b) host=c; cmd=("$HAUL_B" cp -q --json -c 1 -p "$p" --history "$d/history-b.sqlite" "ftp://$A:2811/$f" /dev/null) ;;
            haul-relay-b)  host=c; cmd=("$HAUL_B" cp -q --json -c 1 -p "$p" --history "$d/history-b.sqlite" "ftp://$B:2813/ftp://$A:2811/$f" /dev/null) ;;
            esac
            netem stats --json >"$d/runs/$name.stats0.json"
            ( while :; do
                  for h in a b; do echo "# $(date +%s.%N) $h"; ip netns exec "$PREFIX$h" ss -tin state established; done
                  sleep 1
              done ) >"$d/runs/$name.ss.txt" 2>/dev/null &
            sampler_pid=$!
            rc0=$(cpu_of "$relay"); oc0=$(cpu_of "$origin"); nc0=$(cpu_of "$dpid"); read -r b0 t0 < <(busy)
            rc=0
            s0=$(now)
            ip netns exec "$PREFIX$host" timeout "$TIMEOUT_S" "${cmd[@]}" >"$d/runs/$name.out" 2>"$d/runs/$name.err" || rc=$?
            s1=$(now)
            rc1=$(cpu_of "$relay"); oc1=$(cpu_of "$origin"); nc1=$(cpu_of "$dpid"); read -r b1 t1 < <(busy)
            kill "$sampler_pid" 2>/dev/null; wait "$sampler_pid" 2>/dev/null || true; sampler_pid=
            netem stats --json >"$d/runs/$name.stats1.json"
            awk -v s="$s" -v r="$r" -v c="$c" -v p="$p" -v n="$bytes" -v rc="$rc" -v s0="$s0" -v s1="$s1" \
                -v r0="$rc0" -v r1="$rc1" -v o0="$oc0" -v o1="$oc1" -v d0="$nc0" -v d1="$nc1" -v tck="$tck" \
                -v b0="$b0" -v b1="$b1" -v t0="$t0" -v t1="$t1" -v l="$(cut -d' ' -f1 /proc/loadavg)" \
                'BEGIN { w = s1 - s0; printf "%s,%s,%s,%s,%s,%s,%.3f,%.3f,%.2f,%.2f,%.2f,%.1f,%s\n",
                    s, r, c, p, n, rc, w, n * 8 / w / 1e6, (r1 - r0) / tck, (o1 - o0) / tck, (d1 - d0) / tck,
                    (t1 > t0 ? 100 * (b1 - b0) / (t1 - t0) : 0), l }' >>"$OUT/runs.csv"
            log "$s $name: exit $rc, $(tail -1 "$OUT/runs.csv" | cut -d, -f7,8 | awk -F, '{ printf "%s s, %s Mbit/s", $1, $2 }')"
            [ "$rc" = 0 ] || { log "  stderr: $(tail -c 400 "$d/runs/$name.err" | tr '\n' ' ')"; }
            for pp in "$origin" "$globus" "$relay" $relay_b; do
                kill -0 "$pp" 2>/dev/null || { log "a server died (pid $pp)"; exit 1; }
            done
            sleep "$GAP_S"
        done
    done
    netem stats --json >"$d/netem-stats-end.json"
    for pp in "$origin" "$globus" "$relay" $relay_b; do kill -- "-$pp" 2>/dev/null || kill "$pp" 2>/dev/null || true; done
    for pp in "$origin" "$globus" "$relay" $relay_b; do wait "$pp" 2>/dev/null || true; done
    pids=()
    netem down --prefix "$PREFIX" >>"$OUT/driver.log" 2>&1
    rm -f "$DATA/$f"
}

t_start=$(date +%s)
for s in $SCENARIOS; do scenario "$s"; done
log "measurements done in $(( $(date +%s) - t_start )) s"
python3 "$here/relay-netem-summary.py" "$OUT" | tee "$OUT/summary.md" || log "summary failed"
