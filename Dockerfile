# syntax=docker/dockerfile:1
#
# kcm in a container: `docker build -t kcm .` then
#   docker run --rm kcm --etcd-servers http://etcd:2379 controller-manager --address 0.0.0.0
# docker-compose.yml runs it next to an etcd.

# --- build -----------------------------------------------------------------------------
FROM rust:1-bookworm AS builder

# etcd-client compiles etcd's .proto files at build time and needs protoc (the image has
# the C compiler and make that jemalloc, kcm's allocator, is built with).
RUN apt-get update \
    && apt-get install -y --no-install-recommends protobuf-compiler \
    && rm -rf /var/lib/apt/lists/*

WORKDIR /src

# Dependencies first, in their own layer: build them against a stub crate so that editing
# src/ does not re-download and re-compile the registry. The stub's own artifacts are
# removed afterwards so the real build cannot mistake them for up to date (COPY keeps the
# build context's mtimes, which can be older than the stub's).
COPY Cargo.toml Cargo.lock ./
RUN mkdir src \
    && echo 'fn main() {}' > src/main.rs \
    && : > src/lib.rs \
    && cargo build --release --locked --bin kcm \
    && rm -rf src target/release/kcm target/release/deps/kcm-* target/release/deps/libkcm-* \
        target/release/.fingerprint/kcm-*

COPY src ./src
RUN cargo build --release --locked --bin kcm \
    && strip target/release/kcm

# --- run -------------------------------------------------------------------------------
FROM debian:bookworm-slim

# ca-certificates for https:// etcd endpoints.
RUN apt-get update \
    && apt-get install -y --no-install-recommends ca-certificates \
    && rm -rf /var/lib/apt/lists/*

RUN groupadd --system --gid 10001 kcm \
    && useradd --system --uid 10001 --gid kcm --no-create-home --home-dir /nonexistent \
        --shell /usr/sbin/nologin kcm

COPY --from=builder /src/target/release/kcm /usr/local/bin/kcm

# Numeric so that runtimes checking runAsNonRoot can verify it.
USER 10001:10001

# The controller-manager's status endpoint (/healthz, /metrics), and `kcm apiserver`'s
# Kubernetes API. Each listens on 127.0.0.1 unless given --address 0.0.0.0.
EXPOSE 10252 8080

# kcm exits on SIGTERM (docker stop) after stopping its loops.
STOPSIGNAL SIGTERM
ENTRYPOINT ["kcm"]
CMD ["controller-manager"]
