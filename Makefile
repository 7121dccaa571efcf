# mirrorgate — the two commands a new user needs are `make demo` and `make test`.
.PHONY: demo test lint bench kafka clean

# The main job end to end: a source and a destination cluster on loopback, mirrorgate in front of
# the destination, a mirror, live data, read-only enforcement and a failover (Ctrl-C stops it all).
demo:
	scripts/demo.sh

# The whole test suite: installs Kafka jars and the Python test client, then unit and
# integration tests against real Kafka brokers.
test:
	scripts/test.sh

lint:
	cargo fmt --check
	cargo clippy --all-targets -- -D warnings

bench:
	cargo bench --bench passthrough

# End-to-end mirroring throughput: mirrorgate vs. direct access vs. MirrorMaker 2 on local
# source and destination clusters (~5 min on 2 vCPUs; sizes via BENCH_* variables, see the script).
bench-mirror:
	benches/harness/mirror.sh

kafka:
	scripts/kafka.sh fetch 4.1.1

clean:
	rm -rf .kafka target/test-mirrorgate
