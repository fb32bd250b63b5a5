#!/usr/bin/env bash
# CPU per GiB of a 1 GiB download over loopback, 4 streams, page cache, two contenders
# alternating: wall time, the client's CPU (user + system, /usr/bin/time) and the server's CPU
# (utime + stime of its process and children, from /proc, sampled until the client exits).
# A contender is a haul binary or the word `globus` (globus-url-copy against
# globus-gridftp-server). Extra `haul serve` flags per side: SERVE_A / SERVE_B; extra
# `haul cp` flags: CP_A / CP_B.
#
# Usage: bench/file1g-cpu.sh A B [PAIRS]     (default 8 pairs)
#   bench/file1g-cpu.sh globus target/release/haul 6
#   SERVE_B=--sendfile bench/file1g-cpu.sh target/release/haul target/release/haul 8
# Output: one line per run and a mean line per contender.
set -euo pipefail
[ $# -ge 2 ] || { sed -n '2,12p' "$0" >&2; exit 2; }
a=$1 b=$2 pairs=${3:-8}
dir=$(mktemp -d /tmp/file1g-cpu.XXXXXX)
pids=()
cleanup() { kill "${pids[@]}" 2>/dev/null || true; rm -rf "$dir"; }
trap cleanup EXIT
mkdir -p "$dir/src"
chmod o+x "$dir"
head -c 1073741824 /dev/urandom > "$dir/src/f1g"
touch -d '1 hour ago' "$dir/src/f1g"
chmod -R a+rwX "$dir/src"

start() { # start SIDE CONTENDER PORT SERVE_ARGS -> server pid
    if [ "$2" = globus ]; then
        /usr/sbin/globus-gridftp-server -c /dev/null -aa -anonymous-user nobody -p "$3" \
            -control-interface 127.0.0.1 -data-interface 127.0.0.1 -home-dir "$dir/src" \
            >/dev/null 2>&1 &
    else
        # shellcheck disable=SC2086
        "$2" serve --root "$dir/src" --listen "127.0.0.1:$3" --anonymous --no-history $4 \
            >/dev/null 2>&1 &
    fi
    echo $!
}
cpu_of() { awk '{print $14+$15+$16+$17}' "/proc/$1/stat" 2>/dev/null || echo 0; }
tree_cpu() { local t=0 v p; for p in $(pgrep -P "$1") "$1"; do v=$(cpu_of "$p"); t=$((t + ${v:-0})); done; echo $t; }

pa=$(start A "$a" 52961 "${SERVE_A:-}")
pb=$(start B "$b" 52962 "${SERVE_B:-}")
pids=("$pa" "$pb")
sleep 1.5
for _ in $(seq "$pairs"); do
    for side in A B; do
        if [ $side = A ]; then who=$a pid=$pa port=52961 extra=${CP_A:-}; else who=$b pid=$pb port=52962 extra=${CP_B:-}; fi
        rm -f "$dir/out"; sync
        if [ "$who" = globus ]; then
            cmd=(globus-url-copy -p 4 "ftp://127.0.0.1:$port$dir/src/f1g" "file://$dir/out")
        else
            # shellcheck disable=SC2206
            cmd=("$who" cp -q $extra -p 4 "ftp://127.0.0.1:$port/f1g" "$dir/out" --history "$dir/h.sqlite")
        fi
        s0=$(cpu_of "$pid")
        /usr/bin/time -f "%e %U %S" -o "$dir/t" "${cmd[@]}" & cp=$!
        peak=0
        while kill -0 $cp 2>/dev/null; do t=$(tree_cpu "$pid"); [ "$t" -gt $peak ] && peak=$t; sleep 0.05; done
        wait $cp
        t=$(tree_cpu "$pid"); [ "$t" -gt $peak ] && peak=$t
        read -r e u s < "$dir/t"
        echo "$side wall=$e client_cpu=$(echo "$u+$s" | bc) server_cpu=$(echo "scale=2; ($peak-$s0)/100" | bc)"
    done
done | awk '{print} {split($2,w,"=");split($3,c,"=");split($4,v,"=");W[$1]+=w[2];C[$1]+=c[2];S[$1]+=v[2];N[$1]++}
    END{for(k in N) printf "mean %s wall %.3f s client %.3f s server %.3f s (%d runs)\n",k,W[k]/N[k],C[k]/N[k],S[k]/N[k],N[k]}'
