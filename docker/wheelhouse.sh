#!/usr/bin/env bash
# Fetch the wheelhouse docker/wheels/ on this host: every wheel the images install, for
# bookworm's CPython on this machine's architecture, so `docker build` installs with
# --no-index and needs no network inside the build (docker/install.sh). Wheels already
# there are not fetched again. Used by docker/build-offline.sh, and by the compose test
# when it builds against the offline base in a checkout that has no wheelhouse yet.
#
# Environment: PYTHON (default python3; needs pip and access to the package index).
set -euo pipefail
cd "$(dirname "$0")/.."

PY_VERSION=3.11  # bookworm's python3; the wheels must match it
PYTHON="${PYTHON:-python3}"

case "$(uname -m)" in
    x86_64) arch=x86_64 ;;
    aarch64 | arm64) arch=aarch64 ;;
    *) printf 'wheelhouse: no wheels for machine %s\n' "$(uname -m)" >&2; exit 1 ;;
esac
printf 'wheelhouse: docker/wheels/ for CPython %s on %s\n' "$PY_VERSION" "$arch" >&2
"$PYTHON" -m pip download --quiet --disable-pip-version-check --dest docker/wheels \
    --only-binary=:all: --python-version "$PY_VERSION" --implementation cp \
    --abi "cp${PY_VERSION/./}" --abi abi3 --abi none \
    --platform "manylinux_2_28_$arch" --platform "manylinux_2_17_$arch" \
    --platform "manylinux2014_$arch" --platform any \
    ".[orchestrator]" "setuptools>=77"
