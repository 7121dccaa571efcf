#!/usr/bin/env bash
# Fuzzes mirrorgate's decoders with cargo-fuzz (libFuzzer + AddressSanitizer), one target at a
# time (docs/reliability.md lists the targets and the latest long run).
#
#   scripts/fuzz.sh [--short | --long] [TARGET...]
#
#   --short  (default; the CI form) FUZZ_SECONDS (default 20) wall-clock seconds per target.
#   --long   FUZZ_SECONDS (default 600) CPU seconds per target, measured on the fuzzer process
#            (a loaded machine gives it less than a wall-clock second per second); run under
#            `nice -n 19`. Prints one summary line per target for docs/reliability.md.
#
# Seeds are read from fuzz/corpus/<target>/ (captured from real traffic by
# tests/fuzz_corpus.rs) and never written to; what the fuzzer finds goes to
# fuzz/target/corpus/<target>/ (kept between runs). A crash leaves its input in
# fuzz/artifacts/<target>/ and fails the script (exit 1); reproduce it with
# `cargo +nightly fuzz run TARGET fuzz/artifacts/TARGET/crash-...`.
#
# Needs the nightly toolchain (installed with rustup when missing) and cargo-fuzz (installed
# when missing into $MIRRORGATE_CACHE/cargo-fuzz, or ~/.cargo without MIRRORGATE_CACHE).
# Environment: FUZZ_SECONDS, FUZZ_TOOLCHAIN (default nightly), FUZZ_RSS_MB (default 1024).
set -euo pipefail

cd "$(dirname "$0")/.."
REPO="$PWD"
mode=short
targets=()
for a in "$@"; do
  case "$a" in
    --short) mode=short ;;
    --long) mode=long ;;
    -h|--help) sed -n '2,21p' "$0"; exit 0 ;;
    -*) echo "fuzz.sh: unknown option $a" >&2; exit 2 ;;
    *) targets+=("$a") ;;
  esac
done
ALL_TARGETS=(client_request mirror_rpc fetch_batches responses mirror_state)
[[ ${#targets[@]} -gt 0 ]] || targets=("${ALL_TARGETS[@]}")
if [[ $mode == short ]]; then seconds="${FUZZ_SECONDS:-20}"; else seconds="${FUZZ_SECONDS:-600}"; fi
TOOLCHAIN="${FUZZ_TOOLCHAIN:-nightly}"
RSS_MB="${FUZZ_RSS_MB:-1024}"

log() { printf '[fuzz.sh] %s\n' "$*" >&2; }

# --- Tools: nightly and cargo-fuzz.
if ! rustup run "$TOOLCHAIN" rustc --version >/dev/null 2>&1; then
  log "installing the $TOOLCHAIN toolchain"
  rustup toolchain install "$TOOLCHAIN" --profile minimal
fi
if ! cargo fuzz --version >/dev/null 2>&1; then
  root="${MIRRORGATE_CACHE:+$MIRRORGATE_CACHE/cargo-fuzz}"
  root="${root:-$HOME/.cargo}"
  export PATH="$root/bin:$PATH"
  if ! cargo fuzz --version >/dev/null 2>&1; then
    log "installing cargo-fuzz into $root"
    cargo install cargo-fuzz --locked --root "$root"
  fi
fi

# --- Build (release, debug assertions, ASan, coverage instrumentation).
build_start=$(date +%s)
mkdir -p fuzz/target
# The short form (CI) builds without optimization: a fraction of the compile time of the
# release build, for a smoke run of seconds; the long form fuzzes the optimized build.
profile=release
build_flags=()
if [[ $mode == short ]]; then profile=debug; build_flags=(--dev); fi
if ! (cd fuzz && cargo "+$TOOLCHAIN" fuzz build "${build_flags[@]}") >fuzz/target/build.log 2>&1; then
  cat fuzz/target/build.log >&2
  exit 1
fi
log "build ($profile) took $(( $(date +%s) - build_start )) s"
BIN="$REPO/fuzz/target/x86_64-unknown-linux-gnu/$profile"

# CPU seconds (user + system) of process $1, or empty once it is gone.
cpu_seconds() {
  local stat
  stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 0
  # Fields after the command name (which may hold spaces): utime is the 12th, stime the 13th.
  awk -v tck="$(getconf CLK_TCK)" '{ print int(($12 + $13) / tck) }' <<<"${stat##*) }"
}

failed=0
for t in "${targets[@]}"; do
  seeds="$REPO/fuzz/corpus/$t"
  found="$REPO/fuzz/target/corpus/$t"
  artifacts="$REPO/fuzz/artifacts/$t"
  mkdir -p "$seeds" "$found" "$artifacts"
  out="$REPO/fuzz/target/$t.$mode.log"
  args=("$found" "$seeds" -artifact_prefix="$artifacts/" -rss_limit_mb="$RSS_MB" -print_final_stats=1 -timeout=10)
  start=$(date +%s)
  if [[ $mode == short ]]; then
    "$BIN/$t" "${args[@]}" -max_total_time="$seconds" >"$out" 2>&1 &
    pid=$!
  else
    # Wall-clock bound as a backstop: the CPU budget below ends the run first.
    nice -n 19 "$BIN/$t" "${args[@]}" -max_total_time=$(( seconds * 6 )) >"$out" 2>&1 &
    pid=$!
    cpu=0
    while kill -0 "$pid" 2>/dev/null; do
      sleep 5
      c=$(cpu_seconds "$pid"); [[ -n "$c" ]] && cpu=$c
      if (( cpu >= seconds )); then kill -INT "$pid" 2>/dev/null || true; break; fi
    done
  fi
  rc=0; wait "$pid" || rc=$?
  wall=$(( $(date +%s) - start ))
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$out" | tail -1)
  units=$(find "$found" "$seeds" -type f | wc -l)
  bytes=$(du -sb "$found" "$seeds" | awk '{s += $1} END {print s}')
  crashes=$(find "$artifacts" -type f \( -name 'crash-*' -o -name 'leak-*' -o -name 'timeout-*' -o -name 'oom-*' \) -newer "$out" 2>/dev/null | wc -l)
  if grep -q -E '^==[0-9]+== ERROR: libFuzzer|^SUMMARY: (AddressSanitizer|libFuzzer)|panicked at' "$out"; then
    crashes=$(( crashes > 0 ? crashes : 1 ))
  fi
  if [[ $mode == long ]]; then
    line="$t: cpu ${cpu}s, wall ${wall}s, ${execs:-?} executions, corpus $units inputs ($bytes bytes), crashes $crashes"
  else
    line="$t: ${wall}s, ${execs:-?} executions, corpus $units inputs, crashes $crashes"
  fi
  echo "$line"
  if (( crashes > 0 )); then
    failed=1
    log "$t found a crash; its log: $out"
    grep -E 'panicked at|ERROR:|SUMMARY|Test unit written' "$out" | head -10 >&2 || true
  fi
done
exit "$failed"
