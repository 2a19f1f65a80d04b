#!/bin/sh
# Orchestrator image entrypoint. Results must land in the bind-mounted /results owned by
# whoever runs `docker compose` on the host, so they can read and delete them. Started as
# root (the compose file asks for it), this takes the uid/gid that owns /results and runs
# the command as that user. If /results belongs to root (Docker made the folder), the
# command runs as the image's user `starling` with a umask (STARLING_UMASK) that leaves
# everything it writes readable and deletable by anyone. Started as any other user, it just runs.
set -eu
if [ "$(id -u)" = 0 ] && [ -d /results ]; then
    owner="$(stat -c %u /results)"
    group="$(stat -c %g /results)"
    if [ "$owner" = 0 ]; then
        chmod 0777 /results
        umask 000
        # starling writes owner-only unless asked otherwise: here the owner would be the
        # image's user, not the host's, so ask for files anyone may read and delete. The
        # run records stay trusted (their seals are checked); the seal key stays owner-only.
        export STARLING_UMASK=000
        owner="$(id -u starling)"
        group="$(id -g starling)"
    fi
    export HOME=/tmp
    exec setpriv --reuid="$owner" --regid="$group" --clear-groups -- "$@"
fi
exec "$@"
