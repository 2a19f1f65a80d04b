#!/usr/bin/env bash
# Build the Starling images with no registry: a Debian base made by debootstrap, and a
# wheelhouse (docker/wheels/) fetched on this host, so `docker build` needs no network.
#
#   docker/build-offline.sh   # bases (once), wheelhouse, starling-node, -orchestrator, -netfault
#
# Idempotent and cached: each base image (starling-base:bookworm with python3, and
# starling-netfault-base:bookworm with nftables and iproute2 for the kernel-fault helper)
# is built only when it is missing (delete it with `docker image rm` to rebuild), wheels
# already in docker/wheels/ are not fetched again (docker/wheelhouse.sh), and docker's layer
# cache skips unchanged steps. Needs root (or sudo) for debootstrap, a running Docker
# engine, and python3 with pip on the host.
#
# Environment: STARLING_BASE_IMAGE (default starling-base:bookworm), STARLING_NETFAULT_BASE
# (default starling-netfault-base:bookworm), DEBIAN_MIRROR (default: debootstrap's),
# STARLING_IMAGE_TAG (default latest), PYTHON (default python3).
set -euo pipefail
cd "$(dirname "$0")/.."

BASE_IMAGE="${STARLING_BASE_IMAGE:-starling-base:bookworm}"
NETFAULT_BASE="${STARLING_NETFAULT_BASE:-starling-netfault-base:bookworm}"
SUITE=bookworm
TAG="${STARLING_IMAGE_TAG:-latest}"
PYTHON="${PYTHON:-python3}"  # needs pip; .ci/run passes the project venv

say() { printf 'build-offline: %s\n' "$*" >&2; }
die() { say "$*"; exit 1; }

docker info >/dev/null 2>&1 || die "no Docker engine answers (start dockerd, or run docker/ci-setup.sh)"

rootfs=""
trap 'if [ -n "$rootfs" ]; then rm -rf "$rootfs" "$rootfs.log"; fi' EXIT
# make_base IMAGE PACKAGES: a debootstrap minbase of $SUITE with PACKAGES, imported as IMAGE.
make_base() {
    local image="$1" packages="$2"
    if docker image inspect "$image" >/dev/null 2>&1; then
        say "base image $image exists; not rebuilding it"
        return
    fi
    command -v debootstrap >/dev/null || die "debootstrap is not installed (apt-get install debootstrap)"
    rootfs="$(mktemp -d /tmp/starling-rootfs.XXXXXX)"
    say "debootstrap $SUITE with $packages into $rootfs (a few minutes)"
    debootstrap --variant=minbase --include="$packages" "$SUITE" "$rootfs" \
        ${DEBIAN_MIRROR:-} >"$rootfs.log" 2>&1 \
        || { tail -20 "$rootfs.log" >&2; die "debootstrap failed"; }
    rm -f "$rootfs.log"
    # What a container never uses: downloaded packages, package lists, docs, locales.
    rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/* \
        "$rootfs"/usr/share/doc/* "$rootfs"/usr/share/man/* "$rootfs"/usr/share/info/* \
        "$rootfs"/usr/share/locale/*
    tar --numeric-owner -C "$rootfs" -c . \
        | docker import --change 'CMD ["python3"]' --change 'ENV LANG=C.UTF-8' - "$image" >/dev/null
    rm -rf "$rootfs"
    rootfs=""
    say "base image $image built"
}

make_base "$BASE_IMAGE" python3,python3-venv
# The kernel-fault helper (docker/netfault.Dockerfile) needs only nft and tc.
make_base "$NETFAULT_BASE" nftables,iproute2

PYTHON="$PYTHON" docker/wheelhouse.sh

log="$(mktemp /tmp/starling-build.XXXXXX)"
for target in node orchestrator; do
    say "image starling-$target:$TAG"
    docker build --file docker/Dockerfile --target "$target" \
        --build-arg BASE_IMAGE="$BASE_IMAGE" --tag "starling-$target:$TAG" . >"$log" 2>&1 \
        || { tail -30 "$log" >&2; rm -f "$log"; die "docker build of $target failed"; }
done
say "image starling-netfault:$TAG"
# No build context: the Dockerfile copies nothing in.
docker build --build-arg BASE_IMAGE="$NETFAULT_BASE" --tag "starling-netfault:$TAG" - \
    <docker/netfault.Dockerfile >"$log" 2>&1 \
    || { tail -30 "$log" >&2; rm -f "$log"; die "docker build of netfault failed"; }
rm -f "$log"
docker image ls --format '{{.Repository}}:{{.Tag}} {{.Size}}' | grep '^starling-' >&2
