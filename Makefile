# Convenience targets. `make test` is exactly `cargo test --all-targets`, so running cargo
# directly (without make) is the same thing.

CARGO ?= cargo

.PHONY: all test lint deps demo

all: test

## test: the README's test command (needs etcd and protoc; see `make deps`)
test:
	$(CARGO) test --all-targets

## lint: formatting check and clippy with warnings as errors, as CI runs them
lint:
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --all-targets -- -D warnings

## deps: install etcd, etcdctl and protoc if missing (apt-get on Debian/Ubuntu)
deps:
	scripts/install-deps.sh

## demo: install deps, build the release binary and show its commands.
## `kcm up --demo` replaces the --help call once the CLI issue lands.
demo: deps
	$(CARGO) build --release
	target/release/kcm --help
