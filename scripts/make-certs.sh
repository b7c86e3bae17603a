#!/usr/bin/env bash
# make-certs.sh: a private CA and certificates for streamlearn's TLS and mTLS
# (docs/SECURITY.md), with openssl. For tests, the demo and a first deployment; a production
# deployment would take its certificates from its own PKI (cert-manager, Vault, ...).
#
#   scripts/make-certs.sh DIR [--server NAME[,SAN...]]... [--client NAME]... [--days N]
#
# Writes into DIR (created, mode 0700):
#   ca.crt, ca.key           the CA (made once; reused when DIR already has one)
#   NAME.crt, NAME.key       per --server: SANs DNS:NAME, DNS:localhost, IP:127.0.0.1 and any
#                            extra SAN given after commas (DNS names, or IP:a.b.c.d);
#                            usable as a server and as a client certificate (the servers of a
#                            cluster call one another with theirs)
#   NAME.crt, NAME.key       per --client: subject CN=NAME and no SAN, so the identity the
#                            server sees (and the access policy names as "cert_identity") is
#                            NAME
# Keys are EC P-256, mode 0600. Existing files other than the CA are replaced.
set -euo pipefail

usage() {
  sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'
  exit "${1:-2}"
}

[[ $# -ge 1 ]] || usage
case "$1" in -h|--help) usage 0 ;; esac
DIR=$1
shift
DAYS=825
SERVERS=()
CLIENTS=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --server) [[ $# -ge 2 ]] || usage; SERVERS+=("$2"); shift 2 ;;
    --client) [[ $# -ge 2 ]] || usage; CLIENTS+=("$2"); shift 2 ;;
    --days) [[ $# -ge 2 ]] || usage; DAYS=$2; shift 2 ;;
    -h|--help) usage 0 ;;
    *) echo "make-certs.sh: unknown argument '$1'" >&2; usage ;;
  esac
done
command -v openssl >/dev/null || { echo "make-certs.sh: needs openssl (apt-get install openssl)" >&2; exit 1; }

umask 077
mkdir -p "$DIR"
chmod 700 "$DIR"
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

if [[ ! -f "$DIR/ca.crt" || ! -f "$DIR/ca.key" ]]; then
  openssl ecparam -name prime256v1 -genkey -noout -out "$DIR/ca.key" 2>/dev/null
  openssl req -x509 -new -key "$DIR/ca.key" -sha256 -days "$((DAYS * 2))" \
    -subj "/CN=streamlearn test CA" \
    -addext "basicConstraints=critical,CA:TRUE" \
    -addext "keyUsage=critical,keyCertSign,cRLSign" \
    -out "$DIR/ca.crt"
  chmod 644 "$DIR/ca.crt"
fi

# sign NAME EXTFILE
sign() {
  local name=$1 ext=$2
  openssl ecparam -name prime256v1 -genkey -noout -out "$TMP/$name.key" 2>/dev/null
  openssl req -new -key "$TMP/$name.key" -subj "/CN=$name" -out "$TMP/$name.csr"
  openssl x509 -req -in "$TMP/$name.csr" -CA "$DIR/ca.crt" -CAkey "$DIR/ca.key" \
    -CAcreateserial -CAserial "$TMP/ca.srl" -days "$DAYS" -sha256 -extfile "$ext" \
    -out "$TMP/$name.crt" 2>/dev/null
  chmod 600 "$TMP/$name.key"
  chmod 644 "$TMP/$name.crt"
  # Key first, then the certificate: a watcher that reads between the two renames sees a
  # mismatched pair, which gRPC ignores until both are new.
  mv -f "$TMP/$name.key" "$DIR/$name.key"
  mv -f "$TMP/$name.crt" "$DIR/$name.crt"
}

for spec in "${SERVERS[@]}"; do
  IFS=, read -r -a parts <<<"$spec"
  name=${parts[0]}
  sans="DNS:$name,DNS:localhost,IP:127.0.0.1"
  for extra in "${parts[@]:1}"; do
    if [[ $extra == IP:* || $extra == DNS:* ]]; then sans+=",$extra"; else sans+=",DNS:$extra"; fi
  done
  cat >"$TMP/$name.ext" <<EXT
basicConstraints=critical,CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=serverAuth,clientAuth
subjectAltName=$sans
EXT
  sign "$name" "$TMP/$name.ext"
done

for name in "${CLIENTS[@]}"; do
  cat >"$TMP/$name.ext" <<EXT
basicConstraints=critical,CA:FALSE
keyUsage=critical,digitalSignature
extendedKeyUsage=clientAuth
EXT
  sign "$name" "$TMP/$name.ext"
done
