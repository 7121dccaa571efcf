#!/usr/bin/env bash
# The proxy's cost to clients, side by side (`make bench-proxy`, issue 13 item 4).
#
# Starts one Kafka cluster (scripts/kafka.sh, full JIT) and mirrorgate (release build) in front
# of it, then runs Kafka's own producer-perf against the broker directly and through
# mirrorgate, alternating, BENCH_ROUNDS times each:
#   latency     BENCH_RATE (10000) records/s of BENCH_RECORD_SIZE (100) B, acks=all,
#               linger.ms=0, BENCH_LATENCY_RECORDS (100000) records: producer-perf's
#               percentiles (50th, 99th, 99.9th) of the send-to-acknowledgement time, which
#               it prints in whole milliseconds; and, in microseconds, LatencyPerf.java
#               --paired (the same Java producer, timed with System.nanoTime): one direct and
#               one proxied producer sending in turn on one clock, BENCH_US_RATE (2000) sends/s
#               in all, BENCH_US_RECORDS (200000) records a side, the first tenth left out;
#               each side's percentiles, their differences and 90 % bootstrap intervals over
#               blocks of 2,000 pairs (rounds of one side at a time moved by milliseconds at
#               p99 on a 2-vCPU machine: each met other bursts of the broker and the machine);
#               then, unless BENCH_AA=0, the same paired run with both sides direct: an A/A
#               control, whose "added" percentiles show how far two identical sides differ
#               on this machine (a proxy's cost smaller than that cannot be read here);
#   throughput  BENCH_TP_RECORDS (1000000) records of 1024 B as fast as possible (acks=1,
#               linger.ms=5, batch.size=131072): MB/s;
# then consumer-perf reading the throughput topic, directly and through mirrorgate: its
# fetch.MB.sec (the group join left out).
# Reports medians over the rounds, the proxy's added latency (through − direct) and its
# throughput ratio, and writes the table with machine facts and load to
# benches/harness/proxy-results-<date>.md (BENCH_OUT).
#
# Other environment: BENCH_SKIP_BUILD=1 (use target/release/mirrorgate as it is),
# BENCH_MG_BIN (measure this binary), BENCH_MG_EXTRA_YAML (appended to mirrorgate's config,
# e.g. a tracing section), BENCH_HEAP (1g), BENCH_KAFKA_CPUS and BENCH_MG_CPUS (pin the broker
# and clients, and mirrorgate, to CPUs of their own: benches/harness/pin.sh).
# Work files and logs: target/bench-proxy/. Everything started is stopped on exit.
set -euo pipefail
# shellcheck source=benches/harness/pin.sh
source "$(dirname "$0")/pin.sh"
bench_pin "$@"
cd "$(dirname "$0")/../.."
REPO="$(pwd)"

ROUNDS="${BENCH_ROUNDS:-3}"
RATE="${BENCH_RATE:-10000}"
SIZE="${BENCH_RECORD_SIZE:-100}"
LAT_N="${BENCH_LATENCY_RECORDS:-100000}"
US_RATE="${BENCH_US_RATE:-2000}"
US_N="${BENCH_US_RECORDS:-200000}"
TP_N="${BENCH_TP_RECORDS:-1000000}"
AA="${BENCH_AA:-1}"
HEAP="${BENCH_HEAP:-1g}"
KAFKA_VERSION="${KAFKA_VERSION:-4.1.1}"
DATE="$(date -u +%F)"
OUT="${BENCH_OUT:-benches/harness/proxy-results-$DATE.md}"
WORK="$REPO/target/bench-proxy"
CLUSTER="bench-proxy-$$"
BENCH_NAME=bench-proxy
# shellcheck source=benches/harness/common.sh
source benches/harness/common.sh
tool() { scripts/kafka.sh tool "$@"; }
# shellcheck source=benches/harness/mg_config.sh
source benches/harness/mg_config.sh

# latency-paired needs one block of 2,000 pairs after LatencyPerf leaves the first tenth out.
(( US_N - US_N / 10 >= 2000 )) || die "BENCH_US_RECORDS=$US_N is too few: the paired run needs at least 2222 records a side (2,000 pairs after the warm-up tenth)"
bench_start java python3
bench_binary
scripts/kafka.sh fetch "$KAFKA_VERSION" >/dev/null

log "starting cluster $CLUSTER"
STARTED_CLUSTERS=("$CLUSTER")
MIRRORGATE_KAFKA_FULL_JIT=1 MIRRORGATE_KAFKA_HEAP="$HEAP" \
  scripts/kafka.sh start "$CLUSTER" --owner-pid $$ >"$WORK/bootstrap" 2>"$WORK/start.log" ||
  { cat "$WORK/start.log" >&2; die "cluster did not start"; }
DIRECT="$(cat "$WORK/bootstrap")"

PORT="$(util free-ports 12)"
PROXY="127.0.0.1:$PORT"
mg_config "$DIRECT" "$PORT" "${BENCH_MG_EXTRA_YAML:-}" >"$WORK/mirrorgate.yaml"
"${MG_PIN[@]}" "$WORK/mirrorgate" run --config "$WORK/mirrorgate.yaml" </dev/null >"$WORK/mirrorgate.log" 2>&1 &
MG_PID=$!
for _ in $(seq 1 300); do
  "$PY" - "$PROXY" <<'EOF' 2>/dev/null && break
import socket, sys
h, p = sys.argv[1].rsplit(":", 1)
socket.create_connection((h, int(p)), 1).close()
EOF
  kill -0 "$MG_PID" 2>/dev/null || { tail -n 20 "$WORK/mirrorgate.log" >&2; die "mirrorgate exited"; }
  sleep 0.2
done
log "direct $DIRECT, through mirrorgate $PROXY"

# Two partitions: the paired µs run writes one side to each (producer-perf spreads over both).
tool topics --bootstrap-server "$DIRECT" --create --topic lat --partitions 2 --replication-factor 1 >/dev/null
tool topics --bootstrap-server "$DIRECT" --create --topic tp --partitions 3 --replication-factor 1 >/dev/null

# producer-perf's summary line: "N records sent, R records/sec (M MB/sec), A ms avg latency,
# X ms max latency, P50 ms 50th, P95 ms 95th, P99 ms 99th, P999 ms 99.9th."
perf_line() { grep -E 'records sent' "$1" | tail -n 1; }
field() { sed -E "s/.* ([0-9.]+) ms $2.*/\\1/" <<<"$1"; }

latency_run() {   # bootstrap label round
  local f="$WORK/lat-$2-$3.log"
  tool producer-perf --topic lat --num-records "$LAT_N" --record-size "$SIZE" \
    --throughput "$RATE" --producer-props bootstrap.servers="$1" acks=all linger.ms=0 >"$f" 2>&1 ||
    { tail -n 5 "$f" >&2; die "producer-perf ($2) failed"; }
  local l; l="$(perf_line "$f")"
  echo "$(field "$l" 50th) $(field "$l" 99th) $(field "$l" '99\.9th')"
}
throughput_run() {   # bootstrap label round
  local f="$WORK/tp-$2-$3.log"
  tool producer-perf --topic tp --num-records "$TP_N" --record-size 1024 --throughput -1 \
    --producer-props bootstrap.servers="$1" acks=1 linger.ms=5 batch.size=131072 >"$f" 2>&1 ||
    { tail -n 5 "$f" >&2; die "producer-perf ($2) failed"; }
  perf_line "$f" | sed -E 's/.*\(([0-9.]+) MB\/sec\).*/\1/'
}
consume_run() {   # bootstrap label round
  local f="$WORK/cons-$2-$3.log"
  tool consumer-perf --bootstrap-server "$1" --topic tp --messages "$TP_N" --group "bench-proxy-$2-$3-$$" \
    --timeout 60000 >"$f" 2>&1 || { tail -n 5 "$f" >&2; die "consumer-perf ($2) failed"; }
  # data line: start, end, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec,
  # rebalance.time.ms, fetch.time.ms, fetch.MB.sec, ...: fetch.MB.sec leaves out the group
  # join, which is the same broker round trips either way and would dilute the difference.
  grep -E '^[0-9]{4}-' "$f" | tail -n 1 | awk -F', *' '{print $9}'
}

# Latency in microseconds: LatencyPerf.java --paired, both sides in one process on one clock
# (Kafka's Java producer, System.nanoTime around each send → acknowledgement).
KAFKA_CP="$(scripts/kafka.sh classpath "$KAFKA_VERSION")"
latency_paired_run() {   # bootstrap_a bootstrap_b name: dumps $WORK/name-a.us and name-b.us
  local f="$WORK/$3.log"
  java -Xmx512m -cp "$KAFKA_CP" benches/harness/LatencyPerf.java --paired "$1" "$2" lat "$US_N" "$SIZE" \
    "$US_RATE" "$((US_N / 10))" "$WORK/$3-a.us" "$WORK/$3-b.us" >"$f" 2>&1 ||
    { tail -n 5 "$f" >&2; die "LatencyPerf --paired ($3) failed"; }
  grep -E '^[AB] records=' "$f" >&2
}

declare -A LAT TP CONS
# Warm-up, not counted: the broker's JIT and both paths' connections (the first rounds ran
# markedly slower than the later ones, whichever side went first).
latency_run "$DIRECT" warmup-direct 0 >/dev/null
latency_run "$PROXY" warmup-proxy 0 >/dev/null
for r in $(seq 1 "$ROUNDS"); do
  for side in direct proxy; do
    b="$DIRECT"; [[ "$side" == proxy ]] && b="$PROXY"
    LAT[$side,$r]="$(latency_run "$b" "$side" "$r")"
    log "round $r $side latency p50/p99/p99.9 ms: ${LAT[$side,$r]}"
  done
done
log "paired latency run: $US_N records a side, $US_RATE sends/s in all"
latency_paired_run "$DIRECT" "$PROXY" latus
if [[ "$AA" == 1 ]]; then
  log "A/A control: the same paired run with both sides direct"
  latency_paired_run "$DIRECT" "$DIRECT" latus-aa
fi
for r in $(seq 1 "$ROUNDS"); do
  for side in direct proxy; do
    b="$DIRECT"; [[ "$side" == proxy ]] && b="$PROXY"
    TP[$side,$r]="$(throughput_run "$b" "$side" "$r")"
    CONS[$side,$r]="$(consume_run "$b" "$side" "$r")"
    log "round $r $side produce ${TP[$side,$r]} MB/s, consume ${CONS[$side,$r]} MB/s"
  done
done

median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{a[NR]=$1} END{print (NR % 2 ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2)}'; }
col() {   # side index(1..3): median over the rounds of one producer-perf latency percentile
  local out="" r
  for r in $(seq 1 "$ROUNDS"); do out+="$(cut -d' ' -f"$2" <<<"${LAT[$1,$r]}") "; done
  median <<<"$out"
}
vals() { local out="" r; for r in $(seq 1 "$ROUNDS"); do out+="$(eval "echo \${$1[$2,$r]}") "; done; median <<<"$out"; }
d50=$(col direct 1); d99=$(col direct 2); d999=$(col direct 3)
p50=$(col proxy 1); p99=$(col proxy 2); p999=$(col proxy 3)
# The paired run: percentiles of each side, differences, bootstrap intervals over blocks of pairs.
declare -A POOL
while IFS='=' read -r k v; do POOL[$k]="$v"; done < <(
  util latency-paired "$WORK/latus-a.us" "$WORK/latus-b.us")
declare -A AAP
if [[ "$AA" == 1 ]]; then
  while IFS='=' read -r k v; do AAP[$k]="$v"; done < <(
    util latency-paired "$WORK/latus-aa-a.us" "$WORK/latus-aa-b.us")
fi
u_d50=${POOL[direct_p50_us]}; u_d99=${POOL[direct_p99_us]}; u_d999=${POOL[direct_p999_us]}
u_p50=${POOL[proxy_p50_us]}; u_p99=${POOL[proxy_p99_us]}; u_p999=${POOL[proxy_p999_us]}
dtp=$(vals TP direct); ptp=$(vals TP proxy); dc=$(vals CONS direct); pc=$(vals CONS proxy)
add() { awk -v a="$1" -v b="$2" 'BEGIN{printf "%+.1f", a - b}'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN{printf "%.2f", (b > 0 ? a / b : 0)}'; }
LOAD_END="$(cut -d' ' -f1-3 /proc/loadavg)"
CPUS="$(nproc --all)"; MODEL="$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')"
MEM="$(awk '/MemTotal/{printf "%.0f GiB", $2/1048576}' /proc/meminfo)"

{
  echo "# Proxy pass-through: direct vs through mirrorgate ($DATE)"
  echo
  echo "mirrorgate $COMMIT, Kafka $KAFKA_VERSION (one KRaft node, full JIT, heap $HEAP), $CPUS CPUs ($MODEL), $MEM;"
  echo "load average at start $LOAD_START, at end $LOAD_END. Medians of $ROUNDS alternating rounds; the µs latency rows"
  echo "come from one paired run (LatencyPerf.java --paired: a direct and a proxied producer sending in turn on one clock,"
  echo "$US_RATE sends/s in all, ${POOL[pairs]} pairs after warm-up; intervals: 90 % bootstrap over ${POOL[blocks]} blocks of 2,000 pairs)."
  echo "$(pin_facts)"
  echo "Command: \`make bench-proxy\` (benches/harness/proxy.sh)."
  echo
  echo "| Measure | direct | through mirrorgate | mirrorgate's cost |"
  echo "|---|---|---|---|"
  echo "| produce latency p50, ms ($RATE rec/s × $SIZE B, acks=all) | $d50 | $p50 | $(add "$p50" "$d50") ms |"
  echo "| produce latency p99, ms | $d99 | $p99 | $(add "$p99" "$d99") ms |"
  echo "| produce latency p99.9, ms | $d999 | $p999 | $(add "$p999" "$d999") ms |"
  echo "| produce latency p50, µs (LatencyPerf.java --paired: $((US_RATE / 2)) rec/s a side × $SIZE B, acks=all) | $u_d50 | $u_p50 | $(add "$u_p50" "$u_d50") µs (90 %: ${POOL[added_p50_boot90_low_us]} to ${POOL[added_p50_boot90_high_us]}) |"
  echo "| produce latency p99, µs (paired) | $u_d99 | $u_p99 | $(add "$u_p99" "$u_d99") µs (90 %: ${POOL[added_p99_boot90_low_us]} to ${POOL[added_p99_boot90_high_us]}) |"
  echo "| produce latency p99.9, µs (paired) | $u_d999 | $u_p999 | $(add "$u_p999" "$u_d999") µs (90 %: ${POOL[added_p999_boot90_low_us]} to ${POOL[added_p999_boot90_high_us]}) |"
  if [[ "$AA" == 1 ]]; then
    echo "| A/A control, paired, both sides direct: p50, µs | ${AAP[direct_p50_us]} | ${AAP[proxy_p50_us]} (direct too) | $(add "${AAP[proxy_p50_us]}" "${AAP[direct_p50_us]}") µs (90 %: ${AAP[added_p50_boot90_low_us]} to ${AAP[added_p50_boot90_high_us]}) |"
    echo "| A/A control: p99, µs | ${AAP[direct_p99_us]} | ${AAP[proxy_p99_us]} (direct too) | $(add "${AAP[proxy_p99_us]}" "${AAP[direct_p99_us]}") µs (90 %: ${AAP[added_p99_boot90_low_us]} to ${AAP[added_p99_boot90_high_us]}) |"
  fi
  echo "| produce throughput, MB/s (1 KiB records, acks=1) | $dtp | $ptp | × $(ratio "$ptp" "$dtp") |"
  echo "| consume throughput, MB/s (consumer-perf fetch.MB.sec, group join left out) | $dc | $pc | × $(ratio "$pc" "$dc") |"
} | tee "$OUT"
log "written to $OUT"
