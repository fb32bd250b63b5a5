#!/usr/bin/env bash
# The fuzzing campaign (fuzz/README.md): builds every cargo-fuzz target once, with debug
# assertions (so integer overflow panics; sanitizers below), then runs them one at a time (or -j at a time), each
# in-process (no -fork) on its corpus in fuzz/corpus/<target>/ (-w processes share that corpus
# and split the runs), and prints a table: target, executions, seconds, exec/s, crashes, corpus
# size. Raw libFuzzer logs, the table and the run's metadata go to
# bench/results/fuzz-campaign-<UTC date>-<short commit>/.
#
# Usage: bench/fuzz-campaign.sh [-r RUNS | -t SECONDS] [-s SESSION_SECONDS] [-j JOBS] [-w WORKERS]
#                               [-o DIR] [TARGET...]
#   -r RUNS      executions per target (libFuzzer -runs; default 10000000)
#   -t SECONDS   run each target for a time instead (libFuzzer -max_total_time)
#   -s SECONDS   a time cap for server_session, which runs at hundreds of inputs per second,
#                not tens of thousands: it stops at RUNS or SECONDS, whichever comes first
#                (default 3600; with -r/-t given and no -s, it follows them like the others)
#   -j JOBS      how many targets run at once (default 1)
#   -w WORKERS   processes per target (default 1), on one shared corpus (libFuzzer re-reads it),
#                each given RUNS / WORKERS runs (or the whole time); the table sums them
#   -o DIR       results directory (default as above)
#   TARGET...    a subset (default: every target `cargo fuzz list` names)
#
# A crash stops that target's run (libFuzzer writes the input to fuzz/artifacts/<target>/) and
# the campaign goes on with the next target; the table counts the new artifacts.

set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
fuzz="$here/fuzz"
runs=10000000
time=""
session_time=""
limit_set=""
out=""
jobs=1
workers=1
args="$*"
while getopts "r:t:s:j:w:o:h" opt; do
  case $opt in
    r) runs=$OPTARG; limit_set=1 ;;
    t) time=$OPTARG; limit_set=1 ;;
    s) session_time=$OPTARG ;;
    o) out=$OPTARG ;;
    j) jobs=$OPTARG ;;
    w) workers=$OPTARG ;;
    h) sed -n '2,23p' "$0"; exit 0 ;;
    *) exit 2 ;;
  esac
done
shift $((OPTIND - 1))
[[ -z $session_time && -z $limit_set ]] && session_time=3600

commit=$(git -C "$here" rev-parse --short HEAD)
dirty=$(git -C "$here" status --porcelain --untracked-files=no -- crates fuzz | wc -l)
stamp=$(date -u +%Y%m%dT%H%MZ)
out=${out:-"$here/bench/results/fuzz-campaign-$stamp-$commit"}
mkdir -p "$out"

cd "$fuzz"
targets=("$@")
if [[ ${#targets[@]} -eq 0 ]]; then
  mapfile -t targets < <(cargo +nightly fuzz list)
fi

{
  echo "command: bench/fuzz-campaign.sh $args"
  echo "runs: $runs  time: ${time:-none}  server_session seconds: ${session_time:-as others}"
  echo "started: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "commit: $(git rev-parse HEAD) (files changed under crates/ or fuzz/ and not committed: $dirty)"
  echo "toolchain: $(rustc +nightly --version)"
  echo "cargo-fuzz: $(cargo fuzz --version 2>/dev/null || echo unknown)"
  echo "host: $(uname -srm), $(nproc) cores, load at start: $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "targets at once: $jobs, processes per target: $workers"
  echo "sanitizers: none for the parser targets, address for server_session (see the script)"
} | tee "$out/meta.txt"

# Sanitizers. The parsers the parser targets reach are safe Rust (no `unsafe` in haul-proto,
# haul-plut, the profile control decoder or haul-xfer's reply readers), where AddressSanitizer
# finds nothing the compiler has not excluded and costs a factor of about 5 in executions; they
# build with `-s none`, keeping debug assertions (`-a`), so an integer overflow still panics.
# server_session drives the server, whose vfs, control and upload code call libc through
# `unsafe` (openat2, poll, flock): it builds with AddressSanitizer, in its own target directory.
host=$(rustc +nightly -vV | sed -n 's/^host: //p')
sanitizer() { [[ $1 == server_session ]] && echo address || echo none; }
bin_of() { if [[ $(sanitizer "$1") == none ]]; then echo "$fuzz/target/$host/release"; else echo "$fuzz/target/asan/$host/release"; fi; }
echo "building (cargo +nightly fuzz build -O -a -s none; server_session with -s address)..."
plain=() asan=()
for t in "${targets[@]}"; do
  if [[ $(sanitizer "$t") == none ]]; then plain+=("$t"); else asan+=("$t"); fi
done
for t in "${plain[@]}"; do
  cargo +nightly fuzz build -O -a -s none "$t" >>"$out/build.log" 2>&1
done
for t in "${asan[@]}"; do
  cargo +nightly fuzz build -O -a -s address --target-dir target/asan "$t" >>"$out/build.log" 2>&1
done

table="$out/summary.md"
printf '| target | executions | seconds | exec/s | crashes | corpus files | corpus bytes |\n' >"$table"
printf '|---|---:|---:|---:|---:|---:|---:|\n' >>"$table"

# The bundled SQLite (haul-store, linked into the targets through haul-xfer and haul-profile)
# has two function-local static arrays named `aiOff`; ASan's start-up check reports them as an
# ODR violation and aborts before the first input. No fuzzed code is SQLite's, so that one check
# is off; every other ASan check stays on.
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_odr_violation=0"

# Runs one target; its table row goes to $out/$t.row.
fuzz_one() {
  local t=$1
  local corpus="corpus/$t" artifacts="artifacts/$t"
  mkdir -p "$corpus" "$artifacts"
  local before after execs start end secs rate crashes files bytes rc
  before=$(find "$artifacts" -type f \( -name 'crash-*' -o -name 'timeout-*' -o -name 'oom-*' -o -name 'leak-*' \) | wc -l)
  local limit=(-runs="$(((runs + workers - 1) / workers))")
  [[ -n $time ]] && limit=(-max_total_time="$time")
  local extra=(-timeout=30)
  if [[ $t == server_session ]]; then
    [[ -n $session_time ]] && limit+=(-max_total_time="$session_time")
    # Server threads outlive an input by design (accept loop, sessions ending), so LeakSanitizer
    # would report their thread-local allocations as leaks.
    extra=(-timeout=60 -detect_leaks=0)
  fi
  echo "== $t ${limit[*]} (started $(date -u +%H:%M:%SZ))"
  start=$(date +%s.%N)
  set +e
  local logs=() pids=() w log n
  for ((w = 0; w < workers; w++)); do
    log="$out/$t.log"
    [[ $workers -gt 1 ]] && log="$out/$t.$w.log"
    logs+=("$log")
    "$(bin_of "$t")/$t" -artifact_prefix="$artifacts/" -print_final_stats=1 "${extra[@]}" "${limit[@]}" "$corpus" >"$log" 2>&1 &
    pids+=($!)
  done
  rc=0
  for w in "${pids[@]}"; do
    wait "$w" || rc=$?
  done
  set -e
  end=$(date +%s.%N)
  after=$(find "$artifacts" -type f \( -name 'crash-*' -o -name 'timeout-*' -o -name 'oom-*' -o -name 'leak-*' \) | wc -l)
  execs=0
  for log in "${logs[@]}"; do
    n=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
    if [[ -z $n ]]; then
      # libFuzzer prints no final stats when it dies; take the last status line's count.
      n=$(grep -oE '^#[0-9]+' "$log" | tail -1 | tr -d '#')
    fi
    execs=$((execs + ${n:-0}))
  done
  secs=$(echo "$end - $start" | bc)
  rate=$(echo "scale=0; $execs / $secs" | bc)
  crashes=$((after - before))
  [[ $rc -ne 0 && $crashes -eq 0 ]] && crashes="exit $rc"
  files=$(find "$corpus" -type f | wc -l)
  bytes=$(du -sb "$corpus" | cut -f1)
  printf '| %s | %s | %.0f | %s | %s | %s | %s |\n' "$t" "$execs" "$secs" "$rate" "$crashes" "$files" "$bytes" | tee "$out/$t.row"
}

for t in "${targets[@]}"; do
  while [[ $(jobs -rp | wc -l) -ge $jobs ]]; do
    wait -n || true
  done
  fuzz_one "$t" &
done
wait
for t in "${targets[@]}"; do
  cat "$out/$t.row" >>"$table"
  rm -f "$out/$t.row"
done

echo "finished: $(date -u +%Y-%m-%dT%H:%M:%SZ), load at end: $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$out/meta.txt"
echo
cat "$table"
echo "results: $out"
