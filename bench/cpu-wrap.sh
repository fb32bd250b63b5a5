#!/bin/bash
# Runs a command, passes its stdout through, then prints the CPU seconds it used (user +
# system, children included) and those a background server used meanwhile, for haul-bench
# `record` metrics:
#   client_cpu_s <seconds>
#   server_cpu_s <seconds>
# usage: cpu-wrap.sh SERVER_PID_FILE -- COMMAND...
set -u
pidfile=$1; shift
[ "${1:-}" = "--" ] && shift
spid=$(cat "$pidfile")
tck=$(getconf CLK_TCK)
scpu() { awk '{print $14+$15}' "/proc/$spid/stat"; }
s0=$(scpu)
tfile=$(mktemp)
/usr/bin/time -f '%U %S' -o "$tfile" "$@"
rc=$?
s1=$(scpu)
read -r u s < "$tfile"
rm -f "$tfile"
echo "client_cpu_s $(echo "$u + $s" | bc)"
echo "server_cpu_s $(echo "scale=2; ($s1 - $s0) / $tck" | bc)"
exit $rc
