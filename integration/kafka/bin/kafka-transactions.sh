#!/usr/bin/env bash
# The Kafka distribution's bin/kafka-transactions.sh, from the jars this project fetched
# (integration/kafka/tools.py): put this directory on PATH to run the runbooks' commands.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)"
python="$root/.venv/bin/python"
[ -x "$python" ] || python=python3
cp="$(cd "$root" && "$python" -m integration.kafka.tools classpath)"
exec java -cp "$cp" org.apache.kafka.tools.TransactionsCommand "$@"
