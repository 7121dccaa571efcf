#!/usr/bin/env bash
# `make demo`: KIP-1279 cluster mirroring end to end on loopback. A source and a destination
# Kafka cluster, mirrorgate in front of the destination (with the repository's proxy.yaml), a
# mirror with two topics, live data, lag converging to 0, a byte-for-byte verification, the
# same records read from both sides, a refused write to a mirror topic, and a failover.
#
#   scripts/demo.sh                       run the steps, then keep running until Ctrl-C
#   DEMO_NONINTERACTIVE=1 scripts/demo.sh run the steps and exit
#
# Needs Rust 1.85+ and a C compiler, Java 17+, Maven, unzip, flock and Python 3.10+ with venv
# (checked first, scripts/prereqs.sh). On exit (normal, error or Ctrl-C) mirrorgate and both
# clusters are stopped. Logs and generated files: target/demo-run/ (DEMO_DIR).
#
# Environment (all optional; the defaults are what `make demo` uses):
#   DEMO_NONINTERACTIVE=1  exit after the last step instead of waiting for Ctrl-C
#   DEMO_CONFIG=FILE       mirrorgate configuration (default proxy.yaml)
#   DEMO_PORT_RANGE=A-B    run mirrorgate on this port range instead of the configuration's
#                          (a copy of DEMO_CONFIG with port_range replaced is written to DEMO_DIR)
#   DEMO_NAME=demo         prefix of the cluster names (NAME-source, NAME-dest)
#   DEMO_DIR=target/demo-run  where logs and generated files go
#   DEMO_RECORDS=10000     records produced per topic
#   DEMO_MIRRORGATE_BIN=F  use this mirrorgate binary instead of building target/demo/mirrorgate
#   DEMO_READY_TIMEOUT=60  seconds to wait for mirrorgate to be ready
#   DEMO_LAG_TIMEOUT=120   seconds to wait for the lag to reach 0
#
# Exit codes: 0 ok, 1 a step failed, 2 mirrorgate's bootstrap port is busy.
set -euo pipefail
cd "$(dirname "$0")/.."

NAME="${DEMO_NAME:-demo}"
SOURCE_CLUSTER="$NAME-source"
DEST_CLUSTER="$NAME-dest"
MIRROR=demo
TOPICS=(demo-orders demo-payments)
PARTITIONS=3
RECORDS="${DEMO_RECORDS:-10000}"
CONFIG="${DEMO_CONFIG:-proxy.yaml}"
LOG_DIR="${DEMO_DIR:-target/demo-run}"
MG_LOG="$LOG_DIR/mirrorgate.log"
READY_TIMEOUT="${DEMO_READY_TIMEOUT:-60}"
LAG_TIMEOUT="${DEMO_LAG_TIMEOUT:-120}"

T0=$(date +%s%3N)
elapsed() { printf '%5.1fs' "$(( $(date +%s%3N) - T0 ))e-3"; }
if [[ -t 1 ]]; then BOLD=$'\033[1m' PLAIN=$'\033[0m'; else BOLD="" PLAIN=""; fi
step() { printf '\n%s==> [%s] %s%s\n' "$BOLD" "$(elapsed)" "$*" "$PLAIN"; }
say() { printf '    %s\n' "$*"; }
indent() { sed 's/^/    | /'; }
die() { printf '\ndemo: ERROR: %s\n' "$*" >&2; exit 1; }
tool() { scripts/kafka.sh tool "$@"; }

MG_PID=""
STARTED_CLUSTERS=()
FETCH_PIDS=()
CLEANED=0
cleanup() {
  [[ "$CLEANED" == 1 ]] && return 0
  CLEANED=1
  trap - INT TERM
  local p
  for p in ${FETCH_PIDS[@]+"${FETCH_PIDS[@]}"}; do kill "$p" 2>/dev/null || true; done
  if [[ -n "$MG_PID" ]] && kill -0 "$MG_PID" 2>/dev/null; then
    printf '\n==> stopping mirrorgate (pid %s)\n' "$MG_PID"
    kill -INT "$MG_PID" 2>/dev/null || true
    for _ in $(seq 1 50); do kill -0 "$MG_PID" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$MG_PID" 2>/dev/null || true
    wait "$MG_PID" 2>/dev/null || true
  fi
  local c
  for c in ${STARTED_CLUSTERS[@]+"${STARTED_CLUSTERS[@]}"}; do
    printf '==> stopping the %s cluster\n' "$c"
    scripts/kafka.sh stop "$c" || true
  done
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

[[ -f "$CONFIG" ]] || die "configuration file $CONFIG not found"
mkdir -p "$LOG_DIR"
if [[ -n "${DEMO_PORT_RANGE:-}" ]]; then
  [[ "$DEMO_PORT_RANGE" =~ ^[0-9]+-[0-9]+$ ]] || die "DEMO_PORT_RANGE must be FIRST-LAST, e.g. 29092-29191"
  sed "s/^\([[:space:]]*port_range:[[:space:]]*\)[0-9][0-9]*-[0-9][0-9]*/\1$DEMO_PORT_RANGE/" "$CONFIG" \
    >"$LOG_DIR/proxy.yaml"
  CONFIG="$LOG_DIR/proxy.yaml"
fi
# The bootstrap port is the first port of the first listener's port_range.
PORT="$(sed -n 's/^[[:space:]]*port_range:[[:space:]]*\([0-9][0-9]*\)-.*/\1/p' "$CONFIG" | head -n 1)"
HOST="$(sed -n 's/^[[:space:]]*advertised_host:[[:space:]]*\([^[:space:]#]*\).*/\1/p' "$CONFIG" | head -n 1)"
HOST="${HOST:-127.0.0.1}"
BOOTSTRAP="$HOST:$PORT"

[[ -n "$PORT" ]] || die "cannot read the first listener's port_range from $CONFIG"
# Everything the steps below need, checked before the build (README.md, "Prerequisites").
source scripts/prereqs.sh
[[ -n "${DEMO_MIRRORGATE_BIN:-}" ]] || prereq_rust
prereq_kafka
prereq_python
prereq_report demo

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
  printf '      Stop whatever listens there (e.g. `ss -ltnp "sport = :%s"`), or run with\n' "$PORT" >&2
  printf '      DEMO_PORT_RANGE=29092-29191 (or change port_range in %s).\n' "$CONFIG" >&2
  exit 2
fi

# ---------------------------------------------------------------------------------------------
# The Kafka jars and the Python client download while mirrorgate builds (both cached after the
# first run); their output goes to files, shown if they fail.
step "Fetching the Kafka jars from Maven Central and the Python client, in the background"
scripts/kafka.sh fetch >"$LOG_DIR/fetch-kafka.log" 2>&1 &
FETCH_PIDS+=($!)
scripts/pyenv.sh >"$LOG_DIR/pyenv.path" 2>"$LOG_DIR/pyenv.log" &
FETCH_PIDS+=($!)

if [[ -n "${DEMO_MIRRORGATE_BIN:-}" ]]; then
  MG="$DEMO_MIRRORGATE_BIN"
  step "Using the mirrorgate binary $MG (DEMO_MIRRORGATE_BIN)"
else
  # Cargo.toml's demo profile: no link-time optimisation, a short first build (the release
  # profile's fat LTO takes about 8 minutes from scratch on 2 vCPUs).
  step "Building mirrorgate (cargo build --profile demo; a few minutes the first time, seconds after)"
  cargo build --profile demo --bin mirrorgate
  MG="${CARGO_TARGET_DIR:-target}/demo/mirrorgate"
fi
mg_mirrors() { "$MG" mirrors --bootstrap-server "$BOOTSTRAP" "$@"; }

wait "${FETCH_PIDS[0]}" || { tail -n 20 "$LOG_DIR/fetch-kafka.log" >&2; die "fetching the Kafka jars failed (log: $LOG_DIR/fetch-kafka.log)"; }
wait "${FETCH_PIDS[1]}" || { tail -n 20 "$LOG_DIR/pyenv.log" >&2; die "installing the Python client failed (log: $LOG_DIR/pyenv.log)"; }
FETCH_PIDS=()
PY="$(cat "$LOG_DIR/pyenv.path")"
step "Kafka 4.1.1 is in .cache/, confluent-kafka (librdkafka) in .venv/"

step "Starting two one-node KRaft clusters on free loopback ports: $SOURCE_CLUSTER and $DEST_CLUSTER"
STARTED_CLUSTERS=("$SOURCE_CLUSTER" "$DEST_CLUSTER")
scripts/kafka.sh start "$SOURCE_CLUSTER" --owner-pid $$ >"$LOG_DIR/source.bootstrap" &
src_pid=$!
scripts/kafka.sh start "$DEST_CLUSTER" --owner-pid $$ >"$LOG_DIR/dest.bootstrap" &
dst_pid=$!
wait "$src_pid" || die "the $SOURCE_CLUSTER cluster did not start"
wait "$dst_pid" || die "the $DEST_CLUSTER cluster did not start"
SRC="$(cat "$LOG_DIR/source.bootstrap")"
DEST="$(cat "$LOG_DIR/dest.bootstrap")"
say "source      $SRC   (producers write here; mirrorgate reads from it)"
say "destination $DEST   (nobody below is given this address: clients go through mirrorgate)"

step "Starting mirrorgate in front of the destination, with $CONFIG"
say "MIRRORGATE__DESTINATION__BOOTSTRAP_SERVERS=$DEST $MG run --config $CONFIG"
MIRRORGATE__DESTINATION__BOOTSTRAP_SERVERS="$DEST" "$MG" run --config "$CONFIG" \
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
grep -E 'listening|connected to destination|mirrorgate ready' "$MG_LOG" | indent
say "clients and the mirrors CLI use $BOOTSTRAP; mirrorgate's log is $MG_LOG"

step "Creating topics ${TOPICS[*]} ($PARTITIONS partitions each) on the source"
for t in "${TOPICS[@]}"; do
  tool topics --bootstrap-server "$SRC" --create --topic "$t" --partitions "$PARTITIONS" \
    --replication-factor 1 | indent
done

step "Creating mirror '$MIRROR' (mirrorgate mirrors --create) from a mirror-config file naming the source"
MIRROR_CONFIG="$LOG_DIR/$MIRROR-mirror.properties"
cat >"$MIRROR_CONFIG" <<EOF
# Mirror configs (docs/configuration.md, "Mirror configs"): how to reach the source.
bootstrap.servers=$SRC
client.id=mirrorgate-demo
EOF
indent <"$MIRROR_CONFIG"
say "\$ mirrorgate mirrors --bootstrap-server $BOOTSTRAP --create --mirror $MIRROR --mirror-config $MIRROR_CONFIG"
mg_mirrors --create --mirror "$MIRROR" --mirror-config "$MIRROR_CONFIG" | indent
mg_mirrors --list | indent

step "Starting both topics on the mirror (mirrorgate mirrors --start)"
say "mirrorgate creates them on the destination with the source's partitions and configs and starts copying"
topic_list="$(IFS=,; echo "${TOPICS[*]}")"
mg_mirrors --start --mirror "$MIRROR" --topics "$topic_list" | indent

step "Producing $RECORDS records per topic on the source (librdkafka producer, acks=all)"
for t in "${TOPICS[@]}"; do
  "$PY" - "$SRC" "$t" "$RECORDS" <<'EOF'
import sys
from confluent_kafka import Producer
bootstrap, topic, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5, "client.id": "demo-producer"})
done, errors, step = 0, [], max(count // 5, 1)
def on_delivery(err, msg):
    global done
    if err is not None:
        errors.append(str(err))
    else:
        done += 1
        if done % step == 0 or done == count:
            print(f"    {topic}: {done:>7}/{count} records delivered", flush=True)
for i in range(count):
    while True:
        try:
            p.produce(topic, key=f"key-{i % 100}", value=f"{topic.split('-')[1]}-{i}", on_delivery=on_delivery)
            break
        except BufferError:
            p.poll(0.1)
    p.poll(0)
    if i % 500 == 499:
        p.flush(30)
p.flush(30)
if errors or done != count:
    sys.exit(f"{topic}: {done}/{count} delivered, errors: {errors[:3]}")
EOF
done
say "the records were written to the source only; mirrorgate copies them to the destination"

# Sums over the mirror's partitions from `--describe --json`: "lag states source destination".
describe_summary() {
  mg_mirrors --describe --mirror "$MIRROR" --json | python3 -c '
import json, sys
rows = json.load(sys.stdin)
lag = sum(max(r["lag"], 0) for r in rows) if all(r["lag"] >= 0 for r in rows) else -1
states = sorted({r["state"] for r in rows})
src = sum(max(r["sourceOffset"], 0) for r in rows)
dst = sum(max(r["destinationOffset"], 0) for r in rows)
print(len(rows), lag, ",".join(states) or "-", src, dst)'
}

step "Watching mirrorgate mirrors --describe until the lag is 0"
say "lag = source high watermark - destination log end offset, summed over the $(( ${#TOPICS[@]} * PARTITIONS )) partitions"
deadline=$(( $(date +%s) + LAG_TIMEOUT ))
expected=$(( RECORDS * ${#TOPICS[@]} ))
while :; do
  read -r parts lag states src dst < <(describe_summary) || true
  printf '    [%s] partitions=%s  source=%s  destination=%s  lag=%s  state=%s\n' \
    "$(elapsed)" "${parts:-?}" "${src:-?}" "${dst:-?}" "${lag:-?}" "${states:-?}"
  if [[ "${lag:-}" == 0 && "${parts:-}" == $(( ${#TOPICS[@]} * PARTITIONS )) && "${states:-}" == MIRRORING \
        && "${dst:-}" == "$expected" ]]; then
    break
  fi
  if (( $(date +%s) >= deadline )); then
    mg_mirrors --describe --mirror "$MIRROR" | indent || true
    die "the lag did not reach 0 within ${LAG_TIMEOUT}s (mirrorgate's log: $MG_LOG)"
  fi
  sleep 1
done
mg_mirrors --describe --mirror "$MIRROR" | indent
say "all $expected records mirrored: lag 0 on every partition, destination offsets = source offsets"

step "Verifying the copy (mirrorgate mirrors --verify): source and destination compared batch by batch"
verify_out="$(mg_mirrors --verify --mirror "$MIRROR")" || { printf '%s\n' "$verify_out" | indent; die "--verify found a difference"; }
printf '%s\n' "$verify_out" | indent
grep -q ' 0 different' <<<"$verify_out" || die "--verify did not report 0 different partitions"
say "verify OK: same offsets, same records, same payload bytes"

step "Reading the records back: from the source directly, and from the destination through mirrorgate"
"$PY" - "$SRC" "$BOOTSTRAP" "$PARTITIONS" "${TOPICS[@]}" <<'EOF'
import sys
from confluent_kafka import Consumer, TopicPartition
src, mg, partitions, topics = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4:]

def read(bootstrap, topic, partition):
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "demo-reader", "enable.auto.commit": False,
                  "isolation.level": "read_committed", "client.id": "demo-reader"})
    lo, hi = c.get_watermark_offsets(TopicPartition(topic, partition), timeout=30)
    c.assign([TopicPartition(topic, partition, lo)])
    out = []
    while len(out) < hi - lo:
        batch = c.consume(min(500, hi - lo - len(out)), timeout=10)
        if not batch:
            break
        for m in batch:
            if m.error():
                raise SystemExit(f"{topic}[{partition}] via {bootstrap}: {m.error()}")
            out.append((m.offset(), m.key(), m.value(), m.timestamp()))
    c.close()
    return out

total, shown = 0, False
for topic in topics:
    for p in range(partitions):
        a, b = read(src, topic, p), read(mg, topic, p)
        if a != b:
            sys.exit(f"{topic}[{p}]: {len(a)} records on the source, {len(b)} through mirrorgate, or they differ")
        total += len(a)
        if not shown and len(a) >= 4:
            shown = True
            print(f"    {topic} partition {p}, first records:")
            print(f"    {'offset':>6}  {'source (' + src + ')':<34}  {'destination via mirrorgate (' + mg + ')'}")
            for (o, k, v, _), (o2, k2, v2, _) in list(zip(a, b))[:4]:
                print(f"    {o:>6}  {k.decode() + ' = ' + v.decode():<34}  {o2}: {k2.decode()} = {v2.decode()}")
            (o, k, v, _), (o2, k2, v2, _) = a[-1], b[-1]
            print(f"    {o:>6}  {k.decode() + ' = ' + v.decode():<34}  {o2}: {k2.decode()} = {v2.decode()}   (last)")
print(f"    read {total} records from each side: same offsets, keys, values and timestamps")
EOF

probe_topic="${TOPICS[0]}"
step "Writing to mirror topic $probe_topic through mirrorgate with the console producer: refused"
say "mirror topics are read-only on the destination until they are stopped (failed over)"
refused="$(printf 'not-allowed\n' | tool console-producer --bootstrap-server "$BOOTSTRAP" --topic "$probe_topic" 2>&1 || true)"
line="$(grep -m1 -o 'topic [^ ]* is a read-only mirror topic[^"]*' <<<"$refused" || true)"
[[ -n "$line" ]] || { printf '%s\n' "$refused" | tail -n 5 | indent; die "the write to $probe_topic was not refused as read-only"; }
grep -m1 -E 'ERROR|Exception' <<<"$refused" | cut -c1-200 | indent || true
say "refused: $line"

step "Failing over $probe_topic (mirrorgate mirrors --stop): mirroring stops, the topic becomes writable"
mg_mirrors --stop --mirror "$MIRROR" --topics "$probe_topic" | indent
deadline=$(( $(date +%s) + 60 ))
until mg_mirrors --describe --mirror "$MIRROR" --json | python3 -c '
import json, sys
rows = [r for r in json.load(sys.stdin) if r["topic"] == sys.argv[1]]
sys.exit(0 if rows and all(r["state"] == "STOPPED" for r in rows) else 1)' "$probe_topic"; do
  (( $(date +%s) < deadline )) || die "$probe_topic did not reach STOPPED within 60s"
  sleep 0.5
done
mg_mirrors --describe --mirror "$MIRROR" | indent
say "$probe_topic is STOPPED (writable); ${TOPICS[1]} keeps mirroring"

step "Writing one record to $probe_topic partition 0 through mirrorgate, after the failover"
end0="$(mg_mirrors --describe --mirror "$MIRROR" --json | python3 -c '
import json, sys
print(next(r["destinationOffset"] for r in json.load(sys.stdin) if r["topic"] == sys.argv[1] and r["partition"] == 0))' "$probe_topic")"
say "partition 0 ends at offset $end0 (the last mirrored record is at $(( end0 - 1 )))"
landed="$("$PY" - "$BOOTSTRAP" "$probe_topic" <<'EOF'
import sys
from confluent_kafka import Producer
p = Producer({"bootstrap.servers": sys.argv[1], "acks": "all", "client.id": "demo-after-failover"})
result = []
p.produce(sys.argv[2], key="after-failover", value="written on the destination", partition=0,
          on_delivery=lambda err, msg: result.append((err, msg.offset())))
p.flush(30)
if not result or result[0][0] is not None:
    sys.exit(f"write failed: {result}")
print(result[0][1])
EOF
)" || die "the write after failover failed"
say "written to $probe_topic[0] at offset $landed"
[[ "$landed" == "$end0" ]] || die "expected the write at offset $end0 (the next offset), got $landed"
say "write after failover OK: it landed at offset $landed, the next offset after the mirrored records"

step "Demo done in $(elapsed | tr -d ' ')"
if [[ "${DEMO_NONINTERACTIVE:-0}" == 1 ]]; then
  exit 0
fi
cat <<EOF

Everything is still running — press Ctrl-C to stop mirrorgate and both clusters. Try:
  $MG mirrors --bootstrap-server $BOOTSTRAP --describe
  $MG mirrors --bootstrap-server $BOOTSTRAP --pause --mirror $MIRROR --topics ${TOPICS[1]}
  scripts/kafka.sh tool console-consumer --bootstrap-server $BOOTSTRAP --topic $probe_topic --from-beginning
Source: $SRC   mirrorgate (destination): $BOOTSTRAP   log: $MG_LOG
EOF
trap 'exit 0' INT   # Ctrl-C is the normal way to end the demo from here on
wait "$MG_PID" || true
MG_PID=""
# Ctrl-C in a terminal reaches mirrorgate too (same process group); it then stops by itself,
# sometimes before this shell runs its INT trap.
if grep -q 'interrupt received' "$MG_LOG"; then
  exit 0
fi
die "mirrorgate exited on its own; see $MG_LOG"
