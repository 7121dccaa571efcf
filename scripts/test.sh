#!/usr/bin/env bash
# The whole mirrorgate test suite, from a fresh clone: installs what the tests need (Kafka jars
# into .cache/, confluent-kafka into .venv/, the Go test client and its pinned modules,
# Prometheus from Debian's package when missing), then
# runs unit and integration tests. Integration tests start their own Kafka clusters on
# loopback with scripts/kafka.sh and stop them on exit.
set -euo pipefail
cd "$(dirname "$0")/.."

step() { printf '\n==> %s\n' "$*"; }

# Every prerequisite first, all problems at once (README.md, "Prerequisites").
source scripts/prereqs.sh
prereq_rust
prereq_kafka
prereq_python
prereq_go
prereq_cmd openssl "OpenSSL" "the TLS tests make their certificates with it (scripts/kafka.sh --secure)" "Debian: openssl"
prereq_cmd keytool "keytool" "the TLS tests make Java trust stores with it" "It comes with the JDK (Debian: openjdk-17-jdk-headless)"
prereq_cmd tmux "tmux" "tests/describe_watch.rs runs \`mirrors --describe --watch\` in a terminal" "Debian: tmux"
prereq_cmd gzip "gzip" "tests/broker_behaviour.rs compresses a batch with it" "Debian: gzip"
# Prometheus: installed below from Debian's package when missing, which needs apt-get and root
# or sudo.
if ! command -v prometheus >/dev/null || ! command -v promtool >/dev/null; then
  if ! command -v apt-get >/dev/null; then
    PREREQ_PROBLEMS+=("Prometheus (prometheus, promtool): not found on PATH, and no apt-get to install Debian's package; tests/prometheus.rs runs them. Install it from https://prometheus.io/download/ (the tests run with Debian 12's 2.42.0) and put prometheus and promtool on PATH")
  elif [[ "$(id -u)" -ne 0 ]] && ! command -v sudo >/dev/null; then
    PREREQ_PROBLEMS+=("Prometheus (prometheus, promtool): not found on PATH; make test installs Debian's package with apt-get, which needs root or sudo. Install it first: apt-get install prometheus")
  fi
fi
prereq_report "make test"

step "Kafka jars (4.1.1 for the suite, 4.4.0 for the smoke test, 3.9.1 with its tiered-storage test jar for tests/versions.rs)"
scripts/kafka.sh fetch 4.1.1 >/dev/null
scripts/kafka.sh fetch 4.4.0 >/dev/null
scripts/kafka.sh fetch 3.9.1 >/dev/null
scripts/kafka.sh fetch-tiered 3.9.1 >/dev/null

step "Python test client (confluent-kafka / librdkafka) in .venv"
PY="$(scripts/pyenv.sh)"

step "The fault runner's judge: pytest of faults/ with synthetic views (faults/tests)"
"$PY" -m pytest -q -p no:cacheprovider faults/tests

step "Go test client (franz-go, sarama; modules pinned in tests/go/go.sum)"
(cd tests/go && go build -mod=readonly -o ../../target/test-mirrorgate/go-produce ./produce)

step "Prometheus and promtool (tests/prometheus.rs), from Debian when missing (about 10 s)"
if ! command -v prometheus >/dev/null || ! command -v promtool >/dev/null; then
  sudo=""; [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get install -y --no-install-recommends prometheus >/dev/null \
    || { $sudo apt-get update >/dev/null && $sudo apt-get install -y --no-install-recommends prometheus >/dev/null; }
fi
prometheus --version | head -n 1

step "cargo test: unit tests"
cargo test --lib --bins --no-fail-fast -- --test-threads="${MIRRORGATE_TEST_THREADS:-4}" "$@"

jobs="${MIRRORGATE_TEST_JOBS:-2}"
step "cargo test: integration tests, ${jobs} binaries at a time (MIRRORGATE_TEST_JOBS)"
# The tests inside a binary share its Kafka clusters; binaries run side by side, longest first,
# each with its own clusters and ports; output per binary in target/test-logs/.
cargo test --tests --no-run --message-format=json-render-diagnostics >target/test-binaries.json
python3 scripts/run_test_binaries.py "$jobs" --test-threads="${MIRRORGATE_TEST_THREADS:-4}" "$@" \
  <target/test-binaries.json

step "benches, in test mode (build check; Criterion runs each once)"
cargo test --benches --no-fail-fast
