#!/usr/bin/env bash
# Make a certificate authority, a service certificate it signed and a client certificate it
# signed, for the Chameleon service's TLS: latnet-ctld --tls-cert DIR/service.crt --tls-key
# DIR/service.key, its clients (host agents, latnet chameleon ...) trust DIR/ca.crt with
# --ca-file; with latnet-ctld --tls-client-ca DIR/ca.crt (mutual TLS) clients present
# DIR/client.crt and DIR/client.key (--client-cert / --client-key).
#
# usage: scripts/tls-certs.sh DIR [NAME ...]
#   NAME: an IP address or DNS name clients reach the service by (default: 127.0.0.1 localhost).
# A certificate from your own CA works the same; it must name the service's address and not be
# a CA certificate itself (rustls refuses a CA certificate as a server's).
set -euo pipefail
[ $# -ge 1 ] || { echo "usage: $0 DIR [NAME ...]" >&2; exit 2; }
dir=$1
shift
names=("$@")
[ ${#names[@]} -eq 0 ] && names=(127.0.0.1 localhost)
san=""
for n in "${names[@]}"; do
  if [[ $n =~ ^[0-9.]+$ || $n == *:* ]]; then san+="IP:$n,"; else san+="DNS:$n,"; fi
done
san=${san%,}
# openssl talks on stderr even when it works: show it only when it fails
run() { local out; out=$("$@" 2>&1) || { echo "$out" >&2; exit 1; }; }
mkdir -p "$dir"
ec=(-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes)
run openssl req -x509 "${ec[@]}" -days 825 -subj "/CN=latnet CA" \
  -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" \
  -keyout "$dir/ca.key" -out "$dir/ca.crt"
run openssl req "${ec[@]}" -subj "/CN=${names[0]}" -keyout "$dir/service.key" -out "$dir/service.csr"
ext="$dir/service.ext"
printf 'subjectAltName=%s\nbasicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth\n' \
  "$san" > "$ext"
run openssl x509 -req -in "$dir/service.csr" -CA "$dir/ca.crt" -CAkey "$dir/ca.key" \
  -CAcreateserial -days 825 -extfile "$ext" -out "$dir/service.crt"
run openssl req "${ec[@]}" -subj "/CN=latnet client" -keyout "$dir/client.key" -out "$dir/client.csr"
printf 'basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=clientAuth\n' > "$ext"
run openssl x509 -req -in "$dir/client.csr" -CA "$dir/ca.crt" -CAkey "$dir/ca.key" \
  -CAcreateserial -days 825 -extfile "$ext" -out "$dir/client.crt"
rm -f "$dir/service.csr" "$dir/client.csr" "$dir/ca.srl" "$ext"
chmod 600 "$dir/ca.key" "$dir/service.key" "$dir/client.key"
echo "$dir/ca.crt (clients: --ca-file), $dir/service.crt and $dir/service.key (latnet-ctld --tls-cert / --tls-key) for ${names[*]}, $dir/client.crt and $dir/client.key (mutual TLS)"
