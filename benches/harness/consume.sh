#!/usr/bin/env bash
# Consume only, direct vs through mirrorgate (issue 13 item 4; not in CI): one KRaft node,
# RECORDS records of 1 KiB in a 3-partition topic, then ROUNDS rounds of Kafka's consumer-perf
# directly and through mirrorgate, alternating. Prints per round fetch.MB.sec, fetch.ms,
# mirrorgate's CPU (clock ticks) and the machine's busy and idle ticks over the round.
# MG_EXTRA_YAML is appended to mirrorgate's config (e.g. "fetch_stream_min_bytes: 0");
# PERF=1 records a perf profile of mirrorgate in each proxied round; BENCH_KAFKA_CPUS and
# BENCH_MG_CPUS pin the broker and clients, and mirrorgate, to CPUs of their own (pin.sh);
# BENCH_AA=1 makes the "proxy" rounds read directly too: an A/A control, whose ratios show
# how far two identical sides differ on this machine (the noise the real ratio must beat).
# usage: benches/harness/consume.sh MG_BIN [ROUNDS [RECORDS]]
set -euo pipefail
# shellcheck source=benches/harness/pin.sh
source "$(dirname "$0")/pin.sh"
bench_pin "$@"
cd "$(dirname "$0")/../.."
MG="$1"; ROUNDS="${2:-5}"; N="${3:-2000000}"
WORK="$(pwd)/target/bench-consume"; rm -rf $WORK; mkdir -p $WORK
CL="consexp-$$"
tool() { scripts/kafka.sh tool "$@"; }
# shellcheck source=benches/harness/mg_config.sh
source benches/harness/mg_config.sh
cleanup() { [[ -n "${MG_PID:-}" ]] && kill $MG_PID 2>/dev/null; scripts/kafka.sh stop "$CL" >/dev/null 2>&1 || true; }
trap cleanup EXIT
MIRRORGATE_KAFKA_FULL_JIT=1 MIRRORGATE_KAFKA_HEAP=1g scripts/kafka.sh start "$CL" --owner-pid $$ >$WORK/bootstrap 2>$WORK/start.log
DIRECT="$(cat $WORK/bootstrap)"
PY="$(scripts/pyenv.sh)"
PORT="$("$PY" benches/harness/bench_util.py free-ports 12)"
mg_config "$DIRECT" "$PORT" "${MG_EXTRA_YAML:-}" >$WORK/mg.yaml
"${MG_PIN[@]}" $MG run --config $WORK/mg.yaml </dev/null >$WORK/mg.log 2>&1 & MG_PID=$!
sleep 3
tool topics --bootstrap-server "$DIRECT" --create --topic tp --partitions 3 --replication-factor 1 >/dev/null
tool producer-perf --topic tp --num-records "$N" --record-size 1024 --throughput -1 \
    --producer-props bootstrap.servers="$DIRECT" acks=1 linger.ms=5 batch.size=131072 | tail -1
cpu() { awk "{print \$14+\$15}" /proc/$MG_PID/stat; }
sys() { awk "/^cpu /{print \$2+\$3+\$4, \$5+\$6}" /proc/stat; }
for r in $(seq 1 $ROUNDS); do
  for side in direct proxy; do
    b=$DIRECT; [[ $side == proxy && "${BENCH_AA:-0}" != 1 ]] && b=127.0.0.1:$PORT
    c0=$(cpu); s0=($(sys))
    if [[ $side == proxy && -n "${PERF:-}" ]]; then perf record -F 499 --call-graph dwarf,16384 -p $MG_PID -o $WORK/perf-$r.data >/dev/null 2>&1 & PP=$!; fi
    tool consumer-perf --bootstrap-server "$b" --topic tp --messages "$N" --group "g-$side-$r" --timeout 60000 ${EXTRA:-} > $WORK/c-$side-$r.log 2>&1
    c1=$(cpu); s1=($(sys))
    if [[ $side == proxy && -n "${PERF:-}" ]]; then kill -INT $PP; wait $PP || true; fi
    l=$(grep -E '^[0-9]{4}-' $WORK/c-$side-$r.log | tail -1)
    echo "round $r $side fetch.MB.sec=$(echo $l | awk -F', *' '{print $9}') fetch.ms=$(echo $l | awk -F', *' '{print $8}') mg_cpu_ticks=$((c1-c0)) sys_busy=$((s1[0]-s0[0])) sys_idle=$((s1[1]-s0[1]))"
  done
done
