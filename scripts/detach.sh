#!/usr/bin/env bash
# detach.sh LOG COMMAND [ARG...]: start COMMAND in the background as a daemon and print its pid.
#
# The command runs in a session of its own (setsid: no controlling terminal, outside the caller's
# process group, so a Ctrl-C or a kill of the caller's group never reaches it), with stdin from
# /dev/null, stdout and stderr appended to LOG, and no other file descriptor of the caller: a lock,
# a pipe or a socket the caller holds is not held by the daemon for the rest of its life (a CI step
# waiting for the end of a pipe would otherwise wait for the daemon, and a lock would never be
# released). scripts/ci_docker.sh starts dockerd with it.
set -euo pipefail
if (($# < 2)); then
    echo "usage: detach.sh LOG COMMAND [ARG...]" >&2
    exit 2
fi
log=$1
shift
(
    # close every descriptor above 2 this subshell inherited (the list is read before any closes)
    fds=(/proc/$BASHPID/fd/*)
    for fd in "${fds[@]##*/}"; do
        if ((fd > 2)); then eval "exec $fd>&-"; fi
    done
    exec setsid "$@" </dev/null >>"$log" 2>&1
) &
echo $!
