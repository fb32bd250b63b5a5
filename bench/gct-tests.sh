#!/usr/bin/env bash
# The Grid Community Toolkit's own client tests against `haul serve` and
# `globus-gridftp-server`, in one run, with per-program pass/fail counts side by side.
#
#   sudo bash bench/gct-tests.sh                 # every driver, both servers
#   GCT_DRIVERS="get-test.pl put-test.pl" bash bench/gct-tests.sh   # a subset
#
# What it runs:
#   * globus_ftp_client's test/ programs (globus-ftp-client-*-test: get-test, put-test, ...),
#     compiled by hand from the toolkit's source against Debian's libglobus-ftp-client-dev,
#     driven by their own perl scripts (get-test.pl, ...: each a TAP list of cases);
#   * globus_gass_copy's test/ drivers (guc-*.pl), which run globus-url-copy.
# The source comes from Debian's source packages (`apt-get source`); only the orig tarball is
# used, and only the test programs are built, never the libraries.
#
# Set-up, as the toolkit's own test-wrapper does it but with a host certificate: a throwaway
# CA with a signing policy, a host certificate for localhost/127.0.0.1, a user certificate and
# a grid-proxy-init proxy. Both servers map the user to `nobody` (globus-gridftp-server refuses
# root), `haul serve` runs as nobody too, and the drivers run as nobody, so both servers see
# the same files with the same rights. Each test program is wrapped in `timeout` (a case
# that hangs fails after GCT_CASE_TIMEOUT seconds, the driver goes on).
#
# Environment:
#   HAUL             haul binary (default: $CARGO_TARGET_DIR or target/, release/haul; built
#                    with cargo when missing)
#   GCT_WORK         scratch directory (default /tmp/haul-gct)
#   GCT_DRIVERS      drivers to run (default: all of both packages' Makefile.am TESTS)
#   GCT_SERVERS      "haul globus" (default), or one of them
#   GCT_CASE_TIMEOUT seconds one test program may run (default 90: above haul serve's 60 s
#                    --data-timeout, after which a data connection that never comes fails)
#   GCT_RESUME       set: keep the logs of an earlier run and skip the drivers that have
#                    theirs (a driver cut short: delete its .tap files first)
#   GCT_REPORT_ONLY  set: run nothing, make the summary from the logs of an earlier run
#                    (drivers without a log show as -/-)
#   GCT_RESULTS      results file (default bench/results/gct-tests-<UTC date>-<commit>.txt)
#
# Must run as root (it installs packages and starts globus-gridftp-server, which maps users).
set -euo pipefail

REPO=$(cd "$(dirname "$0")/.." && pwd)
WORK=${GCT_WORK:-/tmp/haul-gct}
SERVERS=${GCT_SERVERS:-haul globus}
CASE_TIMEOUT=${GCT_CASE_TIMEOUT:-90}
DATE=$(date -u +%Y-%m-%d)
COMMIT=$(git -C "$REPO" rev-parse --short HEAD 2>/dev/null || echo unknown)
RESULTS=${GCT_RESULTS:-$REPO/bench/results/gct-tests-$DATE-$COMMIT.txt}
RUNAS=nobody

log() { printf '== %s\n' "$*" >&2; }
die() { printf 'gct-tests: %s\n' "$*" >&2; exit 1; }

[ "$(id -u)" = 0 ] || die "run as root"

# ---------------------------------------------------------------- packages
PKGS=(dpkg-dev build-essential pkg-config libltdl-dev openssl perl liburi-perl
      libglobus-ftp-client-dev libglobus-gass-copy-dev globus-gass-copy-progs
      globus-gridftp-server-progs globus-proxy-utils)
missing=()
for p in "${PKGS[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
# Source packages: a deb-src entry for the release's own suites, and the next release's as a
# fallback (a mirror may no longer hold the older orig tarball).
if ! grep -rqs '^Types:.*deb-src\|^deb-src' /etc/apt/sources.list /etc/apt/sources.list.d/ \
    || ! apt-cache showsrc globus-ftp-client >/dev/null 2>&1; then
    cat > /etc/apt/sources.list.d/haul-gct-src.sources <<'EOF'
Types: deb-src
URIs: http://deb.debian.org/debian
Suites: bookworm bookworm-updates trixie
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
    NEED_UPDATE=1
fi
if [ ${#missing[@]} -gt 0 ] || [ -n "${NEED_UPDATE:-}" ]; then
    log "apt-get install ${missing[*]:-(sources only)}"
    apt-get update -qq
    [ ${#missing[@]} -eq 0 ] || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi

mkdir -p "$WORK"
chmod 0755 "$WORK"

# ---------------------------------------------------------------- source
# `apt-get source` fails as a whole when one file of the source package is missing on the
# mirror, but keeps what it got: the orig tarball is all the tests need.
fetch_src() { # package -> path of the unpacked orig tree
    local pkg=$1 dir="$WORK/src" t
    mkdir -p "$dir"
    t=$(ls "$dir"/"${pkg}"_*.orig.tar.gz 2>/dev/null | head -1 || true)
    if [ -z "$t" ]; then
        (cd "$dir" && apt-get source --download-only "$pkg" >&2 2>&1) || true
        t=$(ls "$dir"/"${pkg}"_*.orig.tar.gz 2>/dev/null | head -1 || true)
    fi
    if [ -z "$t" ]; then
        (cd "$dir" && apt-get source --download-only "$pkg/trixie" >&2 2>&1) || true
        t=$(ls "$dir"/"${pkg}"_*.orig.tar.gz 2>/dev/null | head -1 || true)
    fi
    [ -n "$t" ] || die "apt-get source $pkg fetched no orig tarball"
    local top
    top=$(tar tzf "$t" | head -1 | cut -d/ -f1)
    [ -d "$dir/$top" ] || tar xzf "$t" -C "$dir"
    echo "$dir/$top"
}
FTPC_SRC=$(fetch_src globus-ftp-client)
GASS_SRC=$(fetch_src globus-gass-copy)
log "sources: $FTPC_SRC $GASS_SRC"

# ---------------------------------------------------------------- build the test programs
BUILD="$WORK/ftp-client-test"
if [ ! -x "$BUILD/.built" ]; then
    log "building globus_ftp_client's test programs in $BUILD"
    rm -rf "$BUILD"
    mkdir -p "$BUILD"
    cp -r "$FTPC_SRC"/test/. "$BUILD"/
    cd "$BUILD"
    # The programs call LTDL_SET_PRELOADED_SYMBOLS(); libtool's -dlpreopen would make this
    # table. Empty, the GSI and other XIO drivers are loaded from the installed libraries.
    cat > preload_stub.c <<'EOF'
#include <ltdl.h>
const lt_dlsymlist lt__PROGRAM__LTX_preloaded_symbols[] = { { "@PROGRAM@", NULL }, { NULL, NULL } };
EOF
    CF="$(pkg-config --cflags globus-ftp-client globus-common) -I. -O1 -g -w"
    LIBS="$(pkg-config --libs globus-ftp-client globus-common) -lltdl"
    # shellcheck disable=SC2086
    gcc $CF -c preload_stub.c globus_ftp_client_test_*.c
    ar rcs libftptest.a globus_ftp_client_test_*.o preload_stub.o
    PROGS=$(sed -n '/^check_PROGRAMS/,/^$/p' Makefile.am | grep -v check_PROGRAMS | tr -d '\\')
    for p in $PROGS; do
        # shellcheck disable=SC2086
        gcc $CF -o "$p.bin" "$p.c" libftptest.a $LIBS
        # each case is bounded: a hang fails after CASE_TIMEOUT seconds
        printf '#!/bin/sh\nexec timeout -k 5 "${GCT_CASE_TIMEOUT:-90}" "$(dirname "$0")/%s.bin" "$@"\n' \
            "$p" > "$p"
        chmod 0755 "$p"
    done
    # get-test.pl carries a debugging leftover, `@ARGV=(2);`, that runs its case 2 only;
    # without it the driver runs all its cases, as its plan says.
    sed -i 's/^@ARGV=(2);$/# &  (removed by haul bench\/gct-tests.sh)/' get-test.pl
    # URL.pm's host pattern wants a letter first, so it cannot parse gsiftp://127.0.0.1:P/...
    # and the cases that build URLs with it (get-test's bad_url, ...) vanish from the run.
    sed -i 's/\$hostport = .\\G(\[a-zA-Z.-\]/$hostport = '"'"'\\G([a-zA-Z0-9.-]/' URL.pm
    grep -q 'G(\[a-zA-Z0-9.-\]\[a-zA-Z.0-9-\]' URL.pm || die "URL.pm patch did not apply"
    # globus_gass_copy's drivers run `globus-url-copy-noinst`, the uninstalled build.
    cp "$GASS_SRC"/test/*.pl "$BUILD"/
    ln -sf "$(command -v globus-url-copy)" "$BUILD/globus-url-copy-noinst"
    touch .built; chmod +x .built
fi
FTPC_DRIVERS=$(sed -n '/^check_SCRIPTS_run = /,/^$/p' "$FTPC_SRC/test/Makefile.am" | grep -o '[a-z-]*\.pl')
FTPC_DRIVERS="$FTPC_DRIVERS put-test.pl bad-buffer-test.pl"
GASS_DRIVERS="guc-fw.pl guc-pp-cc.pl guc-stack.pl guc-cc.pl guc-cc-fast.pl guc-cc-p2.pl guc-cc-p4.pl guc-cc-stripe.pl guc-cc-stripe-p4.pl"
DRIVERS=${GCT_DRIVERS:-$FTPC_DRIVERS $GASS_DRIVERS}

count() { # tap -> "pass fail" (cases planned but never reported count as failed)
    perl -ne '$p++ if /^ok \d/; $f++ if /^not ok \d/; $n=$1 if /^1\.\.(\d+)/;
        END { $p+=0; $f+=0; $f += $n-$p-$f if $n > $p+$f; print "$p $f\n" }' "$1"
}
LOGS="$WORK/logs"
START=$(date -u +%FT%TZ)
if [ -z "${GCT_REPORT_ONLY:-}" ]; then
# ---------------------------------------------------------------- test PKI
PKI="$WORK/pki"
rm -rf "$PKI"; mkdir -p "$PKI/certificates"; cd "$PKI"
openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.pem -days 2 \
    -subj "/O=Grid/OU=haul gct/CN=Test CA" \
    -addext basicConstraints=critical,CA:true -addext keyUsage=critical,keyCertSign,cRLSign 2>/dev/null
HASH=$(openssl x509 -in ca.pem -noout -hash)
cp ca.pem "certificates/$HASH.0"
cat > "certificates/$HASH.signing_policy" <<'EOF'
access_id_CA X509 '/O=Grid/OU=haul gct/CN=Test CA'
pos_rights globus CA:sign
cond_subjects globus '"/O=Grid/OU=haul gct/*"'
EOF
issue() { # name CN extfile-text
    openssl req -newkey rsa:2048 -nodes -keyout "$1key.pem" -out "$1.csr" \
        -subj "/O=Grid/OU=haul gct/CN=$2" 2>/dev/null
    printf '%b' "$3" > "$1.ext"
    openssl x509 -req -in "$1.csr" -CA ca.pem -CAkey ca.key -CAcreateserial \
        -out "$1cert.pem" -days 2 -extfile "$1.ext" 2>/dev/null
    chmod 0600 "$1key.pem"
}
issue host localhost 'basicConstraints=critical,CA:false\nkeyUsage=critical,digitalSignature,keyEncipherment\nsubjectAltName=DNS:localhost,IP:127.0.0.1\n'
issue user "Test User" 'basicConstraints=critical,CA:false\nkeyUsage=critical,digitalSignature,keyEncipherment,dataEncipherment\n'
HOST_SUBJECT="/O=Grid/OU=haul gct/CN=localhost"
USER_SUBJECT="/O=Grid/OU=haul gct/CN=Test User"
printf '"%s" nobody\n' "$USER_SUBJECT" > grid-mapfile
X509_CERT_DIR="$PKI/certificates" grid-proxy-init -cert usercert.pem -key userkey.pem \
    -out proxy.pem -hours 12 -q
# haul serve (as nobody) keeps its own copy of the host credential; the drivers (as nobody)
# own the proxy, as grid-proxy-init's 0600 demands.
cp hostcert.pem haulhostcert.pem; cp hostkey.pem haulhostkey.pem
chown "$RUNAS" haulhostcert.pem haulhostkey.pem proxy.pem
chmod 0755 "$PKI" "$PKI/certificates"

# ---------------------------------------------------------------- servers
free_port() { perl -MIO::Socket::INET -e 'print IO::Socket::INET->new(Listen=>1,LocalAddr=>"127.0.0.1:0")->sockport'; }
wait_port() { for _ in $(seq 100); do (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0; sleep 0.1; done; return 1; }
[ -n "${GCT_RESUME:-}" ] || rm -rf "$LOGS"
mkdir -p "$LOGS"; chmod 0777 "$LOGS"
[ -z "${GCT_RESUME:-}" ] || mv "$LOGS/haul-serve.log" "$LOGS/haul-serve.log.$(date +%s)" 2>/dev/null || true
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; }
trap cleanup EXIT

if [ -z "${HAUL:-}" ]; then
    HAUL="${CARGO_TARGET_DIR:-$REPO/target}/release/haul"
    [ -x "$HAUL" ] || (cd "$REPO" && cargo build --release -p haul)
fi
[ -x "$HAUL" ] || die "no haul binary at $HAUL"

declare -A PORT
if [[ " $SERVERS " == *" haul "* ]]; then
    PORT[haul]=$(free_port)
    log "haul serve on 127.0.0.1:${PORT[haul]} (as $RUNAS)"
    runuser -u "$RUNAS" -- env NO_COLOR=1 HAUL_LOG="${HAUL_LOG:-debug}" "$HAUL" serve --root / \
        --listen "127.0.0.1:${PORT[haul]}" --no-history \
        --gsi-cert "$PKI/haulhostcert.pem" --gsi-key "$PKI/haulhostkey.pem" \
        --gsi-cert-dir "$PKI/certificates" --gridmap "$PKI/grid-mapfile" \
        > "$LOGS/haul-serve.log" 2>&1 &
    PIDS+=($!)
    wait_port "${PORT[haul]}" || die "haul serve did not start: $(tail "$LOGS/haul-serve.log")"
fi
if [[ " $SERVERS " == *" globus "* ]]; then
    PORT[globus]=$(free_port)
    log "globus-gridftp-server on 127.0.0.1:${PORT[globus]}"
    X509_USER_CERT="$PKI/hostcert.pem" X509_USER_KEY="$PKI/hostkey.pem" \
    X509_CERT_DIR="$PKI/certificates" GRIDMAP="$PKI/grid-mapfile" \
        globus-gridftp-server -c /dev/null -p "${PORT[globus]}" \
        -control-interface 127.0.0.1 -data-interface 127.0.0.1 \
        -d ALL -logfile "$LOGS/globus-gridftp-server.log" > "$LOGS/globus-stdout.log" 2>&1 &
    PIDS+=($!)
    wait_port "${PORT[globus]}" || die "globus-gridftp-server did not start"
fi

# ---------------------------------------------------------------- drivers
chown -R "$RUNAS" "$BUILD"
run_driver() { # server driver -> TAP in $LOGS/<server>-<driver>.tap
    local srv=$1 drv=$2 hp="127.0.0.1:${PORT[$1]}"
    (cd "$BUILD" && runuser -u "$RUNAS" -- env -i PATH="$BUILD:/usr/bin:/bin" HOME=/tmp \
        TMPDIR=/tmp GLOBUS_USAGE_OPTOUT=1 GCT_CASE_TIMEOUT="$CASE_TIMEOUT" \
        X509_CERT_DIR="$PKI/certificates" X509_USER_PROXY="$PKI/proxy.pem" \
        FTP_TEST_SOURCE_HOST="$hp" FTP_TEST_DEST_HOST="$hp" FTP_TEST_FORCE_LOCAL=1 \
        GLOBUS_FTP_CLIENT_TEST_SUBJECT="$HOST_SUBJECT" \
        FTP_TEST_CONTACT="gsiftp://$hp" FTP_TEST_SUBJECT="$HOST_SUBJECT" \
        timeout -k 10 3600 perl "./$drv" > "$LOGS/$srv-$drv.tap" 2>&1) || true
}

for drv in $DRIVERS; do
    for srv in $SERVERS; do
        if [ -n "${GCT_RESUME:-}" ] && [ -f "$LOGS/$srv-$drv.tap" ]; then
            log "$drv against $srv: done in an earlier run"
            continue
        fi
        log "$drv against $srv"
        t0=$(date +%s)
        run_driver "$srv" "$drv"
        log "   $(count "$LOGS/$srv-$drv.tap" | sed 's/ / passed, /') failed ($(( $(date +%s) - t0 )) s)"
    done
done
fi # GCT_REPORT_ONLY

declare -A PASS FAIL
for drv in $DRIVERS; do
    for srv in $SERVERS; do
        if [ -f "$LOGS/$srv-$drv.tap" ]; then
            read -r p f < <(count "$LOGS/$srv-$drv.tap")
        else
            p=-; f=-  # not run (GCT_REPORT_ONLY after a partial run)
        fi
        PASS[$srv,$drv]=$p; FAIL[$srv,$drv]=$f
    done
done

# ---------------------------------------------------------------- summary
mkdir -p "$(dirname "$RESULTS")"
{
    echo "GCT client tests: haul serve vs globus-gridftp-server"
    echo "date: $START .. $(date -u +%FT%TZ)   haul commit: $COMMIT   command: bash bench/gct-tests.sh"
    echo "test source: $(basename "$FTPC_SRC") $(basename "$GASS_SRC") (Debian source packages)"
    echo "libraries: $(dpkg-query -W -f='${Package} ${Version}  ' libglobus-ftp-client2 libglobus-gass-copy2 globus-gass-copy-progs globus-gridftp-server-progs)"
    echo "transport: gsiftp:// on 127.0.0.1, proxy from grid-proxy-init, user mapped to $RUNAS; case timeout ${CASE_TIMEOUT}s"
    echo
    printf '%-32s' "driver"; for srv in $SERVERS; do printf "%20s" "$srv pass/fail"; done; echo
    declare -A TP TF
    for drv in $DRIVERS; do
        printf '%-32s' "$drv"
        for srv in $SERVERS; do
            printf "%20s" "${PASS[$srv,$drv]}/${FAIL[$srv,$drv]}"
            [ "${PASS[$srv,$drv]}" = - ] && continue
            TP[$srv]=$(( ${TP[$srv]:-0} + PASS[$srv,$drv] )); TF[$srv]=$(( ${TF[$srv]:-0} + FAIL[$srv,$drv] ))
        done
        echo
    done
    printf '%-32s' "TOTAL"; for srv in $SERVERS; do printf "%20s" "${TP[$srv]:-0}/${TF[$srv]:-0}"; done; echo
    for srv in $SERVERS; do echo "$srv: ${TP[$srv]:-0} passed, ${TF[$srv]:-0} failed"; done
    if [[ " $SERVERS " == *" haul "* && " $SERVERS " == *" globus "* ]]; then
        echo
        echo "cases that pass on globus and fail on haul:"
        for drv in $DRIVERS; do
            [ -f "$LOGS/haul-$drv.tap" ] && [ -f "$LOGS/globus-$drv.tap" ] || continue
            perl -e 'my %g; open G, $ARGV[1]; while(<G>){ $g{$1}=1 if /^ok (\d+)/ }
                open H, $ARGV[0]; while(<H>){ print "  $ARGV[2]: $_" if /^not ok (\d+)/ && $g{$1} }' \
                "$LOGS/haul-$drv.tap" "$LOGS/globus-$drv.tap" "$drv"
        done
    fi
    echo
    echo "==================== raw driver output (TAP and diagnostics)"
    for drv in $DRIVERS; do
        for srv in $SERVERS; do
            echo "-------------------- $srv $drv"
            cat "$LOGS/$srv-$drv.tap" 2>/dev/null || echo "(not run)"
        done
    done
} > "$RESULTS"
sed -n '1,/^==================== raw/p' "$RESULTS" | head -n -1
echo "results: $RESULTS   server logs: $LOGS"
