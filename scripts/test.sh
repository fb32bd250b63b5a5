#!/usr/bin/env bash
# The whole haul test suite, from a fresh Debian machine: installs the real peers the tests
# run against (Grid Community Toolkit, iperf3, UDT4), then runs every workspace test.
set -euo pipefail
cd "$(dirname "$0")/.."

need=()
command -v globus-url-copy >/dev/null      || need+=(globus-gass-copy-progs)
command -v globus-gridftp-server >/dev/null || [ -x /usr/sbin/globus-gridftp-server ] || need+=(globus-gridftp-server-progs)
command -v iperf3 >/dev/null               || need+=(iperf3)
[ -e /usr/include/udt/udt.h ] || [ -e /usr/include/udt.h ] || need+=(libudt-dev)
command -v ip >/dev/null                   || need+=(iproute2)
if [ ${#need[@]} -gt 0 ]; then
  echo "installing: ${need[*]}"
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need[@]}"
fi
export PATH="$PATH:/usr/sbin"

cargo test --workspace "$@"
