# ofnode — the two set-up commands are `make demo` and `make test` (run as root on Debian).
CARGO ?= cargo
export CARGO_TERM_COLOR ?= never

.PHONY: all build deps test lint demo bench

all: build

deps:
	@scripts/install-deps.sh

build: deps
	$(CARGO) build --release --bins

# The fuzz crate is outside the workspace (cargo-fuzz wants its own), so it is checked here:
# formatting, and a `cargo check` of every target on the stable toolchain (libFuzzer's
# nightly-only flags are needed only to run, not to type-check). It shares `target/` so the
# dependencies clippy already checked are not checked again.
lint: deps
	$(CARGO) fmt --all -- --check
	$(CARGO) fmt --manifest-path fuzz/Cargo.toml -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings
	$(CARGO) check --manifest-path fuzz/Cargo.toml --bins --target-dir target

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
