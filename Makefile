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

## demo: the README's main job: install deps if missing, build, and run the guided
## tour (a private etcd, the controllers and two simulated kubelets, about a minute).
demo: deps
	$(CARGO) build --release
	target/release/kcm up --demo
