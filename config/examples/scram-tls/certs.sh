#!/usr/bin/env bash
# Makes the certificates of the 3-node SCRAM-over-TLS example with openssl,
# in ./data/scram-tls/certs (run it from the repository root):
#   ca.key, ca.pem          a CA, which is also the clients' trust store
#   node<n>.pem             node n's key and certificate (CN=node<n>, SAN
#                           IP:127.0.0.1), signed by the CA: its key store
#                           on every listener, and its client certificate
#                           on the controller listener
# Run again, it keeps what exists. `clean` deletes the directory.
set -euo pipefail

dir=$PWD/data/scram-tls/certs
if [[ ${1:-} == clean ]]; then rm -rf "$dir"; exit 0; fi
command -v openssl >/dev/null || { echo "openssl not found: apt-get install -y openssl" >&2; exit 1; }
mkdir -p "$dir"
cd "$dir"

if [[ ! -f ca.pem ]]; then
  openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out ca.key 2>/dev/null
  openssl req -x509 -new -key ca.key -sha256 -days 825 -subj "/CN=Strand example CA" \
    -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" -out ca.pem
fi
for n in 1 2 3; do
  [[ -f node$n.pem ]] && continue
  openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out node$n.key 2>/dev/null
  openssl req -new -key node$n.key -subj "/CN=node$n" -out node$n.csr
  printf '%s\n' "basicConstraints=CA:FALSE" "keyUsage=critical,digitalSignature" \
    "extendedKeyUsage=serverAuth,clientAuth" "subjectAltName=IP:127.0.0.1,DNS:localhost" >node$n.ext
  openssl x509 -req -in node$n.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 825 -sha256 \
    -extfile node$n.ext -out node$n.crt 2>/dev/null
  cat node$n.key node$n.crt >node$n.pem   # a PEM key store: the PKCS#8 key, then the certificate
  rm -f node$n.csr node$n.ext node$n.key node$n.crt
done
chmod 600 ./*.pem ca.key
echo "certificates in $dir: ca.pem (the trust store), node1.pem node2.pem node3.pem (key stores)"
