# ofnode — the two set-up commands are `make demo` and `make test` (run as root on Debian).
CARGO ?= cargo
export CARGO_TERM_COLOR ?= never

.PHONY: all build deps test lint demo bench install release-bins

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

# `make install [DESTDIR=…] [PREFIX=/usr/local]`: the binaries, the systemd unit and the
# example config, from dist/. The unit's ExecStart names the installed binary and config. An
# existing config is never overwritten (the example also goes to the doc directory). The CNI
# plugin is linked where container runtimes look for it. BUILD_DIR=target/debug installs
# binaries built otherwise (the packaging test does).
PREFIX ?= /usr/local
BINDIR ?= $(PREFIX)/bin
SYSCONFDIR ?= /etc
UNITDIR ?= $(PREFIX)/lib/systemd/system
DOCDIR ?= $(PREFIX)/share/doc/ofnode
CNIBINDIR ?= /opt/cni/bin
BUILD_DIR ?= target/release

ifeq ($(BUILD_DIR),target/release)
install: release-bins
endif

release-bins:
	$(CARGO) build --release --bins

install:
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(UNITDIR) $(DESTDIR)$(SYSCONFDIR)/ofnode \
		$(DESTDIR)$(DOCDIR) $(DESTDIR)$(CNIBINDIR)
	install -m 0755 $(BUILD_DIR)/ofnode $(BUILD_DIR)/ofnode-cni $(DESTDIR)$(BINDIR)/
	sed -e 's|/usr/local/bin/ofnode|$(BINDIR)/ofnode|' \
		-e 's|/etc/ofnode/ofnode.toml|$(SYSCONFDIR)/ofnode/ofnode.toml|' \
		dist/ofnode.service > $(DESTDIR)$(UNITDIR)/ofnode.service
	chmod 0644 $(DESTDIR)$(UNITDIR)/ofnode.service
	install -m 0644 dist/ofnode.toml $(DESTDIR)$(DOCDIR)/ofnode.toml
	test -e $(DESTDIR)$(SYSCONFDIR)/ofnode/ofnode.toml || \
		install -m 0644 dist/ofnode.toml $(DESTDIR)$(SYSCONFDIR)/ofnode/ofnode.toml
	ln -sfn $(BINDIR)/ofnode-cni $(DESTDIR)$(CNIBINDIR)/ofnode
# >>> Shell completions ($(PREFIX)/share/bash-completion/completions, zsh, fish) and man pages
# >>> ($(PREFIX)/share/man/man1) are installed here once the CLI generates them
# >>> (`ofnode completions bash|zsh|fish`, clap_mangen: issue 15's CLI part).
