#!/usr/bin/env bash
# The soak tests (marked `soak`): connection floods, long kill -9 loops and whole multi-validator demos measured against
# a goal. They stay out of the default `python -m pytest -q` run (pyproject addopts) so that CI on
# 2 cores stays under 30 minutes; run them here, e.g. before a release. Extra args go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
exec python -m pytest -q -m soak "$@"
