# Convenience aliases for the scripts the README names: `make demo` is scripts/demo.sh,
# `make test` is scripts/test.sh (which runs `cargo test --profile tests --all-targets`).

CARGO ?= cargo

.PHONY: all test lint deps demo

all: test

## test: the README's test command, scripts/test.sh (installs etcd and protoc if missing)
test:
	scripts/test.sh

## lint: formatting check and clippy with warnings as errors, as CI runs them
lint:
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --all-targets -- -D warnings

## deps: install etcd, etcdctl and protoc if missing (apt-get on Debian/Ubuntu)
deps:
	scripts/install-deps.sh

## demo: the README's main job: install deps if missing, build, and run the guided
## tour (a private etcd, the controllers and two simulated kubelets, about a minute).
demo:
	scripts/demo.sh
