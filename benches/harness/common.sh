# Sourced by the benchmarks that start their own clusters (mirror.sh, scale.sh, proxy.sh): their
# logging, clean-up, mirrorgate binary, clusters and mirrorgate, written once.
#
# The sourcing script sets BENCH_NAME (the log prefix) before sourcing, and before it calls
# these: REPO (the checkout), WORK (its work directory), HEAP (broker heap), KAFKA_VERSION;
# SRC_NAME and DST_NAME for bench_clusters. It may define `stop_workers` (its own processes,
# stopped first on exit).
#
#   now_ms, log, die, secs, stop_pid PID SECS, util (bench_util.py), T0, LOAD_START
#   bench_start CMD...   CMDs checked, clean-up on exit (stop_workers, mirrorgate, every cluster
#                        in STARTED_CLUSTERS), WORK emptied, PY set
#   bench_binary         MG_BIN (a private copy in WORK) and COMMIT: BENCH_MG_BIN, or a release
#                        build (not with BENCH_SKIP_BUILD=1) of this checkout
#   bench_clusters       starts the source and destination clusters (full JIT, heap HEAP) side
#                        by side; sets SRC, DST (bootstrap addresses), KAFKA_STATE, SRC_PID and
#                        DST_PID
#   bench_mirrorgate     starts MG_BIN in front of DST (an admin listener on 12 ports from
#                        MG_PORT, log level info) and waits until it is ready; sets MG, MG_PID
#                        and `mg` (mirrorgate mirrors --bootstrap-server MG ...)

T0=$(date +%s%3N)
LOAD_START="$(cut -d' ' -f1-3 /proc/loadavg)"
now_ms() { date +%s%3N; }
log() { printf '[%s %7.1fs] %s\n' "$BENCH_NAME" "$(( $(now_ms) - T0 ))e-3" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }
secs() { awk -v ms="$1" 'BEGIN{printf "%.1f", ms / 1000}'; }

stop_pid() {   # pid, seconds before KILL
  local pid="$1" secs="${2:-10}"
  [[ -n "$pid" ]] && kill -0 "$pid" 2>/dev/null || return 0
  kill -TERM "$pid" 2>/dev/null || true
  for _ in $(seq 1 $((secs * 10))); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  kill -KILL "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
}

MG_PID="" STARTED_CLUSTERS=() CLEANED=0
stop_workers() { :; }
bench_cleanup() {
  [[ "$CLEANED" == 1 ]] && return 0
  CLEANED=1
  trap - INT TERM
  stop_workers
  stop_pid "$MG_PID" 5
  local c
  for c in "${STARTED_CLUSTERS[@]+"${STARTED_CLUSTERS[@]}"}"; do
    scripts/kafka.sh stop "$c" >/dev/null 2>&1 || true
  done
}

bench_start() {   # required commands
  local cmd
  for cmd in "$@"; do
    command -v "$cmd" >/dev/null 2>&1 || die "required command not found: $cmd"
  done
  trap bench_cleanup EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
  rm -rf "$WORK"
  mkdir -p "$WORK"
  PY="$(scripts/pyenv.sh)"
}
util() { "$PY" benches/harness/bench_util.py "$@"; }

bench_binary() {
  if [[ -n "${BENCH_MG_BIN:-}" ]]; then
    cp "$BENCH_MG_BIN" "$WORK/mirrorgate"
    COMMIT="binary $BENCH_MG_BIN"
  else
    if [[ "${BENCH_SKIP_BUILD:-0}" != 1 ]]; then
      command -v cargo >/dev/null 2>&1 || die "required command not found: cargo (or give BENCH_MG_BIN)"
      log "building mirrorgate (cargo build --release)"
      cargo build --release --quiet --bin mirrorgate
    fi
    # A private copy: others may rebuild target/release while the benchmark runs.
    cp target/release/mirrorgate "$WORK/mirrorgate"
    # The commit the binary was built from (+dirty-src: uncommitted changes under src/ at build time).
    COMMIT="$(git rev-parse --short=12 HEAD)$(git diff --quiet HEAD -- src Cargo.toml Cargo.lock 2>/dev/null || echo '+dirty-src')"
  fi
  MG_BIN="$WORK/mirrorgate"
}

bench_clusters() {
  scripts/kafka.sh fetch "$KAFKA_VERSION"
  log "starting clusters $SRC_NAME and $DST_NAME (full JIT, heap $HEAP)"
  STARTED_CLUSTERS=("$SRC_NAME" "$DST_NAME")
  local p1 p2
  _start_cluster "$SRC_NAME" & p1=$!
  _start_cluster "$DST_NAME" & p2=$!
  wait "$p1" || { cat "$WORK/$SRC_NAME.start.log" >&2; die "source cluster did not start"; }
  wait "$p2" || { cat "$WORK/$DST_NAME.start.log" >&2; die "destination cluster did not start"; }
  SRC="$(head -n 1 "$WORK/$SRC_NAME.bootstrap")"
  DST="$(head -n 1 "$WORK/$DST_NAME.bootstrap")"
  KAFKA_STATE="${MIRRORGATE_KAFKA_DIR:-$REPO/.kafka}"
  SRC_PID="$(cat "$KAFKA_STATE/$SRC_NAME/node-1/pid")"
  DST_PID="$(cat "$KAFKA_STATE/$DST_NAME/node-1/pid")"
}
_start_cluster() {
  MIRRORGATE_KAFKA_FULL_JIT=1 MIRRORGATE_KAFKA_HEAP="$HEAP" \
    scripts/kafka.sh start "$1" --owner-pid $$ >"$WORK/$1.bootstrap" 2>"$WORK/$1.start.log"
}

# The port count of bench_mirrorgate's listener (its bootstrap port and one per broker).
MG_PORTS=12
bench_mirrorgate() {
  MG_PORT="$(util free-ports "$MG_PORTS")"
  MG="127.0.0.1:$MG_PORT"
  cat >"$WORK/mirrorgate.yaml" <<Y
destination:
  bootstrap_servers: $DST
listeners:
  - name: bench
    bind_host: 127.0.0.1
    advertised_host: 127.0.0.1
    port_range: $MG_PORT-$((MG_PORT + MG_PORTS - 1))
    admin: true
mirror_state:
  topic: __mirror_state
  num_partitions: 3
log:
  level: info
Y
  log "starting mirrorgate on $MG"
  "$MG_BIN" run --config "$WORK/mirrorgate.yaml" </dev/null >"$WORK/mirrorgate.log" 2>&1 &
  MG_PID=$!
  local deadline=$(( $(date +%s) + 60 ))
  until grep -q 'mirrorgate ready' "$WORK/mirrorgate.log" 2>/dev/null; do
    kill -0 "$MG_PID" 2>/dev/null || { tail -n 20 "$WORK/mirrorgate.log" >&2; MG_PID=""; die "mirrorgate exited"; }
    (( $(date +%s) < deadline )) || { tail -n 20 "$WORK/mirrorgate.log" >&2; die "mirrorgate not ready after 60s"; }
    sleep 0.2
  done
}
mg() { "$MG_BIN" mirrors --bootstrap-server "$MG" "$@"; }
