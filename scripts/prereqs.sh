# Prerequisite checks shared by scripts/demo.sh, test.sh, faults.sh and fuzz.sh (sourced, not
# run). Each check notes what is missing or too old, naming the version needed and what uses
# it; `prereq_report WHO` then prints every problem at once and exits 1, before a long build.
# The list is README.md's "Prerequisites".
#
#   source scripts/prereqs.sh
#   prereq_rust; prereq_java; prereq_cmd mvn "Maven" "fetches the Kafka jars" "Debian: maven"
#   prereq_report demo
#
# Environment: PREREQ_SKIP=1 skips every check (a machine set up differently, at your risk).

PREREQ_PROBLEMS=()

# The checks below always return 0 (the scripts run under `set -e`); problems are collected.

# prereq_cmd CMD WHAT WHY HINT: CMD must be on PATH. WHAT names it for a reader ("Maven"),
# WHY says what needs it, HINT where it comes from.
prereq_cmd() {
  local name="$2 ($1)"
  [[ "$2" == "$1" ]] && name="$1"
  command -v "$1" >/dev/null 2>&1 || PREREQ_PROBLEMS+=("$name: not found on PATH; $3. $4")
  return 0
}

prereq_has() { command -v "$1" >/dev/null 2>&1; }

# prereq_at_least FOUND NEEDED: true when dotted version FOUND >= NEEDED (numeric per part).
prereq_at_least() {
  local IFS=.
  local -a f=($1) n=($2)
  local i
  for i in "${!n[@]}"; do
    local a="${f[i]:-0}" b="${n[i]}"
    [[ "$a" =~ ^[0-9]+$ ]] || return 1
    ((10#$a > 10#$b)) && return 0
    ((10#$a < 10#$b)) && return 1
  done
  return 0
}

# prereq_version CMD WHAT NEEDED FOUND WHY HINT: FOUND (a dotted version read from CMD, empty
# when unreadable) must be at least NEEDED.
prereq_version() {
  local cmd="$1" what="$2" needed="$3" found="$4" why="$5" hint="$6"
  if [[ -z "$found" ]]; then
    PREREQ_PROBLEMS+=("$what $needed or newer ($cmd): cannot read its version; $why. $hint")
  elif ! prereq_at_least "$found" "$needed"; then
    PREREQ_PROBLEMS+=("$what $needed or newer ($cmd): found $found at $(command -v "$cmd"); $why. $hint")
  fi
  return 0
}

# Rust 1.85+ (Cargo.toml's rust-version) and a C compiler (ring, zstd and lz4 build C code).
prereq_rust() {
  prereq_cmd cargo "Rust 1.85 or newer" "mirrorgate is built with cargo" "Install it with rustup: https://rustup.rs"
  if prereq_has cargo; then
    prereq_version cargo "Rust" 1.85 "$(cargo --version 2>/dev/null | sed -n 's/^cargo \([0-9][0-9.]*\).*/\1/p')" \
      "Cargo.toml's rust-version" "Update with \`rustup update stable\`"
  fi
  prereq_cmd cc "A C compiler" "ring, zstd and lz4 compile C code while mirrorgate builds" "Debian: build-essential"
  return 0
}

# Java 17+ (Kafka 4 brokers and tools run on Java 17 or newer).
prereq_java() {
  prereq_cmd java "Java 17 or newer" "the Kafka brokers and tools run on it" "Debian: openjdk-17-jdk-headless"
  prereq_has java || return 0
  # `java -version` prints e.g. openjdk version "17.0.15" 2025-04-15, or "1.8.0_392" before 9.
  local v
  v="$(java -version 2>&1 | sed -n 's/^[^"]*version "\([^"]*\)".*/\1/p' | head -n 1)"
  v="${v#1.}"
  v="$(sed -n 's/^\([0-9][0-9]*\).*/\1/p' <<<"$v")"
  prereq_version java "Java" 17 "$v" "Kafka 4's brokers and tools need it" "Debian: openjdk-17-jdk-headless"
}

# Go 1.26+ (tests/go/go.mod: the franz-go and sarama clients of tests/produce_refusal.rs).
prereq_go() {
  prereq_cmd go "Go 1.26 or newer" "make test builds the franz-go and sarama clients in tests/go" \
    "Download from https://go.dev/dl/ (modules come from the Go module proxy)"
  prereq_has go || return 0
  local v
  # `go version` prints e.g. go version go1.26.8 linux/amd64 (outside tests/go, so the Go on PATH).
  v="$(cd / && go version 2>/dev/null | sed -n 's/^go version go\([0-9][0-9.]*\).*/\1/p')"
  prereq_version go "Go" 1.26 "$v" "tests/go/go.mod asks for go 1.26.0" "Download from https://go.dev/dl/"
}

# Python 3.10+ with its venv module (scripts/pyenv.sh makes .venv with confluent-kafka and
# pytest 9, which needs 3.10). The venv module is only needed while .venv does not exist.
prereq_python() {
  prereq_cmd python3 "Python 3.10 or newer" "the demo's and the tests' Kafka client is confluent-kafka in .venv" \
    "Debian: python3 python3-venv"
  prereq_has python3 || return 0
  local v
  v="$(python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null)"
  prereq_version python3 "Python" 3.10 "$v" "scripts/pyenv.sh installs pytest 9 and confluent-kafka into .venv" \
    "Debian 12 has 3.11: python3 python3-venv"
  local venv="${MIRRORGATE_VENV:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/.venv}"
  if [[ ! -x "$venv/bin/python" ]] && ! python3 -c 'import venv, ensurepip' >/dev/null 2>&1; then
    PREREQ_PROBLEMS+=("Python's venv module (python3 -m venv): missing; scripts/pyenv.sh creates $venv with it. Debian: python3-venv")
  fi
  return 0
}

# What scripts/kafka.sh needs to fetch Kafka and start clusters: Java, Maven, unzip, flock.
prereq_kafka() {
  prereq_java
  prereq_cmd mvn "Maven" "scripts/kafka.sh fetches the Kafka jars from Maven Central with it" "Debian: maven"
  prereq_cmd unzip "unzip" "scripts/kafka.sh indexes the Kafka jars' classes with it" "Debian: unzip"
  prereq_cmd flock "flock" "scripts/kafka.sh and scripts/pyenv.sh take file locks with it" "Debian: util-linux"
}

# prereq_report WHO: print every problem noted so far and exit 1, or return.
prereq_report() {
  [[ "${PREREQ_SKIP:-0}" == 1 ]] && return 0
  ((${#PREREQ_PROBLEMS[@]} == 0)) && return 0
  printf '%s: missing prerequisites (README.md, "Prerequisites"):\n' "$1" >&2
  printf '  - %s\n' "${PREREQ_PROBLEMS[@]}" >&2
  exit 1
}
