#!/usr/bin/env bash
# `make testbed`: the compose testbed's run (docker-compose.yml), with the base image checked
# first, so that a machine without registry access is told the offline route at once instead
# of failing deep in a build on a DNS error for the registry.
#
#   make testbed                                   # builds what changed, runs the quickstart
#   STARLING_BASE_IMAGE=starling-base:bookworm make testbed
#
# The run is `docker compose run --rm --build orchestrator`: it starts the nodes, runs the
# experiment, and exits with the run's own code; a node container that dies does not end it
# (under `up --abort-on-container-exit` compose would stop every container at once).
#
# The base is STARLING_BASE_IMAGE, else the offline base starling-base:bookworm when this
# engine has it (docker/build-offline.sh made it), else the registry's python:3.11-slim-bookworm,
# which is pulled here once; when that pull fails the script says how to build offline and
# stops. Extra arguments go to `docker compose` before `run` (e.g. -f compose.tls.yml).
set -euo pipefail
cd "$(dirname "$0")/.."

REGISTRY_BASE=python:3.11-slim-bookworm
OFFLINE_BASE=starling-base:bookworm

say() { printf 'testbed: %s\n' "$*" >&2; }

if ! docker info >/dev/null 2>&1; then
    say "no Docker engine answers: start dockerd (or run docker/ci-setup.sh as root)"
    exit 1
fi
if ! docker compose version >/dev/null 2>&1; then
    say "no 'docker compose' plugin: install Docker Compose v2 (docker/ci-setup.sh does)"
    exit 1
fi

base="${STARLING_BASE_IMAGE:-}"
if [ -z "$base" ] && docker image inspect "$OFFLINE_BASE" >/dev/null 2>&1; then
    base="$OFFLINE_BASE"
    say "using the offline base $base found on this engine"
fi
base="${base:-$REGISTRY_BASE}"

if ! docker image inspect "$base" >/dev/null 2>&1; then
    say "pulling the base image $base"
    if ! pull_log="$(docker pull "$base" 2>&1)"; then
        say "cannot pull $base: $(printf '%s\n' "$pull_log" | tail -1)"
        say "without registry access, build the images offline and run with that base:"
        say "    sudo docker/build-offline.sh     # debootstrap base + host wheelhouse, once"
        say "    STARLING_BASE_IMAGE=$OFFLINE_BASE make testbed"
        exit 1
    fi
fi

export STARLING_BASE_IMAGE="$base"
# Offline bases have no pip index inside the build: the wheelhouse must be there first.
if [ "$base" = "$OFFLINE_BASE" ] && ! ls docker/wheels/*.whl >/dev/null 2>&1; then
    say "fetching the wheelhouse docker/wheels/ on this host (the build has no network)"
    docker/wheelhouse.sh
fi
exec docker compose "$@" run --rm --build orchestrator
