#!/usr/bin/env bash
# Prepare Docker for CI and tests (idempotent):
#   1. install docker.io and debootstrap (and iproute2, openssl, util-linux for the second engine of
#      the multi-host test; e2fsprogs and mount for volume images) via apt when missing;
#   2. start dockerd when no engine answers, detached (scripts/detach.sh: its own session, none of
#      this script's or its caller's file descriptors), and wait for it (bounded);
#   3. build the CPU test image compute-base:cpu (skipped when it already exists).
# Env: DOCKER_WAIT_S (default 60): how long to wait for the engine.
#      DOCKERD_LOG (default /tmp/dockerd-ci.log): where a dockerd started here logs.
set -euo pipefail
cd "$(dirname "$0")/.."

SUDO=""
if [[ $(id -u) -ne 0 ]]; then SUDO="sudo"; fi
WAIT_S="${DOCKER_WAIT_S:-60}"
DOCKERD_LOG="${DOCKERD_LOG:-/tmp/dockerd-ci.log}"

missing=()
if ! command -v docker >/dev/null 2>&1 || ! command -v dockerd >/dev/null 2>&1; then
    missing+=(docker.io)
fi
if ! command -v debootstrap >/dev/null 2>&1; then
    missing+=(debootstrap)
fi
# the multi-host test's second dockerd (scripts/second_dockerd.sh): netns, veth, TLS certificates
if ! command -v ip >/dev/null 2>&1; then missing+=(iproute2); fi
if ! command -v openssl >/dev/null 2>&1; then missing+=(openssl); fi
if ! command -v nsenter >/dev/null 2>&1; then missing+=(util-linux); fi
if ! command -v mkfs.ext4 >/dev/null 2>&1 || ! command -v losetup >/dev/null 2>&1; then missing+=(e2fsprogs mount); fi
if ((${#missing[@]})); then
    echo "ci_docker: installing ${missing[*]}"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

if ! docker info >/dev/null 2>&1; then
    if pgrep -x dockerd >/dev/null 2>&1; then
        echo "ci_docker: dockerd is running but not answering yet; waiting"
    else
        echo "ci_docker: starting dockerd (log: $DOCKERD_LOG)"
        $SUDO bash scripts/detach.sh "$DOCKERD_LOG" dockerd >/dev/null
    fi
    deadline=$((SECONDS + WAIT_S))
    until docker info >/dev/null 2>&1; do
        if ((SECONDS >= deadline)); then
            echo "ci_docker: Docker engine did not answer within ${WAIT_S}s; last log lines:" >&2
            tail -n 20 "$DOCKERD_LOG" >&2 2>/dev/null || true
            exit 1
        fi
        sleep 1
    done
fi
echo "ci_docker: Docker engine $(docker version --format '{{.Server.Version}}') is up"

$SUDO bash scripts/build_base_image.sh
