#!/usr/bin/env bash
# Installs what kcm's build and tests need beyond a Rust toolchain:
#   etcd     (Debian package etcd-server)       the tests start throwaway etcd members
#   etcdctl  (Debian package etcd-client)       used by a few tests
#   protoc   (Debian package protobuf-compiler) etcd-client compiles etcd's protos at build time
#   make     (Debian package make)              jemalloc, kcm's allocator, is built from C with it
#
# Does nothing when all four are on PATH. On Debian/Ubuntu it runs apt-get (through sudo
# when not root and sudo exists) and says what it runs; elsewhere it prints what to install.
set -euo pipefail

missing=()
for tool in etcd etcdctl protoc make; do
    command -v "$tool" >/dev/null 2>&1 || missing+=("$tool")
done
if [ "${#missing[@]}" -eq 0 ]; then
    echo "install-deps: etcd, etcdctl, protoc and make are installed"
    exit 0
fi
echo "install-deps: missing: ${missing[*]}"

packages=(etcd-server etcd-client protobuf-compiler make)

if ! command -v apt-get >/dev/null 2>&1; then
    cat >&2 <<'MSG'
install-deps: apt-get not found; install these yourself and re-run:
  etcd and etcdctl  3.4 or newer: https://github.com/etcd-io/etcd/releases
                    (macOS: brew install etcd; Fedora: dnf install etcd)
  protoc            the protobuf compiler: https://github.com/protocolbuffers/protobuf/releases
                    (macOS: brew install protobuf; Fedora: dnf install protobuf-compiler)
  make              GNU make, to build jemalloc (macOS: xcode-select --install)
An etcd binary outside PATH can be given to the tests with ETCD_BIN=/path/to/etcd.
MSG
    exit 1
fi

sudo=()
if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1; then
        sudo=(sudo)
    else
        echo "install-deps: not root and sudo not found; as root run:" >&2
        echo "  apt-get update && apt-get install -y ${packages[*]}" >&2
        exit 1
    fi
fi

run() {
    echo "+ $*"
    "$@"
}
export DEBIAN_FRONTEND=noninteractive
run "${sudo[@]}" apt-get update
run "${sudo[@]}" apt-get install -y "${packages[@]}"

for tool in etcd etcdctl protoc make; do
    if ! command -v "$tool" >/dev/null 2>&1; then
        echo "install-deps: $tool still not on PATH after installing ${packages[*]}" >&2
        exit 1
    fi
done
echo "install-deps: done"
