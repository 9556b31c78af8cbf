# ofnode — the two set-up commands are `make demo` and `make test` (run as root on Debian).
CARGO ?= cargo
export CARGO_TERM_COLOR ?= never

.PHONY: all build deps test lint demo bench

all: build

deps:
	@scripts/install-deps.sh

build: deps
	$(CARGO) build --release --bins

lint: deps
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings

# Every test: formatting, lints, unit + property tests, integration tests against private Open
# vSwitch instances in network namespaces.
test: lint
	$(CARGO) test --workspace --no-fail-fast -- --test-threads=2

demo: deps
	$(CARGO) build --release --bins --examples
	$(CARGO) run --release --example demo

bench: deps
	$(CARGO) build --release --bins
	@scripts/bench.sh
