# mirrorgate — the two commands a new user needs are `make demo` and `make test`.
.PHONY: demo test lint bench kafka clean

# Start a destination Kafka cluster on loopback with mirrorgate in front of it (Ctrl-C stops both).
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

kafka:
	scripts/kafka.sh fetch 4.1.1

clean:
	rm -rf .kafka target/test-mirrorgate
