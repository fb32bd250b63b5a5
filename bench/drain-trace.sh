#!/usr/bin/env bash
# How long a lowered concurrency takes to take effect, for two haul builds: tuned downloads of
# the mixed tree (bench/datasets/mixed.py 5000 5 6) on an emulated 1 Gb/s, 40 ms pair, run in
# pairs (A then B each time), each with the engine's per-sample session trace
# (HAUL_LOG=haul_xfer::engine=trace). bench/drain-trace.py then lists, for every step down, the
# seconds until no more sessions ran than the new level asked for, and each run's throughput.
#
# Usage (root): bench/drain-trace.sh HAUL_A HAUL_B OUTDIR [PAIRS]
#   HAUL_A, HAUL_B: two haul binaries (A also runs `haul netem` and the server)
#   PAIRS: default 6; a pair takes about 2.5 min. The tree is kept in /var/tmp/mixed/src.
set -euo pipefail
[ $# -ge 3 ] || { sed -n '2,11p' "$0" >&2; exit 2; }
a=$1 b=$2 out=$3 pairs=${4:-6}
here=$(cd "$(dirname "$0")" && pwd)
export HAUL_NETEM_STATE=/run/haul-netem-hdr
data=/var/tmp/mixed
mkdir -p "$out" "$data"
"$a" netem up --pair --prefix hdr- --rtt 40ms --rate 1gbit >/dev/null
cleanup() {
    pkill -f "serve --root $data/src" || true
    sleep 1
    "$a" netem down --prefix hdr- >/dev/null || true
}
trap cleanup EXIT
[ -d "$data/src/tree" ] || python3 "$here/datasets/mixed.py" "$data/src/tree" 5000 5 6 >/dev/null
for h in a b; do "$a" netem run $h -- sysctl -qw net.ipv4.tcp_congestion_control=cubic; done
"$a" netem run b -- "$a" serve --root "$data/src" --listen 10.78.0.2:5411 --anonymous > "$out/serve.log" 2>&1 &
sleep 2
for r in $(seq 1 "$pairs"); do
    for which in A B; do
        bin=$a name=new
        [ $which = B ] && bin=$b name=prev
        rm -rf "$data/out" "$data/h.sqlite"
        sync
        "$a" netem run a -- env HAUL_LOG=haul_xfer::engine=trace,haul=info "$bin" cp -q -r --tune --json \
            ftp://10.78.0.2:5411/tree "$data/out" --history "$data/h.sqlite" > "$out/$name-r$r.json" 2> "$out/$name-r$r.log"
        echo "$name r$r $(python3 -c "import json,sys; j=json.load(open(sys.argv[1])); print(round(j['throughput_bps']/1e6,1), j['files'])" "$out/$name-r$r.json")"
    done
done
rm -rf "$data/out" "$data/h.sqlite"
