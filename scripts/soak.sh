#!/usr/bin/env bash
# The soak tests (marked `soak`): connection floods, long kill -9 loops and whole multi-validator demos
# measured against a goal. Neither the README's test command (the fast lane) nor .ci/run (slow, docker,
# browser) runs them; run them here, e.g. before a release. Extra args go to pytest. Lanes: docs/development.md.
set -euo pipefail
cd "$(dirname "$0")/.."
exec python -m pytest -q -m soak "$@"
