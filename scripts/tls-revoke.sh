#!/usr/bin/env bash
# Revoke certificates the CA of scripts/tls-certs.sh signed, and write its certificate
# revocation list: DIR/ca.crl, for latnet-ctld --tls-client-crl DIR/ca.crl (with
# --tls-client-ca DIR/ca.crt). Every certificate revoked in DIR so far is on it; with no
# CERT the list is written as it stands (empty the first time). Send latnet-ctld SIGHUP to
# read a renewed list.
#
# usage: scripts/tls-revoke.sh DIR [CERT ...]
# The list is valid for 825 days, as the certificates; latnet-ctld does not check its
# next-update time, so renew it (run this again) when the CA's policy says.
set -euo pipefail
[ $# -ge 1 ] || { echo "usage: $0 DIR [CERT ...]" >&2; exit 2; }
dir=$1
shift
for f in "$dir/ca.crt" "$dir/ca.key"; do
  [ -f "$f" ] || { echo "$0: $f: no such file (make the CA with scripts/tls-certs.sh $dir)" >&2; exit 1; }
done
# the CA's records for openssl ca: which certificates it revoked, the list's number
cnf="$dir/ca-revoke.cnf"
printf '[ca]\ndefault_ca = latnet\n[latnet]\ndatabase = %s\ncrlnumber = %s\ndefault_md = sha256\ndefault_crl_days = 825\n' \
  "$dir/ca-index.txt" "$dir/ca-crlnumber" > "$cnf"
[ -f "$dir/ca-index.txt" ] || : > "$dir/ca-index.txt"
[ -f "$dir/ca-crlnumber" ] || echo 01 > "$dir/ca-crlnumber"
# openssl talks on stderr even when it works: show it only when it fails
run() { local out; out=$("$@" 2>&1) || { echo "$out" >&2; exit 1; }; }
for c in "$@"; do
  run openssl verify -CAfile "$dir/ca.crt" "$c"
  serial=$(openssl x509 -in "$c" -noout -serial | cut -d= -f2)
  if awk -F'\t' -v s="$serial" '$1 == "R" && toupper($4) == toupper(s) { f = 1 } END { exit !f }' \
      "$dir/ca-index.txt"; then
    echo "$c: revoked already" >&2
    continue
  fi
  run openssl ca -config "$cnf" -keyfile "$dir/ca.key" -cert "$dir/ca.crt" -revoke "$c"
done
run openssl ca -config "$cnf" -keyfile "$dir/ca.key" -cert "$dir/ca.crt" -gencrl -out "$dir/ca.crl"
echo "$dir/ca.crl (latnet-ctld --tls-client-crl): $(grep -c '^R' "$dir/ca-index.txt" || true) revoked"
