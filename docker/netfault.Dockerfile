# starling-netfault: the helper the docker backend runs to fault a node's network from
# inside it (orchestrator/execution/backends/netfault.py). Each helper container joins one node
# container's network namespace (`--network container:<node>`) with NET_ADMIN and runs one
# `nft` or `tc` command there, then exits — the way Pumba applies tc/iptables from its own
# image — so the node image carries no network tools and no node gets NET_ADMIN.
#
#   docker build -f docker/netfault.Dockerfile -t starling-netfault .
#
# BASE_IMAGE defaults to Debian's slim image, which gets nftables and iproute2 from apt.
# With no registry, docker/build-offline.sh passes a debootstrap rootfs that already holds
# both (starling-netfault-base:bookworm), and the apt step is skipped: no network at all.

ARG BASE_IMAGE=debian:bookworm-slim
FROM ${BASE_IMAGE}
RUN if command -v nft >/dev/null && command -v tc >/dev/null; then exit 0; fi \
 && apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends nftables iproute2 \
 && rm -rf /var/lib/apt/lists/*
LABEL org.opencontainers.image.title="starling-netfault" \
      org.opencontainers.image.description="nft and tc for Starling's kernel link faults"
# Root inside the container (nft and tc need it, with NET_ADMIN from `docker run`); the
# command is the nft or tc invocation itself.
ENTRYPOINT []
CMD ["nft", "--version"]
