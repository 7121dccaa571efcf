#!/usr/bin/env bash
# Fuzzes mirrorgate's decoders with cargo-fuzz (libFuzzer + AddressSanitizer), one target at a
# time (docs/reliability.md lists the targets and the latest long run).
#
#   scripts/fuzz.sh [--short | --long] [TARGET...]
#
#   --short  (default; the CI form) FUZZ_SECONDS (default 20) wall-clock seconds per target.
#   --long   FUZZ_SECONDS (default 600) CPU seconds per target, measured on the fuzzer process
#            (a loaded machine gives it less than a wall-clock second per second); run under
#            `nice -n 19`. Writes its figures (commit, toolchain, per target: executions, CPU
#            and wall seconds, corpus size, crashes, exit status) to
#            docs/results/fuzz-<UTC time>.md, to be committed (FUZZ_RESULTS names another file).
#
# Every target must run: a missing binary, an exit status other than libFuzzer's normal ends
# (0 at -max_total_time; 72 after the SIGINT that ends a long run's CPU budget), a run without
# a single execution, or a crash fails the script (exit 1), and its summary line says why.
#
# Seeds are read from fuzz/corpus/<target>/ (captured from real traffic by
# tests/fuzz_corpus.rs) and never written to; what the fuzzer finds goes to
# fuzz/target/corpus/<target>/ (kept between runs). A crash leaves its input in
# fuzz/artifacts/<target>/ and fails the script (exit 1); reproduce it with
# `cargo +nightly fuzz run TARGET fuzz/artifacts/TARGET/crash-...`.
#
# Needs the nightly toolchain (installed with rustup when missing) and cargo-fuzz (installed
# when missing into $MIRRORGATE_CACHE/cargo-fuzz, or ~/.cargo without MIRRORGATE_CACHE).
# Environment: FUZZ_SECONDS, FUZZ_TOOLCHAIN (default nightly), FUZZ_RSS_MB (default 1024),
#   FUZZ_BIN_DIR (run the target binaries found there, built before; no build).
set -euo pipefail

cd "$(dirname "$0")/.."
REPO="$PWD"
mode=short
targets=()
for a in "$@"; do
  case "$a" in
    --short) mode=short ;;
    --long) mode=long ;;
    -h|--help) sed -n '2,30p' "$0"; exit 0 ;;
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

# --- Prerequisites (README.md, "Prerequisites"), then the nightly toolchain and cargo-fuzz
# (none of them needed with FUZZ_BIN_DIR).
if [[ -z "${FUZZ_BIN_DIR:-}" ]]; then
  source "$REPO/scripts/prereqs.sh"
  prereq_rust
  prereq_cmd rustup "rustup" "fuzzing builds with the $TOOLCHAIN toolchain, which this script installs with rustup" \
    "Install Rust with rustup: https://rustup.rs"
  prereq_cmd c++ "A C++ compiler" "cargo-fuzz builds libFuzzer (C++)" "Debian: build-essential"
  prereq_report fuzz
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
fi

# --- Build (release, debug assertions, ASan, coverage instrumentation).
# The short form (CI) builds without optimization: a fraction of the compile time of the
# release build, for a smoke run of seconds; the long form fuzzes the optimized build.
profile=release
build_flags=()
if [[ $mode == short ]]; then profile=debug; build_flags=(--dev); fi
mkdir -p fuzz/target
if [[ -n "${FUZZ_BIN_DIR:-}" ]]; then
  BIN="$FUZZ_BIN_DIR"
  log "running the binaries in $BIN (FUZZ_BIN_DIR; no build)"
else
  build_start=$(date +%s)
  if ! (cd fuzz && cargo "+$TOOLCHAIN" fuzz build "${build_flags[@]}") >fuzz/target/build.log 2>&1; then
    cat fuzz/target/build.log >&2
    exit 1
  fi
  log "build ($profile) took $(( $(date +%s) - build_start )) s"
  # cargo-fuzz builds for the host triple of the toolchain it uses.
  triple=$(rustup run "$TOOLCHAIN" rustc -vV | sed -n 's/^host: //p')
  [[ -n "$triple" ]] || { log "cannot read the host triple of $TOOLCHAIN (rustc -vV)"; exit 1; }
  BIN="$REPO/fuzz/target/$triple/$profile"
fi

# CPU seconds (user + system) of process $1, or empty once it is gone.
cpu_seconds() {
  local stat
  stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 0
  # Fields after the command name (which may hold spaces): utime is the 12th, stime the 13th.
  awk -v tck="$(getconf CLK_TCK)" '{ print int(($12 + $13) / tck) }' <<<"${stat##*) }"
}

failed=0
lines=()
for t in "${targets[@]}"; do
  seeds="$REPO/fuzz/corpus/$t"
  found="$REPO/fuzz/target/corpus/$t"
  artifacts="$REPO/fuzz/artifacts/$t"
  mkdir -p "$seeds" "$found" "$artifacts"
  out="$REPO/fuzz/target/$t.$mode.log"
  : >"$out"
  args=("$found" "$seeds" -artifact_prefix="$artifacts/" -rss_limit_mb="$RSS_MB" -print_final_stats=1 -timeout=10)
  start=$(date +%s)
  cpu=0 interrupted=0 rc=0
  if [[ ! -x "$BIN/$t" ]]; then
    rc=127
    echo "fuzz.sh: no executable $BIN/$t" >"$out"
  elif [[ $mode == short ]]; then
    "$BIN/$t" "${args[@]}" -max_total_time="$seconds" >"$out" 2>&1 || rc=$?
  else
    # Wall-clock bound as a backstop: the CPU budget below ends the run first.
    nice -n 19 "$BIN/$t" "${args[@]}" -max_total_time=$(( seconds * 6 )) >"$out" 2>&1 &
    pid=$!
    while kill -0 "$pid" 2>/dev/null; do
      sleep 5
      c=$(cpu_seconds "$pid"); [[ -n "$c" ]] && cpu=$c
      if (( cpu >= seconds )); then kill -INT "$pid" 2>/dev/null || true; interrupted=1; break; fi
    done
    wait "$pid" || rc=$?
  fi
  wall=$(( $(date +%s) - start ))
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$out" | tail -1)
  units=$(find "$found" "$seeds" -type f | wc -l)
  bytes=$(du -sb "$found" "$seeds" | awk '{s += $1} END {print s}')
  crashes=$(find "$artifacts" -type f \( -name 'crash-*' -o -name 'leak-*' -o -name 'timeout-*' -o -name 'oom-*' \) -newer "$out" 2>/dev/null | wc -l)
  if grep -q -E '^==[0-9]+== ERROR: libFuzzer|^SUMMARY: (AddressSanitizer|libFuzzer)|panicked at' "$out"; then
    crashes=$(( crashes > 0 ? crashes : 1 ))
  fi
  # libFuzzer ends with 0 at -max_total_time and with 72 (-interrupted_exitcode) after SIGINT.
  why=""
  if (( crashes > 0 )); then why="crash"
  elif [[ $rc -eq 127 ]]; then why="did not start (no binary)"
  elif ! [[ $rc -eq 0 || ( $interrupted -eq 1 && $rc -eq 72 ) ]]; then why="exit status $rc"
  elif [[ -z "$execs" || "$execs" == 0 ]]; then why="no execution recorded"
  fi
  if [[ $mode == long ]]; then
    line="$t: cpu ${cpu}s, wall ${wall}s, ${execs:-0} executions, corpus $units inputs ($bytes bytes), crashes $crashes, exit $rc"
  else
    line="$t: ${wall}s, ${execs:-0} executions, corpus $units inputs, crashes $crashes, exit $rc"
  fi
  [[ -z "$why" ]] || line="$line: FAILED ($why)"
  echo "$line"
  lines+=("| $t | ${cpu} s | ${wall} s | ${execs:-0} | $units inputs ($bytes bytes) | $crashes | $rc${why:+ ($why)} |")
  if [[ -n "$why" ]]; then
    failed=1
    log "$t failed ($why); its log: $out"
    grep -E 'panicked at|ERROR:|SUMMARY|Test unit written' "$out" | head -10 >&2 || true
    tail -5 "$out" >&2 || true
  fi
done

if [[ $mode == long ]]; then
  results="${FUZZ_RESULTS:-$REPO/docs/results/fuzz-$(date -u +%Y%m%d-%H%M%S).md}"
  mkdir -p "$(dirname "$results")"
  {
    echo "# Fuzzing run $(date -u '+%Y-%m-%d %H:%M UTC')"
    echo
    echo "- commit: $(git -C "$REPO" describe --always --dirty 2>/dev/null || echo unknown)"
    echo "- toolchain: $(rustup run "$TOOLCHAIN" rustc --version 2>/dev/null || echo unknown), $(cargo fuzz --version 2>/dev/null || echo 'cargo-fuzz unknown')"
    echo "- budget: $seconds CPU seconds per target (\`scripts/fuzz.sh --long\`), nice -n 19; machine: $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg)"
    echo "- result: $([[ $failed -eq 0 ]] && echo 'passed: every target ran, 0 crashes' || echo FAILED)"
    echo
    echo "| target | CPU | wall | executions | corpus | crashes | exit |"
    echo "|---|---|---|---|---|---|---|"
    printf '%s\n' "${lines[@]}"
  } >"$results"
  log "figures written to $results (commit it)"
fi
exit "$failed"
