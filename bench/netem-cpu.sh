#!/usr/bin/env bash
# The WAN emulator's own CPU at 1 Gb/s, for two haul builds, alternating: iperf3 (data b->a)
# through `haul netem up --pair --rtt 40ms --rate 1gbit`, with the emulator daemon's CPU (all
# threads, utime + stime from /proc/PID/stat) over 10 s mid-run, in % of one core.
# Cases per round: TCP CUBIC -P 4 and -P 1 (18 s each), UDP at 100M, 10M, 1M (16 s each).
#
# Usage (root): bench/netem-cpu.sh OLD_HAUL NEW_HAUL [ROUNDS]   (default 3 rounds, ~4.5 min each)
# Output: one line per run: build, case, goodput (TCP), emulator CPU %.
set -euo pipefail
[ $# -ge 2 ] || { sed -n '2,9p' "$0" >&2; exit 2; }
old=$1 new=$2 rounds=${3:-3}
export HAUL_NETEM_STATE=/run/haul-netem-hnc
tmp=$(mktemp -d /tmp/netem-cpu.XXXXXX)
cur=""
cleanup() {
    [ -n "$cur" ] && "$cur" netem down --prefix hnc- >/dev/null 2>&1 || true
    rm -rf "$tmp"
}
trap cleanup EXIT

one() { # one BIN LABEL CASE IPERF_ARGS...
    local bin=$1 label=$2 case=$3
    shift 3
    cur=$bin
    "$bin" netem up --pair --prefix hnc- --rtt 40ms --rate 1gbit >/dev/null
    for h in a b; do "$bin" netem run $h -- sysctl -qw net.ipv4.tcp_congestion_control=cubic; done
    local addr_b
    addr_b=$("$bin" netem addr b)
    ip netns exec hnc-b iperf3 -s -B "$addr_b" -p 5299 -1 >/dev/null 2>&1 &
    sleep 1
    ip netns exec hnc-a iperf3 -c "$addr_b" -p 5299 -R -J "$@" > "$tmp/out.json" &
    local ipid=$! dpid t0 t1
    dpid=$(pgrep -f "netem --state $HAUL_NETEM_STATE daemon")
    sleep 4
    t0=$(awk '{print $14+$15}' "/proc/$dpid/stat")
    sleep 10
    t1=$(awk '{print $14+$15}' "/proc/$dpid/stat")
    wait "$ipid"
    local gp
    gp=$(python3 -c "import json,sys; j=json.load(open(sys.argv[1])); print(round(j['end']['sum_received']['bits_per_second']/1e6,1))" "$tmp/out.json")
    echo "$label $case goodput_mbps=$gp emulator_cpu_pct=$(( (t1 - t0) * 100 / (10 * $(getconf CLK_TCK)) ))"
    "$bin" netem down --prefix hnc- >/dev/null
    cur=""
}

for r in $(seq 1 "$rounds"); do
    for case in "tcp-P4:-t 18 -P 4" "tcp-P1:-t 18 -P 1" "udp-100M:-t 16 -u -b 100M" \
                "udp-10M:-t 16 -u -b 10M" "udp-1M:-t 16 -u -b 1M"; do
        name=${case%%:*} args=${case#*:}
        # shellcheck disable=SC2086
        one "$old" old "$name" $args
        # shellcheck disable=SC2086
        one "$new" new "$name" $args
    done
done
