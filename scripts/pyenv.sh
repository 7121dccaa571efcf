#!/usr/bin/env bash
# Create <repo>/.venv (idempotent) with the Python test dependencies and print
# the venv's python path on stdout (progress goes to stderr).
#
#   PY=$(scripts/pyenv.sh) && "$PY" tests/python/client.py --help
#
# Environment: MIRRORGATE_VENV (default <repo>/.venv), PYTHON (default python3).
set -euo pipefail

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$SCRIPT_DIR/.." && pwd)"
VENV="${MIRRORGATE_VENV:-$REPO/.venv}"
PYTHON="${PYTHON:-python3}"

# Pinned versions; bump together with the marker below.
REQUIREMENTS=(
  "confluent-kafka==2.16.1"   # manylinux wheel bundling librdkafka
  "pytest==9.2.0"
  # OTLP trace receiver of tests/otlp.rs (tests/python/otlp_receiver.py).
  "grpcio==1.76.0"
  "opentelemetry-proto==1.39.1"
  "protobuf==6.33.2"
)
want="$(printf '%s\n' "${REQUIREMENTS[@]}")"
marker="$VENV/.mirrorgate-requirements"

log() { printf '[pyenv.sh] %s\n' "$*" >&2; }

if [[ -x "$VENV/bin/python" && -f "$marker" && "$(cat "$marker")" == "$want" ]]; then
  echo "$VENV/bin/python"
  exit 0
fi

mkdir -p "$(dirname "$VENV")"
exec 9>"$VENV.lock"
flock 9
if [[ -x "$VENV/bin/python" && -f "$marker" && "$(cat "$marker")" == "$want" ]]; then
  echo "$VENV/bin/python"
  exit 0
fi

if [[ ! -x "$VENV/bin/python" ]]; then
  log "creating virtualenv $VENV"
  "$PYTHON" -m venv "$VENV" >&2
fi
log "installing ${REQUIREMENTS[*]}"
"$VENV/bin/python" -m pip install --disable-pip-version-check -q --only-binary confluent-kafka,grpcio \
  "${REQUIREMENTS[@]}" >&2
"$VENV/bin/python" -c 'import confluent_kafka, pytest; print("[pyenv.sh] confluent-kafka", confluent_kafka.__version__, "librdkafka", confluent_kafka.libversion()[0], "pytest", pytest.__version__)' >&2
"$VENV/bin/python" -c 'import grpc, opentelemetry.proto.collector.trace.v1.trace_service_pb2_grpc; print("[pyenv.sh] grpcio", grpc.__version__)' >&2
printf '%s' "$want" >"$marker"
echo "$VENV/bin/python"
