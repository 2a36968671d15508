#!/usr/bin/env bash
# Revoke certificates the CA of scripts/tls-certs.sh signed, and write its certificate
# revocation list: DIR/ca.crl, for latnet-ctld --tls-client-crl DIR/ca.crl (with
# --tls-client-ca DIR/ca.crt). Every certificate revoked in DIR so far is on it; with no
# CERT the list is written as it stands (empty the first time). Send latnet-ctld SIGHUP to
# read a renewed list.
#
# usage: scripts/tls-revoke.sh [--days N] DIR [CERT ...]
# The list's next update is N days (default 30) from now: latnet-ctld refuses a list past it,
# and refuses every client once the list it has passes it, so run this again (then SIGHUP)
# before then, from cron or a timer.
set -euo pipefail
usage() { echo "usage: $0 [--days N] DIR [CERT ...]" >&2; exit 2; }
days=30
if [ "${1:-}" = --days ]; then
  [[ ${2:-} =~ ^[1-9][0-9]{0,4}$ ]] || { echo "$0: --days: expected a whole number of days from 1 to 99999, got '${2:-}'" >&2; exit 2; }
  days=$2
  shift 2
fi
[ $# -ge 1 ] || usage
dir=$1
shift
for f in "$dir/ca.crt" "$dir/ca.key"; do
  [ -f "$f" ] || { echo "$0: $f: no such file (make the CA with scripts/tls-certs.sh $dir)" >&2; exit 1; }
done
# the CA's records for openssl ca: which certificates it revoked, the list's number
cnf="$dir/ca-revoke.cnf"
printf '[ca]\ndefault_ca = latnet\n[latnet]\ndatabase = %s\ncrlnumber = %s\ndefault_md = sha256\ndefault_crl_days = %s\n' \
  "$dir/ca-index.txt" "$dir/ca-crlnumber" "$days" > "$cnf"
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
echo "$dir/ca.crl (latnet-ctld --tls-client-crl): $(grep -c '^R' "$dir/ca-index.txt" || true) revoked, next update in $days days"
