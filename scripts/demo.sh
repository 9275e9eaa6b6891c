#!/usr/bin/env bash
# The README's main command: installs etcd and protoc when missing, builds kcm, and runs
# `kcm up --demo`: a private etcd, the controller manager and two simulated kubelets, and a
# narrated tour of the 2014 loop and of a Deployment's rolling update (under a minute for the
# tour itself; the first build takes a few minutes). Extra arguments go to `kcm up`; without
# --demo it keeps running.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
if ! command -v cargo >/dev/null 2>&1; then
    echo "demo: cargo not found; install Rust first: https://rustup.rs" >&2
    exit 1
fi
echo "demo: building kcm (release; cargo shows progress)"
cargo build --release
if [ "$#" -eq 0 ]; then
    set -- --demo
fi
exec target/release/kcm up "$@"
