#!/usr/bin/env bash
# `haul send` (plan, profile, tune, move, verify) side by side with fixed choices on haul's WAN
# emulator: does the planner, with its discovery and probing counted, get what the best fixed
# choice gets? Two hosts a - b, data always a -> b (servers in a, clients in b), or, in the
# chain, three a - b - c (servers in a, a relay in b, clients in c). Needs root.
#
#   bench/send-netem.sh                          # the three scenarios below, in this order
#   bench/send-netem.sh lossy                    # only this one
#   REPS=1 SIZE_lossy=1G TIMEOUT_S=120 bench/send-netem.sh   # a quick smoke run
#
# Scenarios, each in its own testbed (`haul netem up FILE --prefix P`, the topology file is
# written to OUT/SCENARIO/topology.toml):
#   mixed  1 Gb/s, RTT 20 ms, no loss; a tree of NSMALL (2000) files of 64 KiB - 1 MiB (sizes
#          drawn with SEED) in 20 directories plus NBIG (4) files of BIG (256 MiB), ~2 GiB.
#   lossy  1 Gb/s, RTT 100 ms, Bernoulli loss 0.1 % a -> b only (ACKs are not lost), MTU 1500;
#          one file of SIZE_lossy (default 8G).
#   chain  a - b 100 Mb/s, RTT 10 ms, with XCHAIN (28: 70 % load) Pareto on/off cross traffic
#          sources a -> b (002 §5.2's second experiment); b - c 100 Mb/s, RTT 90 ms; one file of
#          SIZE_chain (default 256M) from a to c. The origin is the site's globus-gridftp-server
#          (a:2812, TCP only: no PLUT), which haul reaches direct or through a haul relay in b:
#            haul serve --anonymous --no-history --relay-allow A:2812 --relay-anonymous
#          The client's services file ($XDG_CONFIG_HOME/haul/services.toml, given to the send
#          contenders only) lists the relay, so `haul send` still takes only SRC and DST.
# Every host gets CC (cubic), tcp_rmem/tcp_wmem max RMEM_MAX (64 MiB), tcp_no_metrics_save=1.
# Servers in a over DATA (random bytes in /dev/shm, removed at the end):
#   haul serve --anonymous --no-history --root DATA --listen 10.78.0.1:2811
#   globus-gridftp-server (anonymous, nobody) on 10.78.0.1:2812, the same DATA by its full path
# Contenders, run in b, each into a fresh directory under DEST_ROOT (on disk, not tmpfs),
# removed after the run; wall time from start to exit, TIMEOUT_S at most (`timeout -s KILL`):
#   send-cold   haul send SRC DEST --history H --json, H a fresh empty history every run
#   send-warm   haul send SRC DEST --history H_WARM --json, H_WARM kept for the whole scenario
#               (warmed by one unmeasured `haul send` before round 1)
#   send-deadline  haul send SRC DEST --history H --json --deadline DEADLINE (default 180s), H
#               fresh: a feasible deadline, planned cold, met or not (its JSON's deadline_met)
#   cp-default  haul cp -r --json SRC DEST --history H (a fresh one every run: a fixed choice)
#   cp-tune     haul cp -r --tune --json SRC DEST --history H (fresh)
#   cp-plut     haul cp -r --transport plut --json SRC DEST --history H (fresh) [PLUT_RATE]
#   cp-relay    haul cp -r --json ftp://B:2811/ftp://A:2812/DATA/F DEST --history H (fresh; chain)
# In the chain every haul contender reads from the Globus origin, ftp://A:2812/DATA/F.
#   guc         globus-url-copy -fast -cc 4 -p 4 -pp [-r] ftp://A:2812/DATA/... file:///DEST
# A round runs every contender once, 2 s (GAP_S) apart; round r starts at the r-th contender
# (A B C D E F, B C D E F A, ...). Per run: runs.csv (rc, wall, bytes that arrived, goodput,
# send's transport, stages and attempts), the JSON/stdout and stderr, the emulator's counters
# before and after. The summary is send-netem-summary.py (summary.md, summary.csv).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
SRC_HAUL=${SRC_HAUL:-/tmp/target-bench/release/haul}
BIN=${BIN:-/tmp/send-bench-bin}                 # a copy of the binary, so rebuilds cannot change it
HAUL=$BIN/haul
PREFIX=${PREFIX:-hsn-}
STATE=${STATE:-/run/haul-netem-${PREFIX%-}}
DATA=${DATA:-/dev/shm/send-bench}
DEST_ROOT=${DEST_ROOT:-/var/tmp/send-netem-dst}  # the clients write here (disk)
SCRATCH=${SCRATCH:-/tmp/send-netem-scratch}     # throwaway histories
CC=${CC:-cubic}
RMEM_MAX=${RMEM_MAX:-67108864}
REPS=${REPS:-3}
GAP_S=${GAP_S:-2}
NICE=${NICE:-0}                                 # e.g. -10: ahead of compilers on a shared host
TIMEOUT_S=${TIMEOUT_S:-300}
LOCK=${LOCK:-/tmp/netem-bench.lock}
SEED=${SEED:-1}
NSMALL=${NSMALL:-2000}
NBIG=${NBIG:-4}
BIG=${BIG:-256M}
SIZE_lossy=${SIZE_lossy:-8G}
SIZE_chain=${SIZE_chain:-256M}
XCHAIN=${XCHAIN:-28}
PLUT_RATE=${PLUT_RATE:-}
DEADLINE=${DEADLINE:-180s}                        # empty: haul cp's default
CONTENDERS=${CONTENDERS:-send-cold send-warm cp-default cp-tune cp-plut guc}
C_chain=${C_chain:-send-cold send-warm cp-default cp-tune cp-relay guc}
# C_mixed, C_lossy: that scenario's contenders instead of CONTENDERS (e.g. leaving out one
# known to time out).
C_mixed=${C_mixed:-}
C_lossy=${C_lossy:-}
KEEP_DATA=${KEEP_DATA:-0}
TS=$(date -u +%Y%m%dT%H%M%SZ)
OUT=${OUT:-$here/results/send-netem-$TS}
SCENARIOS=${*:-mixed lossy chain}
A=10.78.0.1
B=10.78.1.1   # b's address on the b - c link (the chain's relay)

topology() { # scenario
    case $1 in
    mixed)
        cat <<EOF
# 1 Gb/s, RTT 20 ms (10 ms each way), no loss, MTU 1500.
[[link]]
a = "a"
b = "b"
rate = "1gbit"
rtt = "20ms"
mtu = 1500
EOF
        ;;
    lossy)
        cat <<EOF
# 1 Gb/s, RTT 100 ms (50 ms each way), Bernoulli loss 0.1 % in the data direction a -> b only,
# MTU 1500.
[[link]]
a = "a"
b = "b"
rate = "1gbit"
rtt = "100ms"
mtu = 1500
[link.ab]
loss = "0.1%"
EOF
        ;;
    chain)
        cat <<EOF
# 002 §5.2's second experiment: a-b 100 Mb/s, RTT 10 ms, with $XCHAIN Pareto on/off cross traffic
# sources in the data direction (a -> b); b-c 100 Mb/s, RTT 90 ms. Data flows a -> b -> c, from
# the origin's globus-gridftp-server in a (TCP only), direct or through a haul relay in b.
[[link]]
a = "a"
b = "b"
rate = "100mbit"
rtt = "10ms"
[link.ab]
cross_sources = $XCHAIN

[[link]]
a = "b"
b = "c"
rate = "100mbit"
rtt = "90ms"
EOF
        ;;
    *) echo "unknown scenario $1" >&2; return 2 ;;
    esac
}

[ "$(id -u)" = 0 ] || { echo "needs root (network namespaces)" >&2; exit 2; }
[ -x "$SRC_HAUL" ] || { echo "missing $SRC_HAUL: CARGO_TARGET_DIR=/tmp/target-bench cargo build --release -p haul" >&2; exit 2; }
command -v globus-url-copy >/dev/null && [ -x /usr/sbin/globus-gridftp-server ] || { echo "needs globus-url-copy and globus-gridftp-server" >&2; exit 2; }
for s in $SCENARIOS; do topology "$s" >/dev/null; done
for c in $CONTENDERS $C_chain $C_mixed $C_lossy; do
    case $c in send-cold|send-warm|send-deadline|cp-default|cp-tune|cp-plut|cp-relay|guc) ;; *) echo "unknown contender $c" >&2; exit 2 ;; esac
done
mkdir -p "$OUT"
log() { echo "[$(date -u +%H:%M:%S)] $*" | tee -a "$OUT/driver.log" >&2; }
netem() { "$HAUL" netem --state "$STATE" "$@"; }
now() { date +%s.%N; }
busy() { awk '/^cpu / { print $2 + $3 + $4 + $7 + $8, $2 + $3 + $4 + $5 + $6 + $7 + $8 }' /proc/stat; }
bytes_of() { numfmt --from=iec "$1"; }
bytes_under() { find "$1" -type f -printf '%s\n' 2>/dev/null | awk '{ s += $1 } END { printf "%.0f\n", s }'; }
# Bytes written: allocated blocks, at most each file's length (haul sets a download's length
# first, so an unfinished file's length says nothing).
alloc_under() { find "$1" -type f -printf '%s %b\n' 2>/dev/null | awk '{ a = $2 * 512; if (a > $1) a = $1; s += a } END { printf "%.0f\n", s }'; }

exec 9>"$LOCK"
log "waiting for $LOCK"
flock 9
log "holding $LOCK; results in $OUT"
# Only under the lock: BIN, DATA, DEST_ROOT and SCRATCH are shared with the next run of this
# script, and the cleanup below removes the last three.
mkdir -p "$BIN" "$DATA" "$DEST_ROOT" "$SCRATCH"
cp "$SRC_HAUL" "$HAUL.new" && mv "$HAUL.new" "$HAUL"
renice -n "$NICE" -p $$ >/dev/null   # inherited by everything started from here on

pids=()          # process-group leaders we started (servers)
cleanup() {
    local rc=$?
    set +e
    for p in "${pids[@]}"; do kill -- "-$p" 2>/dev/null || kill "$p" 2>/dev/null; done
    for p in "${pids[@]}"; do wait "$p" 2>/dev/null; done
    pids=()
    netem down --prefix "$PREFIX" >>"$OUT/driver.log" 2>&1
    rm -rf "$DEST_ROOT" "$SCRATCH"
    [ "$KEEP_DATA" = 1 ] || rm -rf "$DATA"
    # Keep the results directory small.
    find "$OUT" -type f -size +1M ! -name '*.gz' -exec gzip -9 {} + 2>/dev/null
    log "testbed $PREFIX down, scratch removed (exit $rc)"
    exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM
if [ -e "$STATE/state.json" ] || ls /run/netns/"$PREFIX"* >/dev/null 2>&1; then
    log "removing a leftover $PREFIX testbed"; netem down --prefix "$PREFIX" >>"$OUT/driver.log" 2>&1 || true
fi

cat >"$OUT/config.json" <<EOF
{"started_utc":"$TS","scenarios":"$SCENARIOS","contenders":"$CONTENDERS","reps":$REPS,"timeout_s":$TIMEOUT_S,
 "gap_s":$GAP_S,"congestion":"$CC","rmem_max":$RMEM_MAX,"nice":$NICE,"seed":$SEED,"nsmall":$NSMALL,"nbig":$NBIG,
 "big":"$BIG","size_lossy":"$SIZE_lossy","size_chain":"$SIZE_chain","xchain":$XCHAIN,"contenders_chain":"$C_chain",
 "contenders_mixed":"$C_mixed","contenders_lossy":"$C_lossy","deadline":"$DEADLINE","plut_rate":"$PLUT_RATE","data":"$DATA","dest_root":"$DEST_ROOT",
 "dest_fs":"$(df -T "$DEST_ROOT" | awk 'NR == 2 { print $2 }')",
 "haul":"$SRC_HAUL","haul_version":"$("$HAUL" --version 2>&1 | head -1)","haul_sha256":"$(sha256sum "$HAUL" | cut -c1-16)",
 "git_head":"$(git -C "$here/.." rev-parse --short HEAD 2>/dev/null)","git_dirty":$(git -C "$here/.." status --porcelain 2>/dev/null | grep -q . && echo true || echo false),
 "globus_url_copy":"$(globus-url-copy -version 2>&1 | head -1)","kernel":"$(uname -r)","nproc":$(nproc),
 "load_at_start":"$(cut -d' ' -f1-3 /proc/loadavg)"}
EOF
git -C "$here/.." status --porcelain >"$OUT/git-status.txt" 2>/dev/null || true
echo "scenario,rep,order,contender,rc,status,wall_s,bytes_expected,bytes,bytes_alloc,goodput_mbps,arrived_mbps,transport,discover_s,profile_s,plan_s,transfer_s,attempts,probes,parallelism,predicted_mbps,host_busy_pct,load1" >"$OUT/runs.csv"

# `ip netns exec` in a fresh process group (setsid), so the whole server can be stopped.
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

# The mixed tree: NSMALL files of 64 KiB - 1 MiB (sizes from SEED) in 20 directories, NBIG of BIG.
make_tree() { # dir
    python3 - "$1" "$SEED" "$NSMALL" "$NBIG" "$(bytes_of "$BIG")" <<'EOF'
import os, random, sys
root, seed, nsmall, nbig, big = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
rng = random.Random(seed)
total = 0
for i in range(nsmall):
    d = os.path.join(root, "small", f"d{i % 20:02d}")
    os.makedirs(d, exist_ok=True)
    n = rng.randint(64 << 10, 1 << 20)
    with open(os.path.join(d, f"f{i:05d}.bin"), "wb") as f:
        f.write(os.urandom(n))
    total += n
os.makedirs(os.path.join(root, "big"), exist_ok=True)
for i in range(nbig):
    with open(os.path.join(root, "big", f"big{i}.bin"), "wb") as f:
        left = big
        while left:
            k = min(left, 64 << 20)
            f.write(os.urandom(k))
            left -= k
    total += big
print(total)
EOF
}

scenario() { # name
    local s=$1 d="$OUT/$1" src_path guc_src dst_leaf expected files
    mkdir -p "$d/runs"
    case $s in
    mixed)
        local key="mixed-s$SEED-n$NSMALL-b$NBIG-$BIG"
        if [ ! -e "$DATA/$key.done" ]; then
            rm -rf "$DATA/mixed" "$DATA"/mixed-*.done
            log "making the mixed tree in $DATA/mixed"
            make_tree "$DATA/mixed" >"$DATA/$key.tmp" && mv "$DATA/$key.tmp" "$DATA/$key.done"
        fi
        expected=$(cat "$DATA/$key.done"); files=$((NSMALL + NBIG))
        src_path=mixed; guc_src="$DATA/mixed/"; dst_leaf=mixed
        ;;
    lossy|chain)
        local size=$SIZE_lossy; [ "$s" = chain ] && size=$SIZE_chain
        expected=$(bytes_of "$size"); files=1
        local f="f-$expected.bin"
        if [ "$(stat -c %s "$DATA/$f" 2>/dev/null || echo 0)" != "$expected" ]; then
            log "making $DATA/$f"
            head -c "$expected" /dev/urandom >"$DATA/$f.tmp" && mv "$DATA/$f.tmp" "$DATA/$f"
        fi
        src_path=$f; guc_src="$DATA/$f"; dst_leaf=$f
        ;;
    esac
    chmod -R a+rX "$DATA"
    topology "$s" >"$d/topology.toml"
    # The client's host, and every host of the testbed.
    local cl=b hosts="a b" conts_v="C_$s"
    local conts_s=${!conts_v:-$CONTENDERS}
    [ "$s" = chain ] && { cl=c; hosts="a b c"; }
    log "== $s: $files file(s), $expected B, $REPS rounds of: $conts_s"
    netem up "$d/topology.toml" --prefix "$PREFIX" | tee "$d/netem-up.txt" >&2
    for h in $hosts; do
        ip netns exec "$PREFIX$h" sysctl -qw "net.ipv4.tcp_congestion_control=$CC" \
            "net.ipv4.tcp_rmem=4096 131072 $RMEM_MAX" "net.ipv4.tcp_wmem=4096 16384 $RMEM_MAX" \
            net.ipv4.tcp_no_metrics_save=1
    done
    { for h in $hosts; do echo "$h: $(ip netns exec "$PREFIX$h" sysctl -n net.ipv4.tcp_congestion_control) rmem $(ip netns exec "$PREFIX$h" sysctl -n net.ipv4.tcp_rmem) wmem $(ip netns exec "$PREFIX$h" sysctl -n net.ipv4.tcp_wmem) no_metrics_save $(ip netns exec "$PREFIX$h" sysctl -n net.ipv4.tcp_no_metrics_save)"; done; } >"$d/sysctl.txt"
    local serve globus
    printf '127.0.0.1 localhost\n%s haul-a\n' "$A" >"$d/hosts"
    start_in a "$d/serve.log" "$HAUL" serve --anonymous --no-history --root "$DATA" --listen "$A:2811"
    serve=$LAST_PID
    start_in a "$d/globus.log" unshare -m sh -c "mount --bind $d/hosts /etc/hosts && exec /usr/sbin/globus-gridftp-server -c /dev/null -aa -anonymous-user nobody -p 2812 -control-interface $A -data-interface $A -home-dir /"
    globus=$LAST_PID
    wait_tcp "$cl" "$A" 2811; wait_tcp "$cl" "$A" 2812
    local src="ftp://$A:2811/$src_path" hwarm="$d/history-warm.sqlite" plut=()
    [ -n "$PLUT_RATE" ] && plut=(--plut-rate "$PLUT_RATE")
    rm -f "$hwarm"*
    local relay=$globus cfg=()
    if [ "$s" = chain ]; then
        start_in b "$d/relay.log" "$HAUL" serve --anonymous --no-history --root "$DATA" --listen "$B:2811" \
            --relay-allow "$A:2812" --relay-anonymous
        relay=$LAST_PID
        wait_tcp c "$B" 2811
        mkdir -p "$d/config/haul"
        printf '# The relay in b, offered at no cost.\n[[relay]]\naddress = "%s:2811"\ncost = 0\n' "$B" >"$d/config/haul/services.toml"
        cfg=(env "XDG_CONFIG_HOME=$d/config")
        src="ftp://$A:2812$guc_src"
    fi
    log "haul serve pid $serve, globus pid $globus, relay pid $relay, emulator pid $(cat "$STATE/daemon.pid" 2>/dev/null)"


    # The warm-up of send-warm's history: one unmeasured `haul send`.
    if [[ " $conts_s " == *" send-warm "* ]]; then
        local w="$DEST_ROOT/warmup" rc=0 s0 s1
        rm -rf "$w"; mkdir -p "$w"
        s0=$(now)
        ip netns exec "$PREFIX$cl" timeout -s KILL "$TIMEOUT_S" "${cfg[@]}" "$HAUL" send "$src" "$w/$dst_leaf" --history "$hwarm" --json \
            >"$d/warmup.json" 2>"$d/warmup.err" || rc=$?
        s1=$(now)
        log "$s warm-up send: exit $rc, $(awk -v a="$s0" -v b="$s1" 'BEGIN { printf "%.1f", b - a }') s, $(bytes_under "$w") B, transport $(jq -r '.chosen.transport // "?"' "$d/warmup.json" 2>/dev/null)"
        rm -rf "$w"
        sleep "$GAP_S"
    fi

    local conts=($conts_s) n r i k c name dst cmd rc s0 s1 b0 b1 t0 t1 got alloc hist status
    n=${#conts[@]}
    for r in $(seq 1 "$REPS"); do
        for k in $(seq 0 $((n - 1))); do
            i=$(( (k + r - 1) % n )); c=${conts[$i]}
            name="$c-r$r"
            dst="$DEST_ROOT/$name"
            rm -rf "$dst"; mkdir -p "$dst"
            hist="$SCRATCH/$s-$name.sqlite"; rm -f "$hist"*
            case $c in
            send-cold)  : >"$hist"
                        cmd=("${cfg[@]}" "$HAUL" send "$src" "$dst/$dst_leaf" --history "$hist" --json) ;;
            send-warm)  cmd=("${cfg[@]}" "$HAUL" send "$src" "$dst/$dst_leaf" --history "$hwarm" --json) ;;
            send-deadline) : >"$hist"
                        cmd=("${cfg[@]}" "$HAUL" send "$src" "$dst/$dst_leaf" --history "$hist" --json --deadline "$DEADLINE") ;;
            cp-default) cmd=("$HAUL" cp -r --json "$src" "$dst/$dst_leaf" --history "$hist") ;;
            cp-tune)    cmd=("$HAUL" cp -r --tune --json "$src" "$dst/$dst_leaf" --history "$hist") ;;
            cp-relay)   cmd=("$HAUL" cp -r --json "ftp://$B:2811/$src" "$dst/$dst_leaf" --history "$hist") ;;  # src: the Globus origin
            cp-plut)    cmd=("$HAUL" cp -r --transport plut "${plut[@]}" --json "$src" "$dst/$dst_leaf" --history "$hist") ;;
            guc)        if [ "$s" = mixed ]; then
                            cmd=(globus-url-copy -fast -cc 4 -p 4 -pp -r "ftp://$A:2812$guc_src" "file://$dst/$dst_leaf/")
                        else
                            cmd=(globus-url-copy -fast -cc 4 -p 4 -pp "ftp://$A:2812$guc_src" "file://$dst/$dst_leaf")
                        fi ;;
            esac
            echo "${cmd[*]}" >"$d/runs/$name.cmd"
            netem stats --json >"$d/runs/$name.stats0.json"
            read -r b0 t0 < <(busy)
            rc=0
            s0=$(now)
            ip netns exec "$PREFIX$cl" timeout -s KILL "$TIMEOUT_S" "${cmd[@]}" >"$d/runs/$name.out" 2>"$d/runs/$name.err" || rc=$?
            s1=$(now)
            read -r b1 t1 < <(busy)
            netem stats --json >"$d/runs/$name.stats1.json"
            got=$(bytes_under "$dst")
            alloc=$(alloc_under "$dst")
            if [ "$rc" = 137 ] || [ "$rc" = 124 ]; then
                rc=124; status=timeout
            elif [ "$rc" != 0 ]; then
                status=fail
            elif [ "$got" != "$expected" ]; then
                status=short
            else
                status=ok
            fi
            # send's own account: transport(s) of its attempts (tcp>plut after a re-plan), stages,
            # attempts, probes, streams, the first plan's prediction.
            local sj=",,,,,,,,"
            if [[ $c == send-* ]]; then
                sj=$(jq -r '[(if (.attempts | length) > 0 then ([.attempts[].transport] | join(">")) else (.chosen.transport // "") end),
                        .stages.discover_s, .stages.profile_s, .stages.plan_s, .stages.transfer_s,
                        (.attempts | length), (.probes | length), (.transfer.parallelism // ""),
                        (if .chosen.predicted_bps then .chosen.predicted_bps / 1e6 else "" end)] | @csv' \
                        "$d/runs/$name.out" 2>/dev/null | tr -d '"') || sj=",,,,,,,,"
                [ -n "$sj" ] || sj=",,,,,,,,"
            fi
            awk -v s="$s" -v r="$r" -v o="$((k + 1))" -v c="$c" -v rc="$rc" -v st="$status" -v s0="$s0" -v s1="$s1" \
                -v n="$expected" -v got="$got" -v al="$alloc" -v sj="$sj" -v tmo="$TIMEOUT_S" \
                -v b0="$b0" -v b1="$b1" -v t0="$t0" -v t1="$t1" -v l="$(cut -d' ' -f1 /proc/loadavg)" \
                'BEGIN { w = s1 - s0
                    g = (st == "ok") ? sprintf("%.3f", n * 8 / w / 1e6) : (st == "timeout" ? sprintf("<%.3f", n * 8 / tmo / 1e6) : "")
                    printf "%s,%s,%s,%s,%s,%s,%.3f,%s,%s,%s,%s,%.3f,%s,%.1f,%s\n", s, r, o, c, rc, st, w, n, got, al, g,
                        al * 8 / w / 1e6, sj, (t1 > t0 ? 100 * (b1 - b0) / (t1 - t0) : 0), l }' >>"$OUT/runs.csv"
            log "$s $name: exit $rc ($status), $(tail -1 "$OUT/runs.csv" | awk -F, '{ printf "%s s, %s (written %s) of %s B, %s Mbit/s%s", $7, $9, $10, $8, $11, ($13 != "" ? ", " $13 " " $18 " attempt(s), profile " $15 " s" : "") }')"
            [ "$status" = ok ] || log "  stderr: $(tail -c 600 "$d/runs/$name.err" | tr '\n' ' ')"
            rm -rf "$dst" "$hist"*
            for pp in "$serve" "$globus" "$relay"; do
                kill -0 "$pp" 2>/dev/null || { log "a server died (pid $pp)"; exit 1; }
            done
            sleep "$GAP_S"
        done
    done
    netem stats --json >"$d/netem-stats-end.json"
    for pp in "$serve" "$globus" "$relay"; do kill -- "-$pp" 2>/dev/null || kill "$pp" 2>/dev/null || true; done
    for pp in "$serve" "$globus" "$relay"; do wait "$pp" 2>/dev/null || true; done
    pids=()
    netem down --prefix "$PREFIX" >>"$OUT/driver.log" 2>&1
    [ "$KEEP_DATA" = 1 ] || rm -rf "$DATA/mixed" "$DATA"/mixed-*.done "$DATA"/f-*.bin
}

t_start=$(date +%s)
for s in $SCENARIOS; do scenario "$s"; done
log "measurements done in $(( $(date +%s) - t_start )) s"
python3 "$here/send-netem-summary.py" "$OUT" || log "summary failed"
