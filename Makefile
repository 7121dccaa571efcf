# mirrorgate — the two commands a new user needs are `make demo` and `make test`.
.PHONY: demo test lint bench bench-proxy bench-relay bench-fetch-rtt bench-scale bench-fill-head kafka clean faults faults-long fuzz fuzz-short

# The main job end to end: a source and a destination cluster on loopback, mirrorgate in front of
# the destination, a mirror, live data, read-only enforcement and a failover (Ctrl-C stops it all).
# Builds target/demo/mirrorgate with Cargo.toml's `demo` profile (no LTO: a short first build);
# releases, benchmarks and the fault runner use the fat-LTO release profile.
demo:
	scripts/demo.sh

# The whole test suite: installs Kafka jars and the Python test client, then unit and
# integration tests against real Kafka brokers.
test:
	scripts/test.sh

# The fault runner (docs/reliability.md): a live workload mirrored between two 3-node clusters
# while a seeded nemesis kills, pauses, partitions and moves leaders (each fault confirmed),
# tailing consumers and checks assert that the destination is a prefix of the source at each
# isolation level, through mirrorgate and directly. Short form (every fault confirmed at least
# once, ~4 min; the CI form) and long form (FAULTS_DURATION seconds, default 30 min).
# FAULTS_SEED reproduces a run; FAULTS_INSTANCES=N runs N mirrorgate instances sharing the work
# (default 1); FAULTS_RECORD=label writes the run's record to docs/results/.
faults:
	FAULTS_DURATION=$${FAULTS_DURATION:-120} scripts/faults.sh --short

faults-long:
	FAULTS_DURATION=$${FAULTS_DURATION:-1800} scripts/faults.sh

# Fuzzing (docs/reliability.md): every decoder reachable from the network or the state topic,
# with cargo-fuzz on the nightly toolchain (both installed when missing). Long form:
# FUZZ_SECONDS CPU seconds per target (default 600), one target at a time under nice -n 19;
# short form (the CI form): FUZZ_SECONDS wall-clock seconds per target (default 20).
fuzz:
	scripts/fuzz.sh --long

fuzz-short:
	scripts/fuzz.sh --short

lint:
	cargo fmt --check
	cargo clippy --all-targets -- -D warnings

bench:
	cargo bench --bench passthrough

# End-to-end mirroring throughput: mirrorgate vs. direct access vs. MirrorMaker 2 on local
# source and destination clusters (~5 min on 2 vCPUs; sizes via BENCH_* variables, see the script).
bench-mirror:
	benches/harness/mirror.sh

# The proxy's cost to clients: producer-perf latency (p50/p99/p99.9), a paired µs latency run
# and its A/A control, and produce/consume throughput, directly and through mirrorgate (~13 min;
# not in CI).
bench-proxy:
	benches/harness/proxy.sh

# What a bare TCP relay (socat) costs beside mirrorgate: latency with all sides on one clock
# and an A/A control, then consume (~9 min; needs socat; not in CI).
bench-relay:
	cargo build --release --bin mirrorgate
	benches/harness/relay.sh target/release/mirrorgate

# The round trip of one 3 MiB Fetch: direct, through mirrorgate forwarding it while it arrives,
# and through mirrorgate reading it whole first (~2 min; not in CI).
bench-fetch-rtt:
	cargo build --release --bin mirrorgate
	cargo bench --bench fetch_rtt

# 1,000 partitions (10 topics x 100) with light traffic: time to lag 0, then a steady produce
# load for BENCH_SOAK_SECONDS (default 1800, the 30-minute soak) sampling mirrorgate's RSS, CPU
# and connections every 10 s; reports whether RSS stays within +-10 % (not in CI).
bench-scale:
	benches/harness/scale.sh

# What filling a removed head of 100 M offsets costs on a 1-node Kafka 4.1.1, per head-fill
# encoding, and removing it with DeleteRecords (docs/performance.md; ~3 GB written; not in CI).
# MIRRORGATE_BENCH_HEAD=offsets and MIRRORGATE_BENCH_ENCODINGS=a,b choose a smaller run.
bench-fill-head:
	cargo bench --bench fill_head

kafka:
	scripts/kafka.sh fetch 4.1.1

clean:
	rm -rf .kafka target/test-mirrorgate
