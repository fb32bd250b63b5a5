#!/usr/bin/env bash
# Load campaign of the hardening issue: one `haul serve` on 127.0.0.1, 300 honest `haul cp`
# clients at once (downloads, uploads, -r trees, round trips; every transfer verified by haul and
# by SHA-256 here) and 100 hostile slow clients from other loopback addresses. Reports the
# server's peak RSS, threads and fds and what the hostile clients saw; raw results go to
# bench/results/load-campaign-<UTC time>-<haul commit>/. Details: bench/load-campaign.py.
#
# Usage: bench/load-campaign.sh [HAUL_BIN] [load-campaign.py flags...]
#   HAUL_BIN: the haul binary (default: $HAUL_BIN, else target/release/haul of this repo).
#   Takes about 6 minutes (the hostile clients run at least 330 s, so the 300 s idle timeout
#   fires); needs ~3 GB in /var/tmp and `ulimit -n` of at least 8192.
#   Exit status 0 only if every honest transfer completed and verified and the server survived.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
if [ $# -ge 1 ] && [ "${1#-}" = "$1" ]; then
    export HAUL_BIN=$1
    shift
fi
: "${HAUL_BIN:=$here/../target/release/haul}"
# The server holds a socket per session and data connection, the clients as many again.
ulimit -n 20000 2>/dev/null || ulimit -n "$(ulimit -Hn)"
[ "$(ulimit -n)" -ge 8192 ] || { echo "load-campaign: ulimit -n is $(ulimit -n); need 8192" >&2; exit 2; }
exec python3 "$here/load-campaign.py" --haul "$HAUL_BIN" "$@"
