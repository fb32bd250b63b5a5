#!/usr/bin/env bash
# The disk's own write rate beside the 1 GiB download, in one run, alternating: what a receiver
# writing around the page cache (O_DIRECT) can reach, against a receiver writing into it.
#
#   bench/disk-ceiling.sh [HAUL] [REPS]
#
# Contenders, each writing one 1 GiB file (the source sits in the page cache) into a directory
# on the disk under test, the output removed and `sync`ed before each run:
#   dd-direct-1     dd of the source, 1 MiB writes, O_DIRECT, one writer (fallocated file)
#   dd-direct-4     four dd writers of 256 MiB each, 1 MiB writes, O_DIRECT (fallocated file)
#   dd-cache-1      dd of the source, 1 MiB writes through the page cache
#   haul-direct     haul cp -p 4 from haul serve, verified (XXHC), O_DIRECT (its default)
#   haul-cache      the same with --no-direct-io
#   guc             globus-url-copy -p 4 from globus-gridftp-server, unverified, page cache
# Rates are bytes x 8 / wall seconds, start to exit, Gbit/s. Writes the runs and the medians to
# bench/results/disk-ceiling-<UTC>.txt (or $OUT).
set -euo pipefail

HAUL=${1:-target/release/haul}
REPS=${2:-9}
HAUL=$(readlink -f "$HAUL")
DIR=${DIR:-/var/tmp/haul-disk-ceiling}
STAMP=$(date -u +%Y%m%dT%H%M%SZ)
OUT=${OUT:-$(pwd)/bench/results/disk-ceiling-$STAMP.txt}
GPORT=52941
HPORT=52942
BYTES=1073741824

command -v globus-url-copy >/dev/null || { echo "globus-url-copy missing (globus-gass-copy-progs)" >&2; exit 1; }
mkdir -p "$DIR/src"
chmod o+x "$DIR"
[ -s "$DIR/src/f1g" ] || head -c $BYTES /dev/urandom >"$DIR/src/f1g"
chmod -R a+rwX "$DIR"
cat "$DIR/src/f1g" >/dev/null

/usr/sbin/globus-gridftp-server -c /dev/null -aa -anonymous-user nobody -p $GPORT \
    -control-interface 127.0.0.1 -data-interface 127.0.0.1 -home-dir "$DIR/src" >/dev/null 2>&1 &
GPID=$!
"$HAUL" serve --root "$DIR/src" --listen 127.0.0.1:$HPORT --anonymous --no-history >/dev/null 2>&1 &
HPID=$!
trap 'kill $GPID $HPID 2>/dev/null; rm -f "$DIR/out"' EXIT
sleep 1

run() {
    case $1 in
    dd-direct-1)
        fallocate -l $BYTES "$DIR/out"
        dd if="$DIR/src/f1g" of="$DIR/out" bs=1M oflag=direct conv=notrunc status=none ;;
    dd-direct-4)
        fallocate -l $BYTES "$DIR/out"
        local pids=()
        for k in 0 1 2 3; do
            dd if="$DIR/src/f1g" of="$DIR/out" bs=1M count=256 skip=$((k * 256)) seek=$((k * 256)) \
                oflag=direct conv=notrunc status=none &
            pids+=($!)
        done
        wait "${pids[@]}" ;;
    dd-cache-1)
        dd if="$DIR/src/f1g" of="$DIR/out" bs=1M status=none ;;
    haul-direct)
        "$HAUL" cp -q -p 4 ftp://127.0.0.1:$HPORT/f1g "$DIR/out" --history "$DIR/h.sqlite" ;;
    haul-cache)
        "$HAUL" cp -q -p 4 --no-direct-io ftp://127.0.0.1:$HPORT/f1g "$DIR/out" --history "$DIR/h.sqlite" ;;
    guc)
        globus-url-copy -p 4 ftp://127.0.0.1:$GPORT$DIR/src/f1g "file://$DIR/out" ;;
    esac
}

CONTENDERS=(dd-direct-1 dd-direct-4 dd-cache-1 haul-direct haul-cache guc)
{
    echo "# bench/disk-ceiling.sh $HAUL $REPS, $STAMP, $(git rev-parse --short HEAD 2>/dev/null || echo '?')"
    echo "# $(findmnt -no SOURCE,FSTYPE,OPTIONS -T "$DIR")"
    echo "# rep contender Gbit/s"
} >"$OUT"
for r in $(seq 1 "$REPS"); do
    for c in "${CONTENDERS[@]}"; do
        rm -f "$DIR/out"
        sync
        s=$(date +%s.%N)
        run "$c"
        e=$(date +%s.%N)
        [ "$(stat -c %s "$DIR/out")" = $BYTES ] || { echo "$c: wrong length" >&2; exit 1; }
        echo "$r $c $(echo "$BYTES * 8 / ($e - $s) / 1000000000" | bc -l | cut -c1-6)" | tee -a "$OUT"
    done
done
python3 - "$OUT" <<'EOF' | tee -a "$OUT"
import collections, statistics, sys
runs = collections.defaultdict(list)
for line in open(sys.argv[1]):
    if not line.startswith("#"):
        _, c, v = line.split()
        runs[c].append(float(v))
guc = statistics.median(runs["guc"])
print("# contender median min max ratio-to-guc")
for c, v in runs.items():
    m = statistics.median(v)
    print(f"# {c} {m:.2f} {min(v):.2f} {max(v):.2f} {m / guc:.3f}")
EOF
