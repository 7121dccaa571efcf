#!/usr/bin/env bash
# `make demo`: a destination Kafka cluster on loopback with mirrorgate in front of it, exercised
# with the stock Kafka command-line tools, all of them talking to mirrorgate only.
#
#   scripts/demo.sh                       run the steps, then keep running until Ctrl-C
#   DEMO_NONINTERACTIVE=1 scripts/demo.sh run the steps and exit
#
# Needs Rust (cargo), Java 17+, Maven and Python 3. On exit (normal, error or Ctrl-C) mirrorgate
# and the `demo-dest` cluster are stopped. mirrorgate's log: target/demo/mirrorgate.log.
# Exit codes: 0 ok, 1 a step failed, 2 mirrorgate's bootstrap port is busy.
set -euo pipefail
cd "$(dirname "$0")/.."

CLUSTER=demo-dest
TOPIC=demo-events
GROUP=demo-group
CONFIG="${DEMO_CONFIG:-proxy.yaml}"   # another file, e.g. when 19092 is taken
LOG_DIR=target/demo
MG_LOG="$LOG_DIR/mirrorgate.log"
READY_TIMEOUT="${DEMO_READY_TIMEOUT:-60}"
# The bootstrap port is the first port of the first listener's port_range in proxy.yaml.
PORT="$(sed -n 's/^[[:space:]]*port_range:[[:space:]]*\([0-9][0-9]*\)-.*/\1/p' "$CONFIG" | head -n 1)"
HOST="$(sed -n 's/^[[:space:]]*advertised_host:[[:space:]]*\([^[:space:]#]*\).*/\1/p' "$CONFIG" | head -n 1)"
HOST="${HOST:-127.0.0.1}"
BOOTSTRAP="$HOST:$PORT"

T0=$(date +%s%3N)
elapsed() { printf '%5.1fs' "$(( $(date +%s%3N) - T0 ))e-3"; }
if [[ -t 1 ]]; then BOLD=$'\033[1m' PLAIN=$'\033[0m'; else BOLD="" PLAIN=""; fi
step() { printf '\n%s==> [%s] %s%s\n' "$BOLD" "$(elapsed)" "$*" "$PLAIN"; }
say() { printf '    %s\n' "$*"; }
die() { printf '\ndemo: ERROR: %s\n' "$*" >&2; exit 1; }
tool() { scripts/kafka.sh tool "$@"; }

MG_PID=""
CLUSTER_STARTED=0
CLEANED=0
cleanup() {
  [[ "$CLEANED" == 1 ]] && return 0
  CLEANED=1
  trap - INT TERM
  if [[ -n "$MG_PID" ]] && kill -0 "$MG_PID" 2>/dev/null; then
    printf '\n==> stopping mirrorgate (pid %s)\n' "$MG_PID"
    kill -INT "$MG_PID" 2>/dev/null || true
    for _ in $(seq 1 50); do kill -0 "$MG_PID" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$MG_PID" 2>/dev/null || true
    wait "$MG_PID" 2>/dev/null || true
  fi
  if [[ "$CLUSTER_STARTED" == 1 ]]; then
    printf '==> stopping the %s cluster\n' "$CLUSTER"
    scripts/kafka.sh stop "$CLUSTER" || true
  fi
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

[[ -n "$PORT" ]] || die "cannot read the first listener's port_range from $CONFIG"
for cmd in cargo java mvn python3; do
  command -v "$cmd" >/dev/null 2>&1 || die "required command not found: $cmd (see README: Rust, Java 17+, Maven, Python 3)"
done

# Bind the port the way mirrorgate will (SO_REUSEADDR, so a TIME_WAIT left by a previous run
# does not count as busy).
if ! python3 - "$PORT" <<'EOF'
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
try:
    s.bind(("127.0.0.1", int(sys.argv[1])))
except OSError as e:
    sys.exit(f"{e}")
EOF
then
  printf '\ndemo: ERROR: port %s is busy; mirrorgate needs it as its bootstrap port.\n' "$PORT" >&2
  printf '      Stop whatever listens there (e.g. `ss -ltnp "sport = :%s"`) or change port_range in %s.\n' \
    "$PORT" "$CONFIG" >&2
  exit 2
fi

step "Building mirrorgate (cargo build --release)"
cargo build --release --quiet --bin mirrorgate

step "Fetching the Kafka jars from Maven Central (cached in .cache/ after the first run)"
scripts/kafka.sh fetch

step "Starting a one-node KRaft destination cluster named $CLUSTER on a free loopback port"
CLUSTER_STARTED=1
DEST="$(scripts/kafka.sh start "$CLUSTER" --owner-pid $$)"
say "the destination broker listens on $DEST; no client below is given that address"

step "Starting mirrorgate with $CONFIG, destination.bootstrap_servers overridden from the environment"
mkdir -p "$LOG_DIR"
say "MIRRORGATE__DESTINATION__BOOTSTRAP_SERVERS=$DEST target/release/mirrorgate run --config $CONFIG"
MIRRORGATE__DESTINATION__BOOTSTRAP_SERVERS="$DEST" target/release/mirrorgate run --config "$CONFIG" \
  </dev/null >"$MG_LOG" 2>&1 &
MG_PID=$!
deadline=$(( $(date +%s) + READY_TIMEOUT ))
until grep -q 'mirrorgate ready' "$MG_LOG" 2>/dev/null; do
  if ! kill -0 "$MG_PID" 2>/dev/null; then
    tail -n 20 "$MG_LOG" >&2 || true
    MG_PID=""
    die "mirrorgate exited before it was ready (log above, full log in $MG_LOG)"
  fi
  if (( $(date +%s) >= deadline )); then
    tail -n 20 "$MG_LOG" >&2 || true
    die "mirrorgate not ready after ${READY_TIMEOUT}s (full log in $MG_LOG)"
  fi
  sleep 0.2
done
grep -E 'listening|connected to destination|mirrorgate ready' "$MG_LOG" | sed 's/^/    | /'

step "Creating topic $TOPIC (3 partitions) through mirrorgate"
tool topics --bootstrap-server "$BOOTSTRAP" --create --topic "$TOPIC" --partitions 3 --replication-factor 1

step "Producing 10 records through mirrorgate with the console producer"
seq 1 10 | sed 's/^/record-/' | tool console-producer --bootstrap-server "$BOOTSTRAP" --topic "$TOPIC"
say "produced record-1 .. record-10"

step "Consuming them back through mirrorgate in consumer group $GROUP"
consumed="$(tool console-consumer --bootstrap-server "$BOOTSTRAP" --topic "$TOPIC" --group "$GROUP" \
  --from-beginning --max-messages 10 --timeout-ms 60000)"
printf '%s\n' "$consumed" | sed 's/^/    | /'
n="$(printf '%s\n' "$consumed" | grep -c '^record-' || true)"
[[ "$n" == 10 ]] || die "expected 10 records back, got $n"
say "got all 10 records back"

step "Describing $GROUP: its coordinator and committed offsets, as seen through mirrorgate"
tool consumer-groups --bootstrap-server "$BOOTSTRAP" --describe --group "$GROUP" 2>&1 | sed 's/^/    | /'
tool consumer-groups --bootstrap-server "$BOOTSTRAP" --describe --group "$GROUP" --state 2>&1 | sed 's/^/    | /'
say "the coordinator is a mirrorgate port too (FindCoordinator answers are rewritten)"

step "Showing that the brokers clients are told about are mirrorgate's ports, not the cluster's"
versions="$(tool broker-api-versions --bootstrap-server "$BOOTSTRAP")"
printf '%s\n' "$versions" | grep -E '^[^[:space:]].*\(id: ' | sed 's/ -> ($//; s/^/    | /'
say "broker id N is served on $PORT + 1 + N; the destination's own address ($DEST) never appears"
if printf '%s\n' "$versions" | grep -qF "$DEST"; then
  die "the destination's address $DEST leaked to a client"
fi

step "Demo done in $(elapsed | tr -d ' ')"
if [[ "${DEMO_NONINTERACTIVE:-0}" == 1 ]]; then
  exit 0
fi
printf '\nmirrorgate is running on %s — press Ctrl-C to stop (log: %s)\n' "$BOOTSTRAP" "$MG_LOG"
trap 'exit 0' INT   # Ctrl-C is the normal way to end the demo from here on
wait "$MG_PID" || true
MG_PID=""
die "mirrorgate exited on its own; see $MG_LOG"
