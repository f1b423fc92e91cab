#!/usr/bin/env bash
# Install Debian's headless Chromium for the dashboard's browser test (idempotent: a no-op when
# chromium is already on PATH). Only Debian's apt repositories are used; nothing runs a CDN.
set -euo pipefail

if command -v chromium >/dev/null 2>&1; then
    echo "ci_browser: $(chromium --version 2>/dev/null | head -n1) is installed"
    exit 0
fi
SUDO=""
if [[ $(id -u) -ne 0 ]]; then SUDO="sudo"; fi
echo "ci_browser: installing chromium"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends chromium chromium-driver
chromium --version
