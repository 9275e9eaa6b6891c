#!/usr/bin/env bash
# The README's test command: installs etcd, etcdctl and protoc when missing, then runs every
# test (unit tests, and integration tests that start their own etcd on free loopback ports).
# Extra arguments go to cargo test, e.g. `scripts/test.sh watcher`.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
if ! command -v cargo >/dev/null 2>&1; then
    echo "test: cargo not found; install Rust first: https://rustup.rs" >&2
    exit 1
fi
# One test thread more than the machine has cores: many integration tests spend their
# time waiting for a controller's period or a 2014 tick, so with one thread per core the
# cores idle: on a 2-core machine the integration suite took 546 s with 2 threads and
# 402 s with 3 (179 % CPU). An explicit RUST_TEST_THREADS (or --test-threads) wins.
export RUST_TEST_THREADS="${RUST_TEST_THREADS:-$(($(nproc) + 1))}"
# The `tests` profile (Cargo.toml): the dependencies at opt-level 1, which halves the
# integration suite's time, and kcm's own code at 0, which builds four times faster.
exec cargo test --profile tests --all-targets "$@"
