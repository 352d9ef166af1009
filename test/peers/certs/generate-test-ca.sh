#!/bin/sh
# Regenerates the test CA and the leaf it signs (test/peers/certs). Test-only keys: never use them
# anywhere else. 100-year validity so the fixtures never expire under the tests.
set -e
cd "$(dirname "$0")"
openssl req -x509 -newkey rsa:2048 -nodes -keyout test-ca-key.pem -out test-ca-cert.pem -days 36500 \
  -subj "/CN=Postyard Test CA" -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign"
openssl req -newkey rsa:2048 -nodes -keyout ca-leaf-key.pem -out ca-leaf.csr -subj "/CN=mx.sts.test"
cat > ca-leaf.ext <<EXT
basicConstraints=CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=serverAuth
subjectAltName=DNS:*.sts.test,DNS:*.a.sts.test,DNS:*.b.sts.test,DNS:*.c.sts.test,DNS:*.d.sts.test,DNS:localhost,IP:127.0.0.1
EXT
openssl x509 -req -in ca-leaf.csr -CA test-ca-cert.pem -CAkey test-ca-key.pem -CAcreateserial \
  -out ca-leaf-cert.pem -days 36500 -extfile ca-leaf.ext
rm -f ca-leaf.csr ca-leaf.ext test-ca-cert.srl
