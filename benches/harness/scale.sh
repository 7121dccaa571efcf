#!/usr/bin/env bash
# Many partitions, light traffic, over time (`make bench-scale`; issue 13 item 5 and its soak
# target; not in CI).
#
# Starts a source and a destination Kafka cluster (scripts/kafka.sh, one KRaft node each, full
# JIT), creates BENCH_SCALE_TOPICS × BENCH_SCALE_PARTITIONS partitions on the source (default
# 10 × 100 = 1,000) and seeds every partition with BENCH_SCALE_SEED records, then:
#   catch-up  mirrorgate (release build) in front of the destination: --create a mirror,
#             --start every topic with one regex, time until `--describe --json` shows every
#             partition MIRRORING with lag 0;
#   soak      a steady BENCH_SCALE_RATE records/s of BENCH_SCALE_RECORD_SIZE bytes on the source,
#             round-robin over every partition (librdkafka, acks=all, linger.ms 50), for
#             BENCH_SOAK_SECONDS;
#             every BENCH_SCALE_INTERVAL s a sample of mirrorgate's RSS (VmRSS), CPU%, threads,
#             established TCP connections to the source broker, to the destination broker and
#             on its listener (from /proc/PID/fd and /proc/net/tcp), and the total lag
#             (`--describe`), written to target/bench-scale/samples.csv;
#   end       lag 0 again once the producer stops, then `--verify` on BENCH_SCALE_VERIFY_TOPICS.
# Reports the RSS after warm-up (BENCH_SCALE_WARMUP s): first, min, median, max, last, and
# whether min and max stay within ±10 % of the median; mirrorgate's average CPU% and CPU
# seconds per million records copied; the connection counts (one source and one destination
# broker here: a handful each, not one per partition). Prints a results table and writes it
# with machine facts to benches/harness/scale-results-<date>.md.
#
# Environment:
#   BENCH_SCALE_TOPICS (10)  BENCH_SCALE_PARTITIONS (100)  topics and partitions per topic
#   BENCH_SCALE_SEED (10)         records per partition before the mirror starts
#   BENCH_SCALE_RATE (2000)       records/s during the soak;  BENCH_SCALE_RECORD_SIZE (200) B
#   BENCH_SCALE_LINGER_MS (50)    the soak producer's linger.ms
#   BENCH_SOAK_SECONDS (1800)     soak length (the 30-minute soak target; 300 for a short run)
#   BENCH_SCALE_WARMUP (120)      seconds of the soak left out of the RSS flatness check
#   BENCH_SCALE_INTERVAL (10)     seconds between samples
#   BENCH_SCALE_VERIFY_TOPICS     topics (names or regexes) for the final --verify (default:
#                                 all of them; e.g. 'bench-scale-0,bench-scale-5' for a sample)
#   BENCH_HEAP (1g)               broker heap;  BENCH_TIMEOUT (600) seconds for each lag-0 wait
#   BENCH_SKIP_BUILD=1            use target/release/mirrorgate as it is
#   BENCH_MG_BIN                  measure this mirrorgate binary instead (implies no build; the
#                                 commit line then names the binary)
#   BENCH_OUT                     results file (default benches/harness/scale-results-<date>.md)
#   BENCH_MIRROR_CONFIG           extra lines for the mirror's config file
#
# Work files and logs: target/bench-scale/. Clusters, mirrorgate, producer and sampler are
# stopped on exit. Exit codes: 0 ok, 1 a step failed (including a failed --verify).
set -euo pipefail
cd "$(dirname "$0")/../.."
REPO="$(pwd)"

TOPICS="${BENCH_SCALE_TOPICS:-10}"
PARTS="${BENCH_SCALE_PARTITIONS:-100}"
TOTAL_PARTS=$(( TOPICS * PARTS ))
SEED="${BENCH_SCALE_SEED:-10}"
RATE="${BENCH_SCALE_RATE:-2000}"
SIZE="${BENCH_SCALE_RECORD_SIZE:-200}"
SOAK="${BENCH_SOAK_SECONDS:-1800}"
WARMUP="${BENCH_SCALE_WARMUP:-120}"
INTERVAL="${BENCH_SCALE_INTERVAL:-10}"
HEAP="${BENCH_HEAP:-1g}"
TIMEOUT="${BENCH_TIMEOUT:-600}"
PREFIX="bench-scale-"
VERIFY_TOPICS="${BENCH_SCALE_VERIFY_TOPICS:-$PREFIX.*}"
DATE="$(date -u +%F)"
OUT="${BENCH_OUT:-benches/harness/scale-results-$DATE.md}"
WORK="${BENCH_WORK:-$REPO/target/bench-scale}"
SRC_NAME="scale-src-$$"
DST_NAME="scale-dst-$$"
KAFKA_VERSION="${KAFKA_VERSION:-4.1.1}"

BENCH_NAME=bench-scale
# shellcheck source=benches/harness/common.sh
source benches/harness/common.sh
PRODUCER_PID="" SAMPLER_PID=""
stop_workers() {
  stop_pid "$SAMPLER_PID" 2
  stop_pid "$PRODUCER_PID" 10
}
bench_start java python3

# ---------------------------------------------------------------------------------------------
# build, clusters, mirrorgate
# ---------------------------------------------------------------------------------------------
bench_binary
bench_clusters
log "source $SRC (pid $SRC_PID), destination $DST (pid $DST_PID)"

log "creating $TOPICS topics × $PARTS partitions on the source, seeding $SEED records of $SIZE B each"
t=$(now_ms)
util create-topics "$SRC" "$PREFIX" "$TOPICS" "$PARTS"
SEEDED="$(util seed "$SRC" "$PREFIX" "$TOPICS" "$PARTS" "$SEED" "$SIZE")"
SETUP_MS=$(( $(now_ms) - t ))
log "source: $TOTAL_PARTS partitions, $SEEDED records in $(secs "$SETUP_MS") s"

bench_mirrorgate
rss_mib() { awk '/^VmRSS:/ {printf "%.1f", $2 / 1024}' "/proc/$1/status"; }
cpu_s() { util cpu "$@"; }

# ---------------------------------------------------------------------------------------------
# catch-up: 1,000 partitions to lag 0
# ---------------------------------------------------------------------------------------------
MIRROR="scale-$$"
printf 'bootstrap.servers=%s\n%s\n' "$SRC" "${BENCH_MIRROR_CONFIG:-}" >"$WORK/$MIRROR.properties"
mg --create --mirror "$MIRROR" --mirror-config "$WORK/$MIRROR.properties" >/dev/null
RSS_IDLE="$(rss_mib "$MG_PID")"
read -r C_MG0 < <(cpu_s "$MG_PID")
T_START=$(now_ms)
mg --start --mirror "$MIRROR" --topics "$PREFIX.*" >/dev/null
log "mirror $MIRROR started on '$PREFIX.*'; waiting for lag 0 on $TOTAL_PARTS partitions"
LAG0_AT="$(util wait-lag0 "$MG_BIN" "$MG" "$MIRROR" "$TOTAL_PARTS" "$TIMEOUT")" \
  || die "no lag 0 on $TOTAL_PARTS partitions within ${TIMEOUT}s; see $WORK/mirrorgate.log"
CATCHUP_MS=$(( LAG0_AT - T_START ))
read -r C_MG1 < <(cpu_s "$MG_PID")
RSS_CAUGHT="$(rss_mib "$MG_PID")"
CATCHUP_CPU="$(awk -v a="$C_MG0" -v b="$C_MG1" 'BEGIN{printf "%.1f", b - a}')"
log "lag 0 on $TOTAL_PARTS partitions $(secs "$CATCHUP_MS") s after --start (mirrorgate ${CATCHUP_CPU} CPU s, RSS $RSS_IDLE → $RSS_CAUGHT MiB)"

# ---------------------------------------------------------------------------------------------
# soak: steady light load on every partition, sampled
# ---------------------------------------------------------------------------------------------
read -r _ _ _ _ DST_SUM0 < <(util lag "$MG_BIN" "$MG" "$MIRROR")
log "soak: $RATE records/s of $SIZE B round-robin over $TOTAL_PARTS partitions for $SOAK s (sample every $INTERVAL s)"
read -r C_MG2 C_SRC2 C_DST2 < <(cpu_s "$MG_PID" "$SRC_PID" "$DST_PID")
T_SOAK=$(now_ms)
# Started directly (not through util) so that $!/the trap reach the python processes themselves.
"$PY" benches/harness/bench_util.py produce-steady "$SRC" "$PREFIX" "$TOPICS" "$PARTS" "$RATE" "$SIZE" "$SOAK" \
  >"$WORK/producer.out" 2>"$WORK/producer.err" &
PRODUCER_PID=$!
"$PY" benches/harness/bench_util.py sample "$MG_PID" "$MG_BIN" "$MG" "$MIRROR" "${SRC##*:}" "${DST##*:}" "$MG_PORT" "$((MG_PORT + MG_PORTS - 1))" \
  "$INTERVAL" "$WORK/samples.csv" 2>"$WORK/sampler.err" &
SAMPLER_PID=$!
n=0
while kill -0 "$PRODUCER_PID" 2>/dev/null; do
  sleep 5
  kill -0 "$MG_PID" 2>/dev/null || { MG_PID=""; die "mirrorgate exited during the soak; see $WORK/mirrorgate.log"; }
  n=$(( n + 1 ))
  if (( n % 12 == 0 )) && [[ -s "$WORK/samples.csv" ]]; then
    IFS=, read -r e rss cpu _ _ cs cd _ _ lag _ _ < <(tail -n 1 "$WORK/samples.csv")
    log "soak ${e%.*}/$SOAK s: RSS $(( rss / 1024 )) MiB, CPU ${cpu}%, connections source $cs destination $cd, lag $lag"
  fi
done
wait "$PRODUCER_PID" || die "the producer failed: $(cat "$WORK/producer.err")"
PRODUCER_PID=""
T_SOAK_END=$(now_ms)
SOAK_MS=$(( T_SOAK_END - T_SOAK ))
read -r SENT DELIVERED FAILED PROD_LOOP_S PROD_S <"$WORK/producer.out"
PRODUCER_RATE="$(awk -v n="$DELIVERED" -v s="$PROD_S" 'BEGIN{printf "%.0f", n / s}')"
(( FAILED == 0 )) || die "$FAILED records failed to reach the source"
log "producer: $SENT sent, $DELIVERED delivered in $PROD_S s ($PROD_LOOP_S s loop + flush, $PRODUCER_RATE records/s); waiting for lag 0"
LAG0_END_AT="$(util wait-lag0 "$MG_BIN" "$MG" "$MIRROR" "$TOTAL_PARTS" "$TIMEOUT")" \
  || die "no lag 0 after the soak within ${TIMEOUT}s"
stop_pid "$SAMPLER_PID" 2; SAMPLER_PID=""
read -r C_MG3 C_SRC3 C_DST3 < <(cpu_s "$MG_PID" "$SRC_PID" "$DST_PID")
DRAIN_MS=$(( LAG0_END_AT - T_SOAK_END ))
read -r PARTS_SEEN LAG_END NM_END SRC_SUM DST_SUM1 < <(util lag "$MG_BIN" "$MG" "$MIRROR")
[[ "$LAG_END" == 0 && "$NM_END" == 0 && "$PARTS_SEEN" == "$TOTAL_PARTS" ]] \
  || die "final describe: $PARTS_SEEN partitions, lag $LAG_END, $NM_END not MIRRORING"
COPIED=$(( DST_SUM1 - DST_SUM0 ))
(( SRC_SUM == SEEDED + DELIVERED )) || log "WARNING: source offsets sum $SRC_SUM, expected $(( SEEDED + DELIVERED ))"
log "lag 0 again $(secs "$DRAIN_MS") s after the producer stopped; $COPIED records copied during the soak"

util threads "$MG_PID" >"$WORK/mirrorgate.threads"

log "--verify on '$VERIFY_TOPICS'"
t=$(now_ms)
VERIFY="$(mg --verify --mirror "$MIRROR" --topics "$VERIFY_TOPICS" 2>&1)" || { echo "$VERIFY" >&2; die "--verify failed"; }
VERIFY_MS=$(( $(now_ms) - t ))
echo "$VERIFY" >"$WORK/verify.txt"
VERIFY_LINE="$(grep -m1 '^Verified' <<<"$VERIFY" || tail -n 1 <<<"$VERIFY")"
grep -qE ' 0 different' <<<"$VERIFY" || { echo "$VERIFY" >&2; die "--verify reports a difference"; }
log "--verify passed in $(secs "$VERIFY_MS") s: $VERIFY_LINE"

# ---------------------------------------------------------------------------------------------
# report
# ---------------------------------------------------------------------------------------------
declare -A S
while IFS='=' read -r k v; do S[$k]="$v"; done < <(util soak-summary "$WORK/samples.csv" "$WARMUP")
soak_s() { awk -v ms="$SOAK_MS" 'BEGIN{printf "%.0f", ms / 1000}'; }
MG_SOAK_CPU="$(awk -v a="$C_MG2" -v b="$C_MG3" 'BEGIN{printf "%.1f", b - a}')"
WIN_S="$(awk -v a="$T_SOAK" -v b="$LAG0_END_AT" 'BEGIN{printf "%.1f", (b - a) / 1000}')"
MG_SOAK_PCT="$(awk -v c="$MG_SOAK_CPU" -v s="$WIN_S" 'BEGIN{printf "%.1f", 100 * c / s}')"
SRC_SOAK_PCT="$(awk -v a="$C_SRC2" -v b="$C_SRC3" -v s="$WIN_S" 'BEGIN{printf "%.1f", 100 * (b - a) / s}')"
DST_SOAK_PCT="$(awk -v a="$C_DST2" -v b="$C_DST3" -v s="$WIN_S" 'BEGIN{printf "%.1f", 100 * (b - a) / s}')"
CPU_PER_M="$(awk -v c="$MG_SOAK_CPU" -v n="$COPIED" 'BEGIN{printf "%.1f", (n > 0 ? c / (n / 1e6) : 0)}')"
COPY_RATE="$(awk -v n="$COPIED" -v s="$WIN_S" 'BEGIN{printf "%.0f", n / s}')"
MEM="$(awk '/MemTotal/ {printf "%.1f GiB", $2/1048576}' /proc/meminfo)"
CPU_MODEL="$(awk -F': ' '/model name/ {print $2; exit}' /proc/cpuinfo)"
JAVA="$(java -version 2>&1 | head -n 1)"
LOAD="$(cut -d' ' -f1-3 /proc/loadavg)"
CMD="BENCH_SOAK_SECONDS=$SOAK${BENCH_SCALE_RATE:+ BENCH_SCALE_RATE=$RATE}${BENCH_MG_BIN:+ BENCH_MG_BIN=$BENCH_MG_BIN} make bench-scale"
{
  echo "# 1,000-partition mirror and soak — $DATE"
  echo
  echo "\`benches/harness/scale.sh\` (\`$CMD\`), total run $(secs $(( $(now_ms) - T0 ))) s."
  echo
  echo "- machine: \`nproc\` = $(nproc), $MEM RAM, $CPU_MODEL; load average at the start: $LOAD_START, at the end: $LOAD (other jobs share the machine when this is above ~2)"
  echo "- Kafka $KAFKA_VERSION (KRaft, one node per cluster, full JIT, heap $HEAP), $JAVA"
  echo "- mirrorgate commit $COMMIT (release build), mirror config: defaults${BENCH_MIRROR_CONFIG:+ + $BENCH_MIRROR_CONFIG}"
  echo "- $TOPICS topics × $PARTS partitions = $TOTAL_PARTS partitions, $SEED records of $SIZE B seeded per partition; soak $SOAK s at $RATE records/s of $SIZE B, round-robin over every partition (librdkafka, acks=all, linger.ms=${BENCH_SCALE_LINGER_MS:-50}); samples every $INTERVAL s, the first $WARMUP s of the soak are warm-up"
  echo
  echo "| measure | value |"
  echo "|---|---|"
  echo "| catch-up: \`--start\` → lag 0 on all $TOTAL_PARTS partitions ($SEEDED records) | $(secs "$CATCHUP_MS") s, mirrorgate $CATCHUP_CPU CPU s |"
  echo "| mirrorgate RSS: idle before \`--start\` → at lag 0 | $RSS_IDLE → $RSS_CAUGHT MiB |"
  echo "| soak: records produced / copied | $DELIVERED in $PROD_S s ($PRODUCER_RATE records/s) / $COPIED ($COPY_RATE records/s over $WIN_S s, producer start → lag 0) |"
  echo "| RSS after warm-up: first / min / median / max / last | ${S[rss_first_mib]} / ${S[rss_min_mib]} / ${S[rss_median_mib]} / ${S[rss_max_mib]} / ${S[rss_last_mib]} MiB (${S[post_warmup_samples]} samples) |"
  echo "| RSS flat within ±10 % of the median | **${S[rss_flat]}** (min ${S[rss_low_pct]} %, max ${S[rss_high_pct]} %) |"
  echo "| RSS over the whole soak (incl. warm-up): min / max | ${S[rss_all_min_mib]} / ${S[rss_all_max_mib]} MiB |"
  echo "| mirrorgate CPU during the soak: average / max 10-s sample | $MG_SOAK_PCT % / ${S[cpu_pct_max]} % of one core |"
  echo "| mirrorgate CPU seconds per million records copied | $CPU_PER_M s |"
  echo "| brokers' CPU during the soak: source / destination | $SRC_SOAK_PCT % / $DST_SOAK_PCT % |"
  echo "| mirrorgate threads | ${S[threads]} |"
  echo "| TCP connections of mirrorgate to the source broker (1 broker) | ${S[conns_source]} |"
  echo "| TCP connections of mirrorgate to the destination broker (1 broker) | ${S[conns_destination]} |"
  echo "| connections accepted on mirrorgate's listener (the sampler's \`--describe\`) / other | ${S[conns_listener]} / ${S[conns_other]} |"
  echo "| total lag during the soak (post warm-up samples): median / max | ${S[lag_median]} / ${S[lag_max]} records |"
  echo "| lag 0 on all partitions after the producer stopped | $(secs "$DRAIN_MS") s later |"
  echo "| \`--verify --topics '$VERIFY_TOPICS'\` | passed in $(secs "$VERIFY_MS") s: $VERIFY_LINE |"
  echo
  echo "Connection counts are the min–max over all samples (established TCP sockets of the mirrorgate"
  echo "process by remote port). Busiest mirrorgate threads (CPU s over the whole run):"
  echo "$(head -n 4 "$WORK/mirrorgate.threads" | awk '{printf "%s%s %s", (NR>1 ? ", " : ""), $1, $4}')."
  echo "Samples: target/bench-scale/samples.csv (copied next to this file as $(basename "${OUT%.md}").csv)."
} >"$WORK/results.md"
cp "$WORK/results.md" "$OUT"
cp "$WORK/samples.csv" "${OUT%.md}.csv"
echo
cat "$OUT"
log "results written to $OUT (logs in $WORK)"
