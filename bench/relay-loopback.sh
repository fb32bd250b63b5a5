#!/usr/bin/env bash
# The relay's own cost on loopback: one large file, `haul cp -p 4` straight from an origin
# `haul serve` against the same copy through a relay `haul serve --relay-allow` (4 streams on
# each leg, the relay's defaults otherwise: --relay-parallelism 4, --relay-buffer 32M),
# alternating direct, relay, direct, relay ... for REPS rounds. Memory to memory: the origin
# reads a random file in /dev/shm (SRC=shm, the default; SRC=zero asks for the server's virtual
# /dev/zero with `--len`, which works direct but not through a relay: the client's MLST of the
# nested path gets the origin's 550 "virtual device"), the client writes /dev/null.
#
#   bench/relay-loopback.sh                  # defaults below; override any by environment
#   SIZE=2G SRC=shm REPS=3 bench/relay-loopback.sh
#
# Per run: wall time (client start to exit), haul's --json, and the CPU seconds (utime + stime
# from /proc/PID/stat, all threads) of the relay, the origin and the client. Prints medians,
# the relayed/direct throughput ratio (goal >= 0.80) and the relay's CPU seconds per GB.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
SRC_HAUL=${SRC_HAUL:-/tmp/target-bench/release/haul}
BIN=${BIN:-/tmp/relay-bench-bin}
HAUL=$BIN/haul
SIZE=${SIZE:-8G}                  # 2 GiB takes ~0.5 s direct here: too short
SRC=${SRC:-shm}                   # shm | zero
REPS=${REPS:-5}
P=${P:-4}
RELAY_P=${RELAY_P:-4}
PORT_O=${PORT_O:-5821}
PORT_R=${PORT_R:-5822}
DATA=${DATA:-/dev/shm/relay-loopback}
GAP_S=${GAP_S:-1}
MAXRATE=${MAXRATE:-}              # e.g. 8gbit: `haul cp --max-rate` on both paths. NOTE: it has no
                                  # effect here: haul applies --max-rate to file sinks, not to /dev/null
                                  # (run 20261126T073245Z: direct moved 23-36 Gbit/s with 8gbit set)
NICE=${NICE:-0}                   # e.g. -10: ahead of compilers on a shared host (inherited)
TS=$(date -u +%Y%m%dT%H%M%SZ)
OUT=${OUT:-$here/results/relay-loopback-$TS}

[ -x "$SRC_HAUL" ] || { echo "missing $SRC_HAUL" >&2; exit 2; }
mkdir -p "$BIN" "$OUT/runs" "$DATA/origin" "$DATA/relay"
renice -n "$NICE" -p $$ >/dev/null
cp "$SRC_HAUL" "$HAUL.new" && mv "$HAUL.new" "$HAUL"
log() { echo "[$(date -u +%H:%M:%S)] $*" | tee -a "$OUT/driver.log" >&2; }
cpu_of() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
busy() { awk '/^cpu / { print $2 + $3 + $4 + $7 + $8, $2 + $3 + $4 + $5 + $6 + $7 + $8 }' /proc/stat; }
bytes=$(numfmt --from=iec "$SIZE")

pids=()
cleanup() {
    local rc=$?
    set +e
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
    for p in "${pids[@]}"; do wait "$p" 2>/dev/null; done
    rm -rf "$DATA"
    log "servers stopped, $DATA removed (exit $rc)"
    exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

if [ "$SRC" = shm ]; then
    head -c "$bytes" /dev/urandom >"$DATA/origin/f.bin"
    path=/f.bin; lenarg=()
else
    path=/dev/zero; lenarg=(--len "$bytes")
fi
[ -n "$MAXRATE" ] && lenarg+=(--max-rate "$MAXRATE")
"$HAUL" serve --root "$DATA/origin" --listen "127.0.0.1:$PORT_O" --anonymous >"$OUT/origin.log" 2>&1 &
origin=$!; pids+=("$origin")
HAUL_LOG=haul_overlay=info "$HAUL" serve --root "$DATA/relay" --listen "127.0.0.1:$PORT_R" --anonymous \
    --relay-allow "127.0.0.1:$PORT_O" --relay-anonymous --relay-parallelism "$RELAY_P" >"$OUT/relay.log" 2>&1 &
relay=$!; pids+=("$relay")
for port in "$PORT_O" "$PORT_R"; do
    for _ in $(seq 100); do bash -c "exec 3<>/dev/tcp/127.0.0.1/$port" 2>/dev/null && break; sleep 0.1; done
done

cat >"$OUT/config.json" <<EOF
{"started_utc":"$TS","size":$bytes,"src":"$SRC","reps":$REPS,"p":$P,"relay_parallelism":$RELAY_P,
 "haul":"$SRC_HAUL","haul_version":"$("$HAUL" --version 2>&1 | head -1)",
 "git_head":"$(git -C "$here/.." rev-parse --short HEAD 2>/dev/null)","git_dirty":$(git -C "$here/.." status --porcelain 2>/dev/null | grep -q . && echo true || echo false),
 "nice":$NICE,"max_rate":"$MAXRATE","kernel":"$(uname -r)","nproc":$(nproc),"load1_start":"$(cut -d' ' -f1 /proc/loadavg)"}
EOF
echo "rep,contender,bytes,rc,wall_s,goodput_gbps,haul_gbps,client_cpu_s,origin_cpu_s,relay_cpu_s,host_busy_pct,load1" >"$OUT/runs.csv"
tck=$(getconf CLK_TCK)
for r in $(seq 1 "$REPS"); do
    for c in direct relay; do
        if [ "$c" = direct ]; then url="ftp://127.0.0.1:$PORT_O$path"; else url="ftp://127.0.0.1:$PORT_R/ftp://127.0.0.1:$PORT_O$path"; fi
        o0=$(cpu_of "$origin"); r0=$(cpu_of "$relay"); read -r b0 t0 < <(busy); rc=0
        s0=$(date +%s.%N)
        /usr/bin/time -f '%U %S' -o "$OUT/runs/$c-r$r.time" \
            "$HAUL" cp -q --json -c 1 -p "$P" "${lenarg[@]}" --history "$OUT/history.sqlite" "$url" /dev/null \
            >"$OUT/runs/$c-r$r.json" 2>"$OUT/runs/$c-r$r.err" || rc=$?
        s1=$(date +%s.%N)
        o1=$(cpu_of "$origin"); r1=$(cpu_of "$relay"); read -r b1 t1 < <(busy)
        read -r cu cs <"$OUT/runs/$c-r$r.time" || { cu=0; cs=0; }
        hg=$(python3 -c 'import json,sys; print(round(json.load(open(sys.argv[1]))["throughput_bps"]/1e9, 3))' "$OUT/runs/$c-r$r.json" 2>/dev/null || echo "")
        awk -v r="$r" -v c="$c" -v n="$bytes" -v rc="$rc" -v s0="$s0" -v s1="$s1" -v hg="$hg" -v cu="$cu" -v cs="$cs" \
            -v o0="$o0" -v o1="$o1" -v r0="$r0" -v r1="$r1" -v tck="$tck" -v l="$(cut -d' ' -f1 /proc/loadavg)" \
            -v b0="$b0" -v b1="$b1" -v t0="$t0" -v t1="$t1" \
            'BEGIN { w = s1 - s0; printf "%s,%s,%s,%s,%.3f,%.3f,%s,%.2f,%.2f,%.2f,%.1f,%s\n", r, c, n, rc, w, n * 8 / w / 1e9, hg,
                cu + cs, (o1 - o0) / tck, (r1 - r0) / tck, (t1 > t0 ? 100 * (b1 - b0) / (t1 - t0) : 0), l }' >>"$OUT/runs.csv"
        log "$c-r$r: exit $rc, $(tail -1 "$OUT/runs.csv")"
        [ "$rc" = 0 ] || log "  stderr: $(tail -c 400 "$OUT/runs/$c-r$r.err" | tr '\n' ' ')"
        sleep "$GAP_S"
    done
done

python3 - "$OUT" <<'PY' | tee "$OUT/summary.md"
import csv, statistics as st, sys
out = sys.argv[1]
rows = [r for r in csv.DictReader(open(f"{out}/runs.csv")) if r["rc"] == "0"]
def col(c, k): return [float(r[k]) for r in rows if r["contender"] == c and r[k] != ""]
med = lambda v: st.median(v) if v else float("nan")
print("| path | runs | goodput, Gbit/s (start to exit): median | min – max | haul's own, Gbit/s | client CPU s | origin CPU s | relay CPU s | relay CPU s per GB | host busy % |")
print("|---|---|---|---|---|---|---|---|---|---|")
for c in ("direct", "relay"):
    g = col(c, "goodput_gbps")
    if not g:
        print(f"| {c} | 0 | – | – | – | – | – | – | – | – |"); continue
    n = [float(r["bytes"]) for r in rows if r["contender"] == c]
    rel = col(c, "relay_cpu_s"); per = [x / (b / 1e9) for x, b in zip(rel, n)]
    print(f"| {c} | {len(g)} | {med(g):.2f} | {min(g):.2f} – {max(g):.2f} | {med(col(c, 'haul_gbps')):.2f} | "
          f"{med(col(c, 'client_cpu_s')):.2f} | {med(col(c, 'origin_cpu_s')):.2f} | {med(rel):.2f} | "
          f"{med(per):.3f} | {med(col(c, 'host_busy_pct')):.0f} |" if c == "relay" else
          f"| {c} | {len(g)} | {med(g):.2f} | {min(g):.2f} – {max(g):.2f} | {med(col(c, 'haul_gbps')):.2f} | "
          f"{med(col(c, 'client_cpu_s')):.2f} | {med(col(c, 'origin_cpu_s')):.2f} | – | – | {med(col(c, 'host_busy_pct')):.0f} |")
d = col("direct", "goodput_gbps"); r = col("relay", "goodput_gbps")
print()
print(f"relayed / direct (medians): {med(r) / med(d):.3f} (goal >= 0.80)")
pairs = {}
for row in rows:
    pairs.setdefault(row["rep"], {})[row["contender"]] = float(row["goodput_gbps"])
ratios = [p["relay"] / p["direct"] for p in pairs.values() if "relay" in p and "direct" in p]
if ratios:
    print(f"per-round ratios: {', '.join(f'{x:.3f}' for x in ratios)}")
PY
