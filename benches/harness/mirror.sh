#!/usr/bin/env bash
# End-to-end mirroring throughput, side by side (`make bench-mirror`, DESIGN §4.11, §7).
#
# Starts a source and a destination Kafka cluster (scripts/kafka.sh, full JIT, 1G heaps),
# produces each case's data set on the source with Kafka's producer-perf, then measures:
#   mirrorgate   release build in front of the destination: --create a mirror, --start the
#                topic, time until the destination's end offsets equal the source's, then
#                --describe (lag 0) and --verify (must pass);
#   direct       consumer-perf reading the same topic from the source, and producer-perf
#                writing the same data set to the destination: the brokers' own ceilings;
#   MM2          MirrorMaker 2 (dedicated mode, tasks.max = partitions) until `src.<topic>`
#                on the destination holds every record (MM2 renames the topic and assigns
#                new offsets).
# MB/s is record payload (records × record size, 10^6 bytes) divided by the copy time.
# Prints a results table and writes it with machine facts to benches/harness/results-<date>.md.
#
# Cases (BENCH_CASES, space-separated):
#   large  BENCH_RECORDS (1000000) × BENCH_RECORD_SIZE (1024) B, lz4, linger.ms=20,
#          batch.size=262144
#   small  BENCH_SMALL_RECORDS (300000) × BENCH_SMALL_RECORD_SIZE (100) B, lz4, linger.ms=0,
#          batch.size=1 (one record per batch: the hard case of DESIGN §4.11)
#   small-plain  BENCH_SMALL_PLAIN_RECORDS (1000000) records like small's, uncompressed
#          (compression.type=none): one-record batches that mirrorgate merges
#          (mirror.coalesce.max.bytes) without recompressing
#   uneven BENCH_UNEVEN_RECORDS (1000000) × BENCH_RECORD_SIZE B, lz4, linger.ms=20,
#          batch.size=262144, partition p holding a share proportional to p + 1 (written by
#          librdkafka): the first partitions catch up long before the last (issue 13's stall)
# The default sizes make every measured copy last at least 10 s on a 2-vCPU machine: shorter
# copies ranked mirrorgate against MM2 anywhere from × 0.70 to × 1.64 between runs of one binary.
# A copy shorter than BENCH_MIN_COPY_S is flagged in the tables as too short to rank.
# Every case runs BENCH_RUNS times (fresh topics, same clusters); the summary table gives each
# figure's median and its spread (min–max) over the runs, and the ratios of the same run's pair.
# Other environment:
#   BENCH_RUNS (3)            runs of every case;  BENCH_MIN_COPY_S (10) shortest copy to rank
#   BENCH_SAMPLE_MS (100)     CPU sampling period of the processes measured
#   BENCH_PARTITIONS (6)      partitions per topic (and MM2 tasks.max)
#   BENCH_DIRECT (1)          run the direct baselines;  BENCH_MM2 (1) run MirrorMaker 2
#   BENCH_HEAP (1g)           broker heap;  BENCH_TIMEOUT (300) seconds per measurement
#   BENCH_SKIP_BUILD=1        use target/release/mirrorgate as it is
#   BENCH_MG_BIN              measure this mirrorgate binary instead (implies no build; the
#                             commit column then names the binary)
#   BENCH_OUT                 results file (default benches/harness/results-<UTC date>.md)
#   BENCH_MIRROR_CONFIG       extra lines for the mirror's config file (e.g. fetch.max.bytes=...)
#
# Work files and logs: target/bench-mirror/. Clusters, mirrorgate and MM2 are stopped on exit.
# Exit codes: 0 ok, 1 a step failed (including a failed --verify).
set -euo pipefail
cd "$(dirname "$0")/../.."
REPO="$(pwd)"

CASES="${BENCH_CASES:-large small small-plain uneven}"
PARTITIONS="${BENCH_PARTITIONS:-6}"
LARGE_N="${BENCH_RECORDS:-1000000}"
LARGE_S="${BENCH_RECORD_SIZE:-1024}"
SMALL_N="${BENCH_SMALL_RECORDS:-300000}"
SMALL_PLAIN_N="${BENCH_SMALL_PLAIN_RECORDS:-1000000}"
SMALL_S="${BENCH_SMALL_RECORD_SIZE:-100}"
UNEVEN_N="${BENCH_UNEVEN_RECORDS:-1000000}"
RUNS="${BENCH_RUNS:-3}"
MIN_COPY_S="${BENCH_MIN_COPY_S:-10}"
SAMPLE_MS="${BENCH_SAMPLE_MS:-100}"
DIRECT="${BENCH_DIRECT:-1}"
MM2="${BENCH_MM2:-1}"
HEAP="${BENCH_HEAP:-1g}"
TIMEOUT="${BENCH_TIMEOUT:-300}"
DATE="$(date -u +%F)"
OUT="${BENCH_OUT:-benches/harness/results-$DATE.md}"
WORK="${BENCH_WORK:-$REPO/target/bench-mirror}"
SRC_NAME="bench-src-$$"
DST_NAME="bench-dst-$$"
KAFKA_VERSION="${KAFKA_VERSION:-4.1.1}"

BENCH_NAME=bench-mirror
# shellcheck source=benches/harness/common.sh
source benches/harness/common.sh
tool() { scripts/kafka.sh tool "$@"; }
MM2_PID="" SAMPLER_PID=""
stop_workers() {
  stop_pid "$SAMPLER_PID" 1
  stop_pid "$MM2_PID" 10
}
bench_start java mvn python3

# ---------------------------------------------------------------------------------------------
# build, clusters, mirrorgate
# ---------------------------------------------------------------------------------------------
bench_binary
bench_clusters
SRC_DATA="$KAFKA_STATE/$SRC_NAME/node-1/data"
DST_DATA="$KAFKA_STATE/$DST_NAME/node-1/data"
log "source $SRC (pid $SRC_PID), destination $DST (pid $DST_PID)"

bench_mirrorgate

# ---------------------------------------------------------------------------------------------
# measurement helpers
# ---------------------------------------------------------------------------------------------
# CPU of the given pids while a measurement runs, sampled every $SAMPLE_MS ms. Each line:
# "EPOCH_MS DT_MS TICKS_PID1 TICKS_PID2 ... MACHINE_BUSY%" (ticks of utime + stime since the
# previous line, at getconf CLK_TCK per second), so a window of the run (MM2's copy, from its
# first record to its last) can be cut out to the sample rather than to the second.
start_sampler() {   # file pid...
  local file="$1"; shift
  local period; period=$(awk -v ms="$SAMPLE_MS" 'BEGIN{printf "%.3f", ms / 1000}')
  (
    declare -A prev
    read_ticks() { local l; l="$(cat "/proc/$1/stat" 2>/dev/null)" || { echo 0; return; }
      local -a f; read -r -a f <<<"${l##*) }"; echo $(( f[11] + f[12] )); }
    sys_ticks() { local -a f; read -r -a f < /proc/stat; echo $(( f[1]+f[2]+f[3]+f[5]+f[6]+f[7] )) $(( f[1]+f[2]+f[3]+f[4]+f[5]+f[6]+f[7] )); }
    for p in "$@"; do prev[$p]=$(read_ticks "$p"); done
    read -r sb st < <(sys_ticks)
    last=$(date +%s%3N)
    while sleep "$period"; do
      t=$(date +%s%3N)
      line="$t $(( t - last )) "; last=$t
      for p in "$@"; do   # a process gone (ticks 0) counts 0 from then on
        k=$(read_ticks "$p"); (( k >= prev[$p] )) || k=${prev[$p]}
        line+="$(( k - prev[$p] )) "; prev[$p]=$k
      done
      read -r nb nt < <(sys_ticks)
      echo "$line$(( 100 * (nb - sb) / (nt - st > 0 ? nt - st : 1) ))"
      sb=$nb; st=$nt
    done
  ) >"$file" 2>/dev/null &
  SAMPLER_PID=$!
}
stop_sampler() { stop_pid "$SAMPLER_PID" 1; SAMPLER_PID=""; }
HZ="$(getconf CLK_TCK)"
# peak CPU% (of one core) of the Nth sampled pid (1-based) over samples of at least 500 ms
# (shorter samples hold a handful of ticks: too coarse for a peak)
cpu_peak() { awk -v c="$(( $2 + 2 ))" -v hz="$HZ" -v w=500 '
  {acc+=$c; dt+=$2; if (dt >= w) {p=100*acc/hz/(dt/1000); if (p>m) m=p; acc=0; dt=0}}
  END{printf "%.0f", m}' "$1"; }
# machine busy % averaged over the samples
machine_avg() { awk '{s+=$NF; n++} END{if (n) printf "%.0f", s/n; else print 0}' "$1"; }
# CPU-seconds of the Nth sampled pid over samples ending in (FROM_MS, TO_MS]
window_cpu_s() {   # file n from_ms to_ms
  awk -v c="$(( $2 + 2 ))" -v a="$3" -v b="$4" -v hz="$HZ" \
    '{ if ($1 + 0 > a + 0 && $1 + 0 <= b + 0) s += $c } END { printf "%.2f", s / hz }' "$1"; }

mbps() { awk -v b="$1" -v ms="$2" 'BEGIN{printf "%.1f", (ms > 0 ? b / 1e6 / (ms / 1000) : 0)}'; }
rps() { awk -v n="$1" -v ms="$2" 'BEGIN{printf "%.0f", (ms > 0 ? n / (ms / 1000) : 0)}'; }
pct() { awk -v c="$1" -v ms="$2" 'BEGIN{printf "%.0f", (ms > 0 ? 100 * c / (ms / 1000) : 0)}'; }
cpu_of() { util cpu "$@"; }
# CPU-seconds per GB of record payload: cpu_per_gb <cpu seconds> <bytes>
cpu_per_gb() { awk -v c="$1" -v b="$2" 'BEGIN{printf "%.1f", (b > 0 ? c / (b / 1e9) : 0)}'; }

create_topic() {   # bootstrap topic
  tool topics --bootstrap-server "$1" --create --topic "$2" --partitions "$PARTITIONS" \
    --replication-factor 1 >/dev/null
}
# producer-perf; prints "records/sec MB/sec" from its summary line.
produce() {   # bootstrap topic n size props...
  local boot="$1" topic="$2" n="$3" size="$4"; shift 4
  local out
  out="$(tool producer-perf --topic "$topic" --num-records "$n" --record-size "$size" --throughput -1 \
    --producer-props bootstrap.servers="$boot" acks=all "$@" 2>"$WORK/producer-perf.err" | tail -n 1)"
  echo "$out" >>"$WORK/producer-perf.log"
  # "1000000 records sent, 52356.0 records/sec (51.13 MB/sec), 512.3 ms avg latency, ..."
  sed -E 's/.* ([0-9.]+) records\/sec \(([0-9.]+) MB\/sec\).*/\1 \2/' <<<"$out"
}

RESULTS=()   # markdown table rows
NOTES=()
add_row() { RESULTS+=("| $(IFS='|'; echo "$*" | sed 's/|/ | /g') |"); }

# ---------------------------------------------------------------------------------------------
# one case
# ---------------------------------------------------------------------------------------------
# One line per measured copy: case, run, path (mg|mm2), time ms, bytes, records, CPU-s.
RUNS_TSV="$WORK/runs.tsv"
: >"$RUNS_TSV"
record_run() { printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$@" >>"$RUNS_TSV"; }
# "" or a flag for a copy shorter than MIN_COPY_S
short_flag() { (( $1 >= MIN_COPY_S * 1000 )) || echo " (**under ${MIN_COPY_S} s: too short to rank**)"; }

run_case() {   # name run n size producer-props...
  local name="$1" run="$2" n="$3" size="$4"; shift 4
  local props=("$@")
  local topic="bench-$name-r$run" bytes=$(( n * size ))
  local label="$name (run $run of $RUNS): $n × $size B, ${props[*]}"
  local cpu_file="$WORK/$name-r$run"
  log "=== case $label"

  create_topic "$SRC" "$topic"
  log "producing $n records of $size B on the source"
  local t p_rps p_mbs
  t=$(now_ms)
  if [[ "$name" == uneven ]]; then
    read -r p_rps p_mbs < <(util produce-uneven "$SRC" "$topic" "$n" "$size" "$PARTITIONS")
  else
    read -r p_rps p_mbs < <(produce "$SRC" "$topic" "$n" "$size" "${props[@]}")
  fi
  local prod_ms=$(( $(now_ms) - t ))
  local src_ends sum
  src_ends="$(util ends "$SRC" "$topic")"
  sum="$(python3 -c 'import json,sys; print(sum(json.loads(sys.argv[1]).values()))' "$src_ends")"
  [[ "$sum" == "$n" ]] || die "source holds $sum offsets, expected $n"
  local log_bytes batches recs
  read -r log_bytes batches recs < <(util log-stats "$SRC_DATA" "$topic")
  local per_batch=$(( recs / (batches > 0 ? batches : 1) ))
  log "source: $n records, $log_bytes log bytes in $batches batches ($per_batch records/batch, $(( log_bytes / (batches > 0 ? batches : 1) )) B/batch)"
  add_row "$name r$run" "producer-perf → source broker (ingest)" "$(secs "$prod_ms")" "$p_mbs" "${p_rps%.*}" "—" "—"

  # --- mirrorgate ---
  local mirror="bench-$name-r$run-$$"
  printf 'bootstrap.servers=%s\n%s\n' "$SRC" "${BENCH_MIRROR_CONFIG:-}" >"$WORK/$mirror.properties"
  mg --create --mirror "$mirror" --mirror-config "$WORK/$mirror.properties" >/dev/null
  start_sampler "$cpu_file-mirrorgate.cpu" "$MG_PID" "$SRC_PID" "$DST_PID"
  read -r c_mg0 c_src0 c_dst0 < <(cpu_of "$MG_PID" "$SRC_PID" "$DST_PID")
  local t_start; t_start=$(now_ms)
  mg --start --mirror "$mirror" --topics "$topic" >/dev/null
  local first done_ms
  read -r first done_ms < <(util wait-ends "$DST" "$topic" "$n" "$TIMEOUT" "$PARTITIONS") \
    || die "mirrorgate did not copy $topic within ${TIMEOUT}s; see $WORK/mirrorgate.log"
  read -r c_mg1 c_src1 c_dst1 < <(cpu_of "$MG_PID" "$SRC_PID" "$DST_PID")
  stop_sampler
  local wall=$(( done_ms - t_start )) copy=$(( done_ms - first ))
  util threads "$MG_PID" >"$cpu_file-mirrorgate.threads"
  local mg_cpu src_cpu dst_cpu
  mg_cpu=$(pct "$(awk -v a="$c_mg0" -v b="$c_mg1" 'BEGIN{print b-a}')" "$wall")
  src_cpu=$(pct "$(awk -v a="$c_src0" -v b="$c_src1" 'BEGIN{print b-a}')" "$wall")
  dst_cpu=$(pct "$(awk -v a="$c_dst0" -v b="$c_dst1" 'BEGIN{print b-a}')" "$wall")
  local mg_peak sys_avg mg_cpu_s
  mg_cpu_s=$(awk -v a="$c_mg0" -v b="$c_mg1" 'BEGIN{printf "%.2f", b-a}')
  mg_peak=$(cpu_peak "$cpu_file-mirrorgate.cpu" 1)
  sys_avg=$(machine_avg "$cpu_file-mirrorgate.cpu")
  record_run "$name" "$run" mg "$wall" "$bytes" "$n" "$mg_cpu_s"
  log "mirrorgate: $(secs "$wall") s from --start ($(secs "$copy") s first→last), $(mbps "$bytes" "$wall") MB/s; CPU mirrorgate ${mg_cpu}% (peak ${mg_peak}%), source broker ${src_cpu}%, destination broker ${dst_cpu}%, machine ${sys_avg}% busy"
  add_row "$name r$run" "**mirrorgate** (source → mirrorgate → destination)" "$(secs "$wall")$(short_flag "$wall")" "$(mbps "$bytes" "$wall")" \
    "$(rps "$n" "$wall")" "mg ${mg_cpu}% (peak ${mg_peak}%; $mg_cpu_s CPU-s, $(cpu_per_gb "$mg_cpu_s" "$bytes") CPU-s/GB), src ${src_cpu}%, dst ${dst_cpu}%, machine ${sys_avg}%" "verify: …"
  local row_idx=$(( ${#RESULTS[@]} - 1 ))

  # describe must reach lag 0 (its progress is refreshed by the next source fetch), then verify.
  local deadline=$(( $(date +%s) + 60 )) desc
  while :; do
    desc="$(mg --describe --mirror "$mirror" --json)"
    if python3 -c 'import json,sys; r=json.loads(sys.argv[1]); sys.exit(0 if r and all(x["lag"]==0 and x["state"]=="MIRRORING" for x in r) else 1)' "$desc"; then break; fi
    (( $(date +%s) < deadline )) || { echo "$desc" >&2; die "--describe did not show lag 0 for every partition"; }
    sleep 0.5
  done
  local t_v verify
  t_v=$(now_ms)
  verify="$(mg --verify --mirror "$mirror" 2>&1)" || { echo "$verify" >&2; die "--verify failed for $mirror"; }
  echo "$verify" >"$cpu_file-verify.txt"
  grep -q " $PARTITIONS identical, 0 different" <<<"$verify" || { echo "$verify" >&2; die "--verify reports a difference"; }
  log "--verify passed in $(secs $(( $(now_ms) - t_v ))) s: $(grep -m1 Verified <<<"$verify")"
  RESULTS[row_idx]="${RESULTS[row_idx]/verify: …/--verify: $PARTITIONS identical}"
  NOTES+=("- $name r$run: source log $log_bytes B in $batches batches ($per_batch records, $(( log_bytes / (batches > 0 ? batches : 1) )) B per batch); mirrorgate copied first→last offset in $(secs "$copy") s. Busiest mirrorgate threads (CPU s): $(head -n 3 "$cpu_file-mirrorgate.threads" | awk '{printf "%s%s %s", (NR>1 ? ", " : ""), $1, $4}').")

  # --- direct baselines ---
  if [[ "$DIRECT" == 1 && "$run" == 1 ]]; then
    log "consumer-perf from the source"
    local cp
    cp="$(tool consumer-perf --bootstrap-server "$SRC" --topic "$topic" --messages "$n" --group "bench-cp-$name-r$run-$$" \
      --timeout 60000 --hide-header 2>"$WORK/consumer-perf.err" | tail -n 1)"
    echo "$cp" >>"$WORK/consumer-perf.log"
    # start.time, end.time, MB, MB.sec, nMsg, nMsg.sec, rebalance.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec
    local c_ms c_n
    c_n="$(awk -F', *' '{print $5}' <<<"$cp")"
    c_ms="$(awk -F', *' '{print $8}' <<<"$cp")"
    [[ "${c_n%.*}" -ge "$n" ]] 2>/dev/null || log "WARNING: consumer-perf read ${c_n:-?} of $n records: $cp"
    add_row "$name r$run" "consumer-perf ← source broker (direct read)" "$(secs "$c_ms")" "$(mbps "$bytes" "$c_ms")" "$(rps "$n" "$c_ms")" "—" "—"

    log "producer-perf to the destination"
    create_topic "$DST" "direct-$topic"
    t=$(now_ms)
    read -r p_rps p_mbs < <(produce "$DST" "direct-$topic" "$n" "$size" "${props[@]}")
    add_row "$name r$run" "producer-perf → destination broker (direct write)" "$(secs $(( $(now_ms) - t )))" "$p_mbs" "${p_rps%.*}" "—" "—"
  fi

  # --- MirrorMaker 2 ---
  if [[ "$MM2" == 1 ]]; then
    run_mm2 "$name" "$run" "$topic" "$n" "$bytes"
  fi
}

run_mm2() {   # name run topic n bytes
  local name="$1" run="$2" topic="$3" n="$4" bytes="$5"
  local cfg="$WORK/mm2-$name-r$run.properties"
  local cpu_file="$WORK/$name-r$run-mm2.cpu"
  cat >"$cfg" <<EOF
clusters = src, dst
src.bootstrap.servers = $SRC
dst.bootstrap.servers = $DST
src->dst.enabled = true
dst->src.enabled = false
src->dst.topics = $topic
src->dst.groups.exclude = .*
tasks.max = $PARTITIONS
replication.factor = 1
checkpoints.topic.replication.factor = 1
heartbeats.topic.replication.factor = 1
offset-syncs.topic.replication.factor = 1
offset.storage.replication.factor = 1
status.storage.replication.factor = 1
config.storage.replication.factor = 1
sync.group.offsets.enabled = false
emit.checkpoints.enabled = false
emit.heartbeats.enabled = false
sync.topic.acls.enabled = false
refresh.topics.interval.seconds = 5
refresh.groups.interval.seconds = 600
# The same producer settings as the data set's producer (MM2 recompresses what it copies).
dst.producer.compression.type = lz4
dst.producer.linger.ms = 20
dst.producer.batch.size = 262144
EOF
  log "MirrorMaker 2: src->dst for $topic (tasks.max=$PARTITIONS)"
  local t_start; t_start=$(now_ms)
  # kafka.sh runs tools with C1 only; the later -XX flag restores the full tiered JIT.
  MIRRORGATE_TOOL_HEAP=1g MIRRORGATE_TOOL_JAVA_OPTS="-XX:TieredStopAtLevel=4" \
    scripts/kafka.sh tool mirror-maker "$cfg" --clusters dst >"$WORK/mm2-$name-r$run.log" 2>&1 &
  MM2_PID=$!
  sleep 1
  start_sampler "$cpu_file" "$MM2_PID" "$SRC_PID" "$DST_PID"
  read -r c_mm0 c_src0 c_dst0 < <(cpu_of "$MM2_PID" "$SRC_PID" "$DST_PID")
  local first done_ms
  read -r first done_ms < <(util wait-ends "$DST" "src.$topic" "$n" "$TIMEOUT" "$PARTITIONS") \
    || die "MM2 did not copy $topic within ${TIMEOUT}s; see $WORK/mm2-$name-r$run.log"
  read -r c_mm1 c_src1 c_dst1 < <(cpu_of "$MM2_PID" "$SRC_PID" "$DST_PID")
  stop_sampler
  stop_pid "$MM2_PID" 15; MM2_PID=""
  local wall=$(( done_ms - t_start )) copy=$(( done_ms - first ))
  local mm_cpu src_cpu dst_cpu
  # CPU over the copy window only would need sampling; report over launch → done.
  mm_cpu=$(pct "$(awk -v a="$c_mm0" -v b="$c_mm1" 'BEGIN{print b-a}')" "$((wall - 1000))")
  src_cpu=$(pct "$(awk -v a="$c_src0" -v b="$c_src1" 'BEGIN{print b-a}')" "$((wall - 1000))")
  dst_cpu=$(pct "$(awk -v a="$c_dst0" -v b="$c_dst1" 'BEGIN{print b-a}')" "$((wall - 1000))")
  local mm_peak; mm_peak=$(cpu_peak "$cpu_file" 1)
  # MM2's CPU over its copy window only (the samples taken from its first record on the
  # destination to its last; its JVM start and task assignment are left out), and over
  # launch → done.
  local mm_copy_s mm_all_s
  mm_copy_s=$(window_cpu_s "$cpu_file" 1 "$first" "$done_ms")
  mm_all_s=$(awk -v a="$c_mm0" -v b="$c_mm1" 'BEGIN{printf "%.2f", b-a}')
  local mm_bytes mm_batches mm_recs
  read -r mm_bytes mm_batches mm_recs < <(util log-stats "$DST_DATA" "src.$topic")
  log "MM2: $(secs "$wall") s from launch, $(secs "$copy") s first→last record, $(mbps "$bytes" "$copy") MB/s; CPU MM2 ${mm_cpu}% (peak ${mm_peak}%); destination log $mm_bytes B in $mm_batches batches"
  record_run "$name" "$run" mm2 "$copy" "$bytes" "$n" "$mm_copy_s"
  add_row "$name r$run" "MirrorMaker 2 (topic src.$topic, new offsets)" "$(secs "$copy")$(short_flag "$copy") (+$(secs $(( first - t_start ))) startup)" \
    "$(mbps "$bytes" "$copy")" "$(rps "$n" "$copy")" "mm2 ${mm_cpu}% (peak ${mm_peak}%; $mm_copy_s CPU-s in the copy, $(cpu_per_gb "$mm_copy_s" "$bytes") CPU-s/GB; $mm_all_s CPU-s from launch), src ${src_cpu}%, dst ${dst_cpu}%" "offsets not kept"
  NOTES+=("- $name r$run: MM2 wrote $mm_bytes B in $mm_batches batches on the destination (re-batched and recompressed).")
}

# ---------------------------------------------------------------------------------------------
# run
# ---------------------------------------------------------------------------------------------
for c in $CASES; do
  case "$c" in large|small|small-plain|uneven) ;; *) die "unknown case '$c' (large, small, small-plain, uneven)" ;; esac
done
[[ "$RUNS" =~ ^[1-9][0-9]*$ ]] || die "BENCH_RUNS must be a positive whole number, not '$RUNS'"
for c in $CASES; do
  for (( r = 1; r <= RUNS; r++ )); do
    case "$c" in
      large) run_case large "$r" "$LARGE_N" "$LARGE_S" compression.type=lz4 linger.ms=20 batch.size=262144 ;;
      small) run_case small "$r" "$SMALL_N" "$SMALL_S" compression.type=lz4 linger.ms=0 batch.size=1 ;;
      small-plain) run_case small-plain "$r" "$SMALL_PLAIN_N" "$SMALL_S" compression.type=none linger.ms=0 batch.size=1 ;;
      uneven) run_case uneven "$r" "$UNEVEN_N" "$LARGE_S" compression.type=lz4 linger.ms=20 batch.size=262144 ;;
    esac
  done
done

# ---------------------------------------------------------------------------------------------
# report
# ---------------------------------------------------------------------------------------------
MEM="$(awk '/MemTotal/ {printf "%.1f GiB", $2/1048576}' /proc/meminfo)"
CPU_MODEL="$(awk -F': ' '/model name/ {print $2; exit}' /proc/cpuinfo)"
JAVA="$(java -version 2>&1 | head -n 1)"
LOAD="$(cut -d' ' -f1-3 /proc/loadavg)"
{
  echo "# End-to-end mirroring benchmark — $DATE"
  echo
  echo "\`benches/harness/mirror.sh\` (\`make bench-mirror\`), total run $(secs $(( $(now_ms) - T0 ))) s."
  echo
  echo "- machine: \`nproc\` = $(nproc), $MEM RAM, $CPU_MODEL; load average at the start: $LOAD_START, at the end: $LOAD (other jobs share the machine when this is above ~2)"
  echo "- Kafka $KAFKA_VERSION (KRaft, one node per cluster, full JIT, heap $HEAP, SerialGC), $JAVA"
  echo "- mirrorgate commit $COMMIT (release build), mirror configs: defaults${BENCH_MIRROR_CONFIG:+ + $BENCH_MIRROR_CONFIG}"
  echo "- $PARTITIONS partitions per topic; MB/s = records × record size / time (10^6 B); producers use acks=all"
  echo
  echo "## Summary over $RUNS run(s) per case: median (min–max)"
  echo
  echo "mirrorgate's time runs from \`--start\`, MM2's from its first record on the destination. The"
  echo "ratios are taken within each run (mirrorgate against the MM2 copy that followed it on the same"
  echo "clusters), then summarised; a ratio is not stated when any copy in it lasted under ${MIN_COPY_S} s."
  echo
  util spread "$RUNS_TSV" "$MIN_COPY_S"
  echo
  echo "## Every run"
  echo
  echo "| case | path | time (s) | MB/s | records/s | CPU (avg over the copy) | check |"
  echo "|---|---|---|---|---|---|---|"
  printf '%s\n' "${RESULTS[@]}"
  echo
  printf '%s\n' "${NOTES[@]}"
} >"$WORK/results.md"
cp "$WORK/results.md" "$OUT"
echo
cat "$OUT"
log "results written to $OUT (logs in $WORK)"
