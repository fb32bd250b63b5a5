#!/usr/bin/env bash
# The fuzzing campaign (fuzz/README.md): builds every cargo-fuzz target once, with debug
# assertions (so integer overflow panics), then runs them ONE AT A TIME, each in-process on one
# core (no -jobs / -fork), on its corpus in fuzz/corpus/<target>/, and prints a table: target,
# executions, seconds, exec/s, crashes, corpus size. Raw libFuzzer logs, the table and the
# run's metadata go to bench/results/fuzz-campaign-<UTC date>-<short commit>/.
#
# Usage: bench/fuzz-campaign.sh [-r RUNS | -t SECONDS] [-s SESSION_SECONDS] [-o DIR] [TARGET...]
#   -r RUNS      executions per target (libFuzzer -runs; default 10000000)
#   -t SECONDS   run each target for a time instead (libFuzzer -max_total_time)
#   -s SECONDS   time for server_session, which is far too slow for 10^7 runs (default 3600;
#                with -r/-t given and no -s, server_session follows them like the others)
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
while getopts "r:t:s:o:h" opt; do
  case $opt in
    r) runs=$OPTARG; limit_set=1 ;;
    t) time=$OPTARG; limit_set=1 ;;
    s) session_time=$OPTARG ;;
    o) out=$OPTARG ;;
    h) sed -n '2,17p' "$0"; exit 0 ;;
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
  echo "command: bench/fuzz-campaign.sh $*"
  echo "runs: $runs  time: ${time:-none}  server_session seconds: ${session_time:-as others}"
  echo "started: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "commit: $(git rev-parse HEAD) (files changed under crates/ or fuzz/ and not committed: $dirty)"
  echo "toolchain: $(rustc +nightly --version)"
  echo "cargo-fuzz: $(cargo fuzz --version 2>/dev/null || echo unknown)"
  echo "host: $(uname -srm), $(nproc) cores, load at start: $(cut -d' ' -f1-3 /proc/loadavg)"
} | tee "$out/meta.txt"

echo "building (cargo +nightly fuzz build -O -a)..."
cargo +nightly fuzz build -O -a >"$out/build.log" 2>&1
bin="$fuzz/target/$(rustc +nightly -vV | sed -n 's/^host: //p')/release"

table="$out/summary.md"
printf '| target | executions | seconds | exec/s | crashes | corpus files | corpus bytes |\n' >"$table"
printf '|---|---:|---:|---:|---:|---:|---:|\n' >>"$table"

for t in "${targets[@]}"; do
  corpus="corpus/$t"
  artifacts="artifacts/$t"
  mkdir -p "$corpus" "$artifacts"
  before=$(find "$artifacts" -type f \( -name 'crash-*' -o -name 'timeout-*' -o -name 'oom-*' -o -name 'leak-*' \) | wc -l)
  limit=(-runs="$runs")
  [[ -n $time ]] && limit=(-max_total_time="$time")
  extra=(-timeout=30)
  if [[ $t == server_session ]]; then
    [[ -n $session_time ]] && limit=(-max_total_time="$session_time")
    # Server threads outlive an input by design (accept loop, sessions ending), so LeakSanitizer
    # would report their thread-local allocations as leaks.
    extra=(-timeout=60 -detect_leaks=0)
  fi
  echo "== $t ${limit[*]}"
  start=$(date +%s.%N)
  set +e
  "$bin/$t" -artifact_prefix="$artifacts/" -print_final_stats=1 "${extra[@]}" "${limit[@]}" "$corpus" >"$out/$t.log" 2>&1
  rc=$?
  set -e
  end=$(date +%s.%N)
  after=$(find "$artifacts" -type f \( -name 'crash-*' -o -name 'timeout-*' -o -name 'oom-*' -o -name 'leak-*' \) | wc -l)
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$out/$t.log" | tail -1)
  if [[ -z $execs ]]; then
    # libFuzzer prints no final stats when it dies; take the last status line's count.
    execs=$(grep -oE '^#[0-9]+' "$out/$t.log" | tail -1 | tr -d '#')
  fi
  execs=${execs:-0}
  secs=$(echo "$end - $start" | bc)
  rate=$(echo "scale=0; $execs / $secs" | bc)
  crashes=$((after - before))
  [[ $rc -ne 0 && $crashes -eq 0 ]] && crashes="exit $rc"
  files=$(find "$corpus" -type f | wc -l)
  bytes=$(du -sb "$corpus" | cut -f1)
  printf '| %s | %s | %.0f | %s | %s | %s | %s |\n' "$t" "$execs" "$secs" "$rate" "$crashes" "$files" "$bytes" | tee -a "$table"
done

echo "finished: $(date -u +%Y-%m-%dT%H:%M:%SZ), load at end: $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$out/meta.txt"
echo
cat "$table"
echo "results: $out"
