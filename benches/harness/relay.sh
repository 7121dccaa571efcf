#!/usr/bin/env bash
# What any TCP hop costs on this machine, beside what mirrorgate costs (issue 13 item 4; not in
# CI): one KRaft node with a second client listener that advertises the address of a plain
# user-space TCP relay (socat) in front of it, and mirrorgate in front of the first listener.
#   latency  LatencyPerf.java --sides 4: four producers sending in turn on one clock, to the
#            broker directly, through the relay, through mirrorgate, and directly again (the A/A
#            control: how far two identical sides differ), BENCH_US_RECORDS (60000) records a
#            side at BENCH_US_RATE (2000) sends/s in all, the first tenth left out, BENCH_REPS
#            (2) runs; prints each side's p50 and p99 differences from the first direct side,
#            with 90 % bootstrap intervals (bench_util.py latency-paired), the machine's busy
#            and steal time (a VM's neighbours) during the run, and mirrorgate's and the
#            relay's user and system CPU per record sent;
#   consume  consumer-perf's fetch.MB.sec over BENCH_TP_RECORDS (2000000) records of 1 KiB in
#            3 partitions, BENCH_ROUNDS (5) rounds of direct, relay and mirrorgate in turn.
# socat relays each connection in its own process with a 256 KiB buffer and TCP_NODELAY on both
# sides: no Kafka parsing, no edits, the least a user-space proxy can do.
# Needs socat (apt-get install socat). MG_BIN: the mirrorgate binary (default
# target/release/mirrorgate). Work files: target/bench-relay/. Prints its results; record them
# in docs/performance.md with the machine's load.
# usage: benches/harness/relay.sh [MG_BIN]
set -euo pipefail
MG="$(realpath -m "${1:-$(dirname "$0")/../../target/release/mirrorgate}")"
cd "$(dirname "$0")/../.."
US_N="${BENCH_US_RECORDS:-60000}"; US_RATE="${BENCH_US_RATE:-2000}"; REPS="${BENCH_REPS:-2}"
TP_N="${BENCH_TP_RECORDS:-2000000}"; ROUNDS="${BENCH_ROUNDS:-5}"
command -v socat >/dev/null || { echo "relay.sh needs socat (apt-get install socat)" >&2; exit 1; }
[[ -x "$MG" ]] || { echo "no mirrorgate binary at $MG (cargo build --release)" >&2; exit 1; }
WORK="$(pwd)/target/bench-relay"; rm -rf "$WORK"; mkdir -p "$WORK"
CL="bench-relay-$$"
tool() { scripts/kafka.sh tool "$@"; }
# shellcheck source=benches/harness/mg_config.sh
source benches/harness/mg_config.sh
MG_PID=""; RELAY_PID=""
cleanup() {
  if [[ -n "$MG_PID" ]]; then kill "$MG_PID" 2>/dev/null || true; fi
  if [[ -n "$RELAY_PID" ]]; then pkill -P "$RELAY_PID" 2>/dev/null || true; kill "$RELAY_PID" 2>/dev/null || true; fi
  scripts/kafka.sh stop "$CL" >/dev/null 2>&1 || true
}
trap cleanup EXIT
echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
# The relay's listener: the broker listens on 127.0.0.2 and advertises 127.0.0.3, where socat
# listens on the same port, so clients that bootstrap through the relay stay on it.
MIRRORGATE_KAFKA_FULL_JIT=1 MIRRORGATE_KAFKA_HEAP=1g scripts/kafka.sh start "$CL" --owner-pid $$ \
  --extra-listener RELAY@127.0.0.2@127.0.0.3 >"$WORK/bootstrap" 2>"$WORK/start.log" ||
  { cat "$WORK/start.log" >&2; exit 1; }
DIRECT="$(cat "$WORK/bootstrap")"
STATE="${MIRRORGATE_KAFKA_DIR:-.kafka}/$CL"
RELAY="$(cat "$STATE/bootstrap.RELAY")"
socat -b 262144 "TCP-LISTEN:${RELAY##*:},bind=127.0.0.3,fork,reuseaddr,nodelay" "TCP:127.0.0.2:${RELAY##*:},nodelay" &
RELAY_PID=$!
PY="$(scripts/pyenv.sh)"
PORT="$("$PY" benches/harness/bench_util.py free-ports 12)"
PROXY="127.0.0.1:$PORT"
mg_config "$DIRECT" "$PORT" "" >"$WORK/mg.yaml"
"$MG" run --config "$WORK/mg.yaml" </dev/null >"$WORK/mg.log" 2>&1 &
MG_PID=$!
sleep 3
echo "direct $DIRECT, relay (socat) $RELAY, mirrorgate $PROXY"
KAFKA_CP="$(scripts/kafka.sh classpath 4.1.1)"
tool topics --bootstrap-server "$DIRECT" --create --topic lat --partitions 4 --replication-factor 1 >/dev/null
SIDES=(direct relay mirrorgate aa)
sides_run() {   # name records: dumps $WORK/name-<side>.us
  java -Xmx512m -cp "$KAFKA_CP" benches/harness/LatencyPerf.java --sides 4 "$DIRECT" "$RELAY" "$PROXY" "$DIRECT" \
    lat "$2" 100 "$US_RATE" "$(($2 / 10))" "${SIDES[@]/#/$WORK/$1-}" >"$WORK/$1.log" 2>&1 ||
    { tail -n 5 "$WORK/$1.log" >&2; exit 1; }
}
sides_run warmup 10000
# CPU per record sent by a side (one Produce request each at linger.ms=0; Metadata and idle
# work included): user and system µs over the run's US_N records of that side.
per_record() {   # before after: "USER SYSTEM" seconds each (-1 when the process is gone)
  awk -v n="$US_N" -v b="$1" -v a="$2" 'BEGIN { split(b, x, " "); split(a, y, " ");
    if (x[1] < 0 || y[1] < 0) { printf "gone"; exit }
    printf "user %d µs, system %d µs", (y[1] - x[1]) * 1e6 / n, (y[2] - x[2]) * 1e6 / n }'
}
# The relay's per-connection processes count in its reaped-children CPU once they have exited
# (with the producers' connections) and been reaped: wait for that, 10 s at most.
relay_idle() {
  for _ in $(seq 1 100); do pgrep -P "$RELAY_PID" >/dev/null || return 0; sleep 0.1; done
}
for rep in $(seq 1 "$REPS"); do
  relay_idle
  MACHINE="$("$PY" benches/harness/bench_util.py machine-snapshot)"
  MG_CPU="$("$PY" benches/harness/bench_util.py cpu-split "$MG_PID")"
  RELAY_CPU="$("$PY" benches/harness/bench_util.py cpu-split "$RELAY_PID")"
  sides_run "lat-$rep" "$US_N"
  # Read at once: the percentiles below take CPU of their own.
  LOAD="$(cut -d' ' -f1 /proc/loadavg)"
  MACHINE="$("$PY" benches/harness/bench_util.py machine-since "$MACHINE")"
  MG_CPU="$(per_record "$MG_CPU" "$("$PY" benches/harness/bench_util.py cpu-split "$MG_PID")")"
  relay_idle
  RELAY_CPU="$(per_record "$RELAY_CPU" "$("$PY" benches/harness/bench_util.py cpu-split "$RELAY_PID")")"
  for side in relay mirrorgate aa; do
    declare -A R=()
    while IFS='=' read -r k v; do R[$k]="$v"; done < <(
      "$PY" benches/harness/bench_util.py latency-paired "$WORK/lat-$rep-direct" "$WORK/lat-$rep-$side")
    echo "latency run $rep $side: added p50 ${R[added_p50_us]} µs (90 %: ${R[added_p50_boot90_low_us]} to ${R[added_p50_boot90_high_us]}), added p99 ${R[added_p99_us]} µs (90 %: ${R[added_p99_boot90_low_us]} to ${R[added_p99_boot90_high_us]}); direct p50 ${R[direct_p50_us]} p99 ${R[direct_p99_us]} µs"
  done
  echo "latency run $rep: load $LOAD, machine $MACHINE"
  echo "latency run $rep CPU a record sent: mirrorgate $MG_CPU, relay $RELAY_CPU"
done
tool topics --bootstrap-server "$DIRECT" --create --topic tp --partitions 3 --replication-factor 1 >/dev/null
tool producer-perf --topic tp --num-records "$TP_N" --record-size 1024 --throughput -1 \
  --producer-props bootstrap.servers="$DIRECT" acks=1 linger.ms=5 batch.size=131072 >"$WORK/fill.log" 2>&1
for r in $(seq 1 "$ROUNDS"); do
  line="consume round $r fetch.MB.sec:"
  for side in direct relay mirrorgate; do
    b="$DIRECT"; [[ $side == relay ]] && b="$RELAY"; [[ $side == mirrorgate ]] && b="$PROXY"
    tool consumer-perf --bootstrap-server "$b" --topic tp --messages "$TP_N" --group "g-$side-$r" \
      --timeout 60000 >"$WORK/c-$side-$r.log" 2>&1 || { tail -n 5 "$WORK/c-$side-$r.log" >&2; exit 1; }
    line+=" $side $(grep -E '^[0-9]{4}-' "$WORK/c-$side-$r.log" | tail -n 1 | awk -F', *' '{print $9}')"
  done
  echo "$line"
done
echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
