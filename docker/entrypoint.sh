#!/bin/sh
# Entry point of the production lease image. Under the miner's Docker backend the host key and
# sshd_config are already in place and this only hands over to the command (sshd). Run by hand
# (`docker run`), it makes a fresh ed25519 host key first so that sshd can start; no key is ever
# baked into the image. It never reads caller data.
set -eu
mkdir -p /run/sshd
if [ ! -s /etc/ssh/ssh_host_ed25519_key ]; then
    ssh-keygen -q -t ed25519 -N '' -f /etc/ssh/ssh_host_ed25519_key
fi
exec "$@"
