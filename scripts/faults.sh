#!/usr/bin/env bash
# The fault runner (docs/reliability.md): builds mirrorgate, prepares the Python venv and the
# Kafka jars, then runs faults/runner.py in its own network namespace so that the nemesis can
# cut mirrorgate's connections to one cluster (ip rule ... prohibit) without touching the host.
#
#   scripts/faults.sh [--short] [runner options...]
#
# Environment: FAULTS_DURATION (s of faults), FAULTS_SEED (reproduce a schedule),
#   FAULTS_MG_BIN (mirrorgate binary; default: cargo build --release, target/release/mirrorgate),
#   FAULTS_KEEP=1 (keep the clusters' state dirs), MIRRORGATE_CACHE (Kafka jar cache),
#   FAULTS_MARKERS (mirror.transaction.markers of the mirror: real, the default, or placeholder),
#   FAULTS_INSTANCES (mirrorgate instances sharing the mirror work; default 1),
#   FAULTS_LOG_LEVEL (mirrorgate's log filter; default info),
#   FAULTS_NO_NETNS=1 (do not use a network namespace: cuts are then impossible, and the run
#   fails unless FAULTS_WITHOUT=cuts says to do without them),
#   FAULTS_WITHOUT (comma-separated fault kinds the run may go without; `cuts` = both cuts),
#   FAULTS_CHECK_TIMEOUT (s a check may spend reading one view; default 240, 600 final),
#   FAULTS_RATE_SCALE (the workload's rate factor; default 1).
# Exit status: the runner's (0 = passed; 1 = a violation or any failure of verdict.py).
set -euo pipefail
cd "$(dirname "$0")/.."
# Prerequisites first, all problems at once (README.md, "Prerequisites").
source scripts/prereqs.sh
[[ -n "${FAULTS_MG_BIN:-}" ]] || prereq_rust
prereq_kafka
prereq_python
prereq_report faults
if [[ -z "${FAULTS_MG_BIN:-}" ]]; then
  cargo build --release --bin mirrorgate >&2
  export FAULTS_MG_BIN="$PWD/target/release/mirrorgate"
fi
PY="$(scripts/pyenv.sh)"
scripts/kafka.sh fetch >&2
if [[ "${FAULTS_NO_NETNS:-0}" != "1" ]] && unshare -n true 2>/dev/null && command -v ip >/dev/null; then
  # In the new namespace: loopback up, and the local-table rule moved from priority 0 to 100
  # so that the runner's `prohibit` rules (priority 50/51) come first.
  exec unshare -n -- bash -c 'set -e; ip link set lo up; ip rule add pref 100 lookup local; ip rule del pref 0;
    FAULTS_NETNS=1 exec "$0" faults/runner.py "$@"' "$PY" "$@"
fi
echo "[faults.sh] no network namespace (FAULTS_NO_NETNS=1, or no root/CAP_NET_ADMIN, unshare, ip): network cuts are impossible; the run fails unless FAULTS_WITHOUT=cuts" >&2
exec "$PY" faults/runner.py "$@"
