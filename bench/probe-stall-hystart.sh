#!/bin/bash
# Probe stalls vs CUBIC HyStart (issue 4's FastProf run saw 2 s probes that wrote 8 MB and then
# nothing). N pairs of 2 s probes (TCP CUBIC, 8 MB buffers, 26511-byte blocks, 1 Gb/s, 100 ms),
# one with net/ipv4 tcp_cubic hystart on and one off, alternating, while two busy loops load
# the host. Prints one line per probe: hystart, run, Mbit/s. Needs root and `haul netem`;
# restores the hystart setting. Run under `flock /tmp/netem-bench.lock`.
# usage: HAUL=target/release/haul N=12 bench/probe-stall-hystart.sh
set -u
H=${HAUL:-target/release/haul}
N=${N:-12}
ST=/run/haul-netem-hst
out=$(mktemp -d)
$H netem --state $ST up --pair --prefix hst- --rtt 100ms --rate 1gbit --loss 0 > /dev/null
B=$($H netem --state $ST addr b)
$H netem --state $ST run b -- $H profile serve --listen $B:5311 > /dev/null 2>&1 &
sleep 1
busy=()
for _ in 1 2; do (while :; do :; done) & busy+=($!); done
orig=$(cat /sys/module/tcp_cubic/parameters/hystart)
for i in $(seq 1 "$N"); do
  for hs in 1 0; do
    echo $hs > /sys/module/tcp_cubic/parameters/hystart
    $H netem --state $ST run a -- $H profile run $B:5311 -t 2 -i 0.25 -C cubic -w 8M -l 26511 --no-history --json > "$out/p.json" 2>/dev/null
    python3 -c "import json;d=json.load(open('$out/p.json'));print('hystart=$hs', $i, round(d['aggregate_bps']/1e6,1))"
  done
done
echo "$orig" > /sys/module/tcp_cubic/parameters/hystart
kill "${busy[@]}"
pkill -f "profile serve --listen $B:5311"
$H netem --state $ST down --prefix hst- > /dev/null
rm -rf "$out"
