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
exec cargo test --all-targets "$@"
