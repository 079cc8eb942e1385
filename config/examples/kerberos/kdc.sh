#!/usr/bin/env bash
# Starts (or stops) the Kerberos KDC of the 3-node Kerberos example: a fresh
# MIT Kerberos realm, STRAND.EXAMPLE, served by an unprivileged krb5kdc on
# 127.0.0.1:${KDC_PORT:-8888}, with a principal and a keytab per node
# (kafka/127.0.0.1, kafka/127.0.0.2, kafka/127.0.0.3) and one client, alice.
# Everything lives in ./data/kerberos (run it from the repository root).
#
#   config/examples/kerberos/kdc.sh start   # make the realm, start the KDC, print the next commands
#   config/examples/kerberos/kdc.sh stop    # stop the KDC
#   config/examples/kerberos/kdc.sh clean   # stop it and delete ./data/kerberos
#
# Needs Debian's krb5-kdc, krb5-admin-server and krb5-user (and, for kcat,
# kcat and libsasl2-modules-gssapi-mit).
set -euo pipefail

realm=STRAND.EXAMPLE
port=${KDC_PORT:-8888}
dir=$PWD/data/kerberos
export PATH=$PATH:/usr/sbin:/sbin
export KRB5_CONFIG=$dir/krb5.conf KRB5_KDC_PROFILE=$dir/kdc.conf

stop() {
  if [[ -f $dir/krb5kdc.pid ]]; then
    kill "$(cat "$dir/krb5kdc.pid")" 2>/dev/null || true
    rm -f "$dir/krb5kdc.pid"
  fi
}

case ${1:-} in
start) ;;
stop) stop; exit 0 ;;
clean) stop; rm -rf "$dir"; exit 0 ;;
*) sed -n '2,14p' "$0"; exit 2 ;;
esac

for bin in krb5kdc kdb5_util kadmin.local kinit; do
  command -v "$bin" >/dev/null || { echo "$bin not found: apt-get install -y krb5-kdc krb5-admin-server krb5-user" >&2; exit 1; }
done
[[ -f $dir/krb5kdc.pid ]] && kill -0 "$(cat "$dir/krb5kdc.pid")" 2>/dev/null && { echo "the KDC already runs (pid $(cat "$dir/krb5kdc.pid"))"; exit 0; }
mkdir -p "$dir"

cat >"$dir/kdc.conf" <<CONF
[kdcdefaults]
 kdc_listen = 127.0.0.1:$port
 kdc_tcp_listen = 127.0.0.1:$port
[realms]
 $realm = {
  database_name = $dir/principal
  key_stash_file = $dir/stash
  acl_file = $dir/kadm5.acl
  max_life = 10h 0m 0s
  max_renewable_life = 7d
  supported_enctypes = aes256-cts-hmac-sha1-96:normal aes128-cts-hmac-sha1-96:normal
  default_principal_flags = +preauth
 }
[logging]
 kdc = FILE:$dir/kdc.log
 default = FILE:$dir/krb5.log
CONF

# The clients' and brokers' view: this realm's KDC, no DNS, host names used
# as written (the nodes' principals name their IP addresses).
cat >"$dir/krb5.conf" <<CONF
[libdefaults]
 default_realm = $realm
 dns_lookup_kdc = false
 dns_lookup_realm = false
 dns_canonicalize_hostname = false
 rdns = false
 udp_preference_limit = 1
[realms]
 $realm = {
  kdc = 127.0.0.1:$port
 }
CONF

if [[ ! -f $dir/principal ]]; then
  kdb5_util -r "$realm" create -s -P "strand-example-master-key" >/dev/null 2>&1
  for n in 1 2 3; do
    kadmin.local -r "$realm" -q "addprinc -randkey kafka/127.0.0.$n" >/dev/null 2>&1
    kadmin.local -r "$realm" -q "ktadd -k $dir/node$n.keytab -norandkey kafka/127.0.0.$n" >/dev/null 2>&1
  done
  kadmin.local -r "$realm" -q "addprinc -pw alice-secret alice" >/dev/null 2>&1
  kadmin.local -r "$realm" -q "ktadd -k $dir/alice.keytab -norandkey alice" >/dev/null 2>&1
fi

krb5kdc -r "$realm" -P "$dir/krb5kdc.pid"
for _ in $(seq 50); do
  (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break
  sleep 0.1
done

cat <<EOT
The KDC of realm $realm listens on 127.0.0.1:$port (log: $dir/kdc.log).
Keytabs: $dir/node1.keytab node2.keytab node3.keytab alice.keytab

Start the three nodes, each in its own terminal, from the repository root:

  make build
  export KRB5_CONFIG=$dir/krb5.conf
  ./bin/strand serve --config config/examples/kerberos/node1.properties
  ./bin/strand serve --config config/examples/kerberos/node2.properties
  ./bin/strand serve --config config/examples/kerberos/node3.properties

Produce and consume as alice with kcat (librdkafka's GSSAPI):

  export KRB5_CONFIG=$dir/krb5.conf KRB5CCNAME=FILE:$dir/alice.ccache
  kcat="kcat -b 127.0.0.1:9092,127.0.0.2:9092,127.0.0.3:9092 -X security.protocol=sasl_plaintext \\
    -X sasl.mechanisms=GSSAPI -X sasl.kerberos.service.name=kafka \\
    -X sasl.kerberos.principal=alice@$realm -X sasl.kerberos.keytab=$dir/alice.keytab"
  echo hello | \$kcat -P -t greetings
  \$kcat -C -t greetings -e

Stop the KDC with: config/examples/kerberos/kdc.sh stop
EOT
