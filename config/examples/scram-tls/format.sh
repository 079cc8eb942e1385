#!/usr/bin/env bash
# Formats the three nodes of the SCRAM-over-TLS example (run it from the
# repository root, after certs.sh), bootstrapping the metadata log with two
# SCRAM credentials, as kafka-storage.sh format --add-scram does (KIP-900):
#   broker  SCRAM-SHA-512  the user the nodes replicate as (a super user)
#   admin   SCRAM-SHA-512  the operator, who then adds client users with
#                          strand configs
# Every node is a controller, so each gets the credentials; whichever
# becomes the active controller first writes them into the log. STRAND is
# the strand binary (default ./bin/strand, make build).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
strand=${STRAND:-./bin/strand}
for n in 1 2 3; do
  "$strand" format --config "$here/node$n.properties" \
    --add-scram 'SCRAM-SHA-512=[name=broker,password=broker-secret]' \
    --add-scram 'SCRAM-SHA-512=[name=admin,password=admin-secret]'
done
