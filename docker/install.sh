#!/bin/sh
# Used by docker/Dockerfile: install Starling with the extras "$1" (e.g. "[orchestrator]",
# or "" for a node) into the virtual environment /opt/starling, from /tmp/wheels alone
# when it holds wheels (no network), from the package index otherwise. Then drop what a
# running node never uses: pip itself, numpy's and scipy's test suites, type stubs.
set -eu
extras="${1:-}"
python3 -m venv /opt/starling
if ls /tmp/wheels/*.whl >/dev/null 2>&1; then
    set -- --no-index --find-links /tmp/wheels
else
    set --
fi
/opt/starling/bin/pip install --no-cache-dir --disable-pip-version-check "$@" "/src${extras}"
/opt/starling/bin/pip uninstall --yes --disable-pip-version-check pip setuptools >/dev/null
find /opt/starling/lib -depth -type d -name tests \
    \( -path "*/site-packages/numpy/*" -o -path "*/site-packages/scipy/*" \) -exec rm -rf {} +
find /opt/starling/lib -name "*.pyi" -delete
