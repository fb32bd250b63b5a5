#!/bin/bash
# bench/plut-cp-updown.sh OLD NEW [ROUNDS] [DIR] : one 1 GiB file downloaded and uploaded with
# `haul cp --transport plut` over 1 Gb/s, 100 ms, 0.1 % loss, with the files (and the history)
# under DIR (default /var/tmp/plut-updown, a disk file system; use /dev/shm/... for tmpfs).
# Per round, each build in turn brings up its own pair of namespaces and `haul serve`, then
# moves the file down and up twice. Prints wall seconds from start to exit per copy.
# Needs root. Example (2026-12-02):
#   flock /tmp/netem-bench.lock bench/plut-cp-updown.sh /tmp/old/haul target/release/haul 2
OLD=$1; NEW=$2; ROUNDS=${3:-2}; W=${4:-/var/tmp/plut-updown}
[ -n "$NEW" ] || { sed -n '2,8p' "$0" >&2; exit 2; }
export HAUL_NETEM_STATE=/run/haul-netem-hud
P=hud-
one_build() { # HAUL
    local H=$1 A B SP i dir t0 t1 rc
    $H netem up --pair --prefix $P --rtt 100ms --rate 1gbit --loss 0.1% >/dev/null || exit 1
    A=$($H netem addr a); B=$($H netem addr b)
    rm -rf "$W"; mkdir -p "$W/srv" "$W/dst"
    head -c 1G /dev/urandom > "$W/src"; touch -d '1 hour ago' "$W/src"; cp -p "$W/src" "$W/srv/big"
    ip netns exec ${P}b "$H" serve --root "$W/srv" --listen "$B:2811" --anonymous --anonymous-write >/dev/null 2>&1 &
    SP=$!; sleep 0.5
    for i in 1 2; do
        for dir in down up; do
            rm -f "$W/dst/out" "$W/srv/up"; sync
            t0=$(date +%s.%N)
            if [ $dir = down ]; then
                ip netns exec ${P}a "$H" cp -q --json --transport plut --plut-rate 1gbit "ftp://$B:2811/big" "$W/dst/out" --history "$W/h.sqlite" > "$W/out.json" 2>&1
            else
                ip netns exec ${P}a "$H" cp -q --json --transport plut --plut-rate 1gbit "$W/src" "ftp://$B:2811/up" --history "$W/h.sqlite" > "$W/out.json" 2>&1
            fi
            rc=$?; t1=$(date +%s.%N)
            echo "$H $dir rc=$rc wall_s=$(echo "$t1 - $t0" | bc) $(grep -o '"verified_files": [0-9]*' "$W/out.json")"
        done
    done
    kill $SP; wait $SP 2>/dev/null
    $H netem down --prefix $P >/dev/null
}
for _ in $(seq "$ROUNDS"); do
    one_build "$OLD"
    one_build "$NEW"
done
rm -rf "$W"
