# rnats container image.
#
#   docker build -t rnats .
#   docker run -d --name rnats -p 4222:4222 -p 8222:8222 -v rnats-data:/data rnats
#
# The default build compiles the server from this checkout (`cargo build --release
# --locked`) in a Rust builder stage and copies the binary into a Debian slim runtime.
# `--target prebuilt` skips the compiler and copies a binary built on the host instead
# (the glibc of the host must not be newer than bookworm's):
#
#   cargo build --release --locked --bin rnats
#   docker build --target prebuilt --build-arg RNATS_BINARY=target/release/rnats -t rnats .
#
# What the image runs: `rnats --config /etc/rnats/rnats.conf` (deploy/docker/rnats.conf:
# clients on 4222, monitoring on 8222, JetStream stored under the /data volume), as the
# unprivileged user `rnats` (uid and gid 10001). Arguments after the image name replace
# that command line; flags given with `-c /etc/rnats/rnats.conf` override the file.
# 6222 is the cluster port of nats-server's images; rnats has no clustering yet, so
# nothing listens there.

ARG RUST_IMAGE=rust:1-bookworm
ARG RUNTIME_IMAGE=debian:bookworm-slim

# ---- builder: the release binary from the source in the build context ----
FROM ${RUST_IMAGE} AS builder
WORKDIR /src
COPY . .
RUN cargo build --release --locked --bin rnats \
 && install -D -m 0755 target/release/rnats /out/rnats

# ---- base of both runtime flavours ----
FROM ${RUNTIME_IMAGE} AS runtime-base
RUN groupadd --gid 10001 rnats \
 && useradd --uid 10001 --gid rnats --home-dir /data --no-create-home --no-log-init \
        --shell /usr/sbin/nologin rnats \
 && install -d -o rnats -g rnats -m 0750 /data \
 && install -d -m 0755 /etc/rnats
COPY deploy/docker/rnats.conf /etc/rnats/rnats.conf
# 4222 clients, 8222 HTTP monitoring, 6222 cluster (reserved, see above).
EXPOSE 4222 8222 6222
VOLUME ["/data"]
WORKDIR /data
USER rnats:rnats
ENTRYPOINT ["rnats"]
CMD ["--config", "/etc/rnats/rnats.conf"]

# ---- prebuilt: a binary from the build context (CI, or no Rust image at hand) ----
FROM runtime-base AS prebuilt
ARG RNATS_BINARY=target/release/rnats
COPY ${RNATS_BINARY} /usr/local/bin/rnats

# ---- runtime (default): the binary the builder stage compiled ----
FROM runtime-base AS runtime
COPY --from=builder /out/rnats /usr/local/bin/rnats
