# Sourced by the proxy benchmarks (proxy.sh, consume.sh): optional CPU pinning, to measure
# mirrorgate on a core of its own, as it runs in production (its own host or pod), instead of
# sharing every core with the broker and the clients.
#   BENCH_KAFKA_CPUS  cpu list (taskset -c) for everything but mirrorgate: the broker, the
#                     perf tools, this script (e.g. 0)
#   BENCH_MG_CPUS     cpu list for mirrorgate (e.g. 1)
# Both unset: nothing is pinned. Direct and proxied rounds then get the same cores for the
# broker and the clients; the proxied rounds get mirrorgate's core(s) on top.
# usage: bench_pin "$@"   (first thing: re-runs the script under BENCH_KAFKA_CPUS)
#        "${MG_PIN[@]}" mirrorgate ...
#        pin_facts        (one line for the results table)
bench_pin() {
  if [[ -n "${BENCH_KAFKA_CPUS:-}" && -z "${BENCH_PINNED:-}" ]]; then
    command -v taskset >/dev/null || { echo "BENCH_KAFKA_CPUS needs taskset (util-linux)" >&2; exit 1; }
    BENCH_PINNED=1 exec taskset -c "$BENCH_KAFKA_CPUS" bash "$0" "$@"
  fi
}
MG_PIN=()
if [[ -n "${BENCH_MG_CPUS:-}" ]]; then MG_PIN=(taskset -c "$BENCH_MG_CPUS"); fi
pin_facts() {
  if [[ -n "${BENCH_KAFKA_CPUS:-}${BENCH_MG_CPUS:-}" ]]; then
    echo "Pinned: broker and clients on CPU ${BENCH_KAFKA_CPUS:-any}, mirrorgate on CPU ${BENCH_MG_CPUS:-any} (taskset)."
  else
    echo "Not pinned: mirrorgate shares every CPU with the broker and the clients."
  fi
}
