#!/usr/bin/env bash
# What GSI costs: a 1 GiB file (page cache) downloaded over loopback with globus-url-copy -p 4
# to /dev/null, eight contenders alternating in each round:
#   haul-anon   ftp://    from haul serve, anonymous (no authentication at all)
#   haul-gsi-C  gsiftp:// from haul serve, GSI + DCAU A, PROT C (globus-url-copy's defaults)
#   haul-gsi-P  gsiftp:// from haul serve, GSI + DCAU A, PROT P (-dcpriv)
#   gfs-anon    ftp://    from globus-gridftp-server, anonymous
#   gfs-gsi-C   gsiftp:// from globus-gridftp-server, GSI + DCAU A, PROT C
#   gfs-gsi-P   gsiftp:// from globus-gridftp-server, GSI + DCAU A, PROT P (-dcpriv)
#   cp-anon     ftp://    from haul serve with `haul cp -p 4 --no-verify` as the client
#   cp-gsi-C    gsiftp:// from haul serve with `haul cp -p 4 --no-verify`, GSI + DCAU A, PROT C
# The gfs-anon / gfs-gsi-C pair shows what GSI costs the same client against Globus's own
# server: the client's side of GSI (its handshakes, which it runs one at a time) is in both.
# The test CA comes from openssl, the proxy from grid-proxy-init. Run as root (the Globus
# server maps the user to nobody). Prints one line per run, then the median per contender and
# the ratios haul-gsi-C / haul-anon, gfs-gsi-C / gfs-anon and haul-gsi-P / gfs-gsi-P, and
# what GSI adds to each server's time in milliseconds.
#
# Usage: bench/gsi-cost.sh HAUL_BINARY [ROUNDS]      (default 5 rounds)
#        GSI_COST_BYTES=1000 bench/gsi-cost.sh ...     (another file size: a small one shows
#                                                      the fixed cost alone)
set -euo pipefail
[ $# -ge 1 ] || { sed -n '2,21p' "$0" >&2; exit 2; }
haul=$(realpath "$1") rounds=${2:-5} bytes=${GSI_COST_BYTES:-1073741824}
mbit=$(echo "scale=6; $bytes * 8 / 1000000" | bc)
dir=$(mktemp -d /tmp/gsi-cost.XXXXXX)
pids=()
cleanup() { kill "${pids[@]}" 2>/dev/null || true; rm -rf "$dir"; }
trap cleanup EXIT
cd "$dir"
mkdir -p src certificates
chmod o+x "$dir"
head -c "$bytes" /dev/urandom > src/f1g
chmod -R a+rwX src
cat src/f1g > /dev/null

openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.pem -days 2 \
    -subj "/O=Grid/OU=bench/CN=bench CA" -addext "basicConstraints=critical,CA:true" \
    -addext "keyUsage=critical,keyCertSign,cRLSign" 2>/dev/null
h=$(openssl x509 -in ca.pem -noout -hash)
cp ca.pem "certificates/$h.0"
# The Globus tools refuse a CA without a signing policy.
cat > "certificates/$h.signing_policy" <<'EOF2'
access_id_CA X509 '/O=Grid/OU=bench/CN=bench CA'
pos_rights globus CA:sign
cond_subjects globus '"/O=Grid/OU=bench/*"'
EOF2
issue() { # issue NAME CN EXTENSIONS
    openssl req -newkey rsa:2048 -nodes -keyout "$1key.pem" -out "$1.csr" \
        -subj "/O=Grid/OU=bench/CN=$2" 2>/dev/null
    printf "%b" "$3" > "$1.ext"
    openssl x509 -req -in "$1.csr" -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 \
        -out "$1cert.pem" -extfile "$1.ext" 2>/dev/null
    chmod 600 "$1key.pem"
}
issue host localhost "basicConstraints=critical,CA:false\nkeyUsage=critical,digitalSignature,keyEncipherment\nsubjectAltName=DNS:localhost,IP:127.0.0.1\n"
issue user "Bench User" "basicConstraints=critical,CA:false\nkeyUsage=critical,digitalSignature,keyEncipherment,dataEncipherment\n"
export X509_CERT_DIR=$dir/certificates
grid-proxy-init -q -cert usercert.pem -key userkey.pem -out proxy.pem -hours 2
export X509_USER_PROXY=$dir/proxy.pem
echo '"/O=Grid/OU=bench/CN=Bench User" nobody' > grid-mapfile

"$haul" serve --root "$dir/src" --listen 127.0.0.1:2911 --anonymous --no-history \
    --gsi-cert hostcert.pem --gsi-key hostkey.pem --gsi-cert-dir certificates \
    --gridmap grid-mapfile >/dev/null 2>&1 &
pids+=($!)
X509_USER_CERT=$dir/hostcert.pem X509_USER_KEY=$dir/hostkey.pem GRIDMAP=$dir/grid-mapfile \
    /usr/sbin/globus-gridftp-server -c /dev/null -p 2912 -aa -anonymous-user nobody \
    -control-interface 127.0.0.1 \
    -data-interface 127.0.0.1 >/dev/null 2>&1 &
pids+=($!)
sleep 1

run() { # run NAME ARGS... -> seconds
    local t0 t1
    t0=$(date +%s.%N)
    globus-url-copy -p 4 "$@" file:///dev/null >&2 || { echo "FAILED: globus-url-copy $*" >&2; kill $$; }
    t1=$(date +%s.%N)
    echo "$t1 - $t0" | bc
}
cprun() { # cprun URL -> seconds (haul cp as the client)
    local t0 t1
    t0=$(date +%s.%N)
    "$haul" cp -q -p 4 --no-verify --history "$dir/h.db" "$1" /dev/null >&2 \
        || { echo "FAILED: haul cp $1" >&2; kill $$; }
    t1=$(date +%s.%N)
    echo "$t1 - $t0" | bc
}
declare -A times
for r in $(seq 1 "$rounds"); do
    for c in haul-anon haul-gsi-C haul-gsi-P gfs-anon gfs-gsi-C gfs-gsi-P cp-anon cp-gsi-C; do
        case $c in
            haul-anon) s=$(run ftp://127.0.0.1:2911/f1g) ;;
            haul-gsi-C) s=$(run gsiftp://127.0.0.1:2911/f1g) ;;
            haul-gsi-P) s=$(run -dcpriv gsiftp://127.0.0.1:2911/f1g) ;;
            cp-anon) s=$(cprun ftp://127.0.0.1:2911/f1g) ;;
            cp-gsi-C) s=$(cprun gsiftp://127.0.0.1:2911/f1g) ;;
            gfs-anon) s=$(run "ftp://127.0.0.1:2912$dir/src/f1g") ;;
            gfs-gsi-C) s=$(run "gsiftp://127.0.0.1:2912$dir/src/f1g") ;;
            gfs-gsi-P) s=$(run -dcpriv "gsiftp://127.0.0.1:2912$dir/src/f1g") ;;
        esac
        echo "round $r $c ${s} s $(echo "$mbit / $s" | bc) Mbit/s"
        times[$c]="${times[$c]:-} $s"
    done
done
median() { tr ' ' '\n' <<<"$1" | grep . | sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
for c in haul-anon haul-gsi-C haul-gsi-P gfs-anon gfs-gsi-C gfs-gsi-P cp-anon cp-gsi-C; do
    m=$(median "${times[$c]}")
    echo "median $c $m s $(echo "$mbit / $m" | bc) Mbit/s"
    declare "m_${c//-/_}=$m"
done
echo "ratio haul-gsi-C/haul-anon (time) $(echo "scale=3; $m_haul_gsi_C / $m_haul_anon" | bc)"
echo "ratio cp-gsi-C/cp-anon (time) $(echo "scale=3; $m_cp_gsi_C / $m_cp_anon" | bc)"
echo "ratio gfs-gsi-C/gfs-anon (time) $(echo "scale=3; $m_gfs_gsi_C / $m_gfs_anon" | bc)"
echo "ratio haul-gsi-P/gfs-gsi-P (time) $(echo "scale=3; $m_haul_gsi_P / $m_gfs_gsi_P" | bc)"
echo "GSI adds (PROT C): haul $(echo "($m_haul_gsi_C - $m_haul_anon) * 1000" | bc) ms, globus-gridftp-server $(echo "($m_gfs_gsi_C - $m_gfs_anon) * 1000" | bc) ms, haul serve with haul cp $(echo "($m_cp_gsi_C - $m_cp_anon) * 1000" | bc) ms"
