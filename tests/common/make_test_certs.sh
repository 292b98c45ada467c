#!/usr/bin/env bash
# Makes the certificates of the TLS tests in DIR (openssl; every key 0600):
#   ca.pem                            the test CA
#   server.pem, server-key.pem        sandboxd's, for localhost, 127.0.0.1 and each ADDRESS
#                                     (an IP address, or else a DNS name)
#   client.pem, client-key.pem        a client's, signed by the CA
#   other-ca.pem, other-client.pem, other-client-key.pem   a client of another CA
#
#   tests/common/make_test_certs.sh DIR [ADDRESS...]
set -euo pipefail
dir="$1"
shift
mkdir -p "$dir"
cd "$dir"
umask 077
san="DNS:localhost,IP:127.0.0.1"
for a in "$@"; do
  if [[ "$a" =~ ^[0-9.]+$ || "$a" == *:* ]]; then san="$san,IP:$a"; else san="$san,DNS:$a"; fi
done
ca() {  # name
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
    -subj "/CN=$1" -keyout "$1-key.pem" -out "$1.pem" 2>/dev/null
}
leaf() {  # name ca extensions
  openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=$1" \
    -keyout "$1-key.pem" -out "$1.csr" 2>/dev/null
  printf '%s\n' "$3" > "$1.ext"
  openssl x509 -req -in "$1.csr" -CA "$2.pem" -CAkey "$2-key.pem" -CAcreateserial -days 2 \
    -extfile "$1.ext" -out "$1.pem" 2>/dev/null
  rm -f "$1.csr" "$1.ext"
}
ca ca
ca other-ca
leaf server ca "subjectAltName=$san
extendedKeyUsage=serverAuth"
leaf client ca "extendedKeyUsage=clientAuth"
leaf other-client other-ca "extendedKeyUsage=clientAuth"
chmod 644 ca.pem other-ca.pem server.pem client.pem other-client.pem
