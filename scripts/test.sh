#!/usr/bin/env bash
# The whole haul test suite, from a fresh Debian machine: installs the real peers the tests
# run against (Grid Community Toolkit with its UDT driver and GSI tools, iperf3, UDT4, gfal2,
# Prometheus), checks formatting and clippy lints, then
# runs every workspace test.
set -euo pipefail
cd "$(dirname "$0")/.."

need=()
command -v globus-url-copy >/dev/null      || need+=(globus-gass-copy-progs)
command -v globus-gridftp-server >/dev/null || [ -x /usr/sbin/globus-gridftp-server ] || need+=(globus-gridftp-server-progs)
command -v iperf3 >/dev/null               || need+=(iperf3)
[ -e /usr/include/udt/udt.h ] || [ -e /usr/include/udt.h ] || need+=(libudt-dev)
# Globus's UDT XIO driver (only a Recommends of the server), for the UDT interop tests.
dpkg -s libglobus-xio-udt-driver >/dev/null 2>&1 || need+=(libglobus-xio-udt-driver)
command -v ip >/dev/null                   || need+=(iproute2)
# A real Prometheus that scrapes `haul serve --metrics` (crates/haul/tests/serve_ops.rs).
[ -x /usr/bin/prometheus ]                 || need+=(prometheus)
# GSI (gsiftp://): grid-proxy-init makes the test proxies, openssl the test CA; OpenSSL's
# headers build the data-channel acceptor (haul-transport's openssl crate).
command -v grid-proxy-init >/dev/null      || need+=(globus-proxy-utils)
command -v openssl >/dev/null              || need+=(openssl)
[ -e /usr/include/openssl/ssl.h ]          || need+=(libssl-dev)
command -v pkg-config >/dev/null           || need+=(pkg-config)
# gfal2, the library FTS and Rucio move data through, with its GridFTP plugin (relay interop).
/usr/bin/python3 -c 'import gfal2' 2>/dev/null || need+=(python3-gfal2)
dpkg -s gfal2-plugin-gridftp >/dev/null 2>&1 || need+=(gfal2-plugin-gridftp)
if [ ${#need[@]} -gt 0 ]; then
  echo "installing: ${need[*]}"
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need[@]}"
fi
export PATH="$PATH:/usr/sbin"

# Format and lints first: they take seconds and fail with the exact line. Both ship with rustup's
# default profile; a toolchain without them says so and the tests still run.
if cargo fmt --version >/dev/null 2>&1; then
  cargo fmt --all --check
  (cd fuzz && cargo fmt --all --check)
else
  echo "skipping the format check: rustfmt is not installed (rustup component add rustfmt)"
fi
if cargo clippy --version >/dev/null 2>&1; then
  cargo clippy --workspace --all-targets -- -D warnings
else
  echo "skipping clippy: it is not installed (rustup component add clippy)"
fi

cargo test --workspace "$@"
