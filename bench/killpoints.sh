#!/usr/bin/env bash
# Kill-point campaign (hardening issue): >= 100 random SIGKILLs of the client, the server or both
# during a 4 GiB transfer on loopback, each resumed with `haul cp --resume` until haul reports
# success; every destination is compared with the source by SHA-256 computed outside haul.
#
#   bench/killpoints.sh                              # 100+ iterations, results in bench/results/
#   HAUL_BIN=/path/to/haul bench/killpoints.sh       # another binary (default target/release/haul)
#   bench/killpoints.sh --iterations 4 --min-kills 0 --out /tmp/kp-estimate   # a timing estimate
#
# Scratch (the 4 GiB source, the served root, destinations, logs) lives in KILLPOINTS_WORK
# (default /tmp/haul-killpoints, ~12 GB free needed); the source is generated once and reused.
# All flags: bench/killpoints.py --help.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
export HAUL_BIN=${HAUL_BIN:-$here/../target/release/haul}
exec python3 "$here/killpoints.py" "$@"
