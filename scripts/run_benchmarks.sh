#!/usr/bin/env bash
# Runs every benchmark the project ships and writes one JSON file per figure set to
# ${BENCH_OUT:-bench-results}/ (quiet machine recommended: the figures are wall-clock).
# Usage: scripts/run_benchmarks.sh [--gpu]   (--gpu adds the CUDA PoG runs at validator shapes)
set -euo pipefail
cd "$(dirname "$0")/.."
out=${BENCH_OUT:-bench-results}
mkdir -p "$out"
run() { local name=$1; shift; echo "== $name: $*" >&2; "$@" > "$out/$name.json"; cat "$out/$name.json"; }

run pog-cpu-fp32      python3 -m compute bench pog --device cpu --precision fp32 --verify-n 1048576 --json
run pog-cpu-fp16      python3 -m compute bench pog --device cpu --precision fp16 --json
run pog-depth-cpu     python3 -m compute bench pog-depth --device cpu --json
run pog-verdicts      python3 -m compute bench pog-verdicts --device cpu --json
run transport         python3 -m compute bench transport --json
run allocation        python3 -m compute bench allocation --backend embedded --json
run hardening         python3 -m compute bench hardening --json
if docker info >/dev/null 2>&1; then
  run allocation-docker python3 -m compute bench allocation --backend docker --iterations 10 --json
fi
run dashboard         python3 -m compute bench dashboard --json
run presence-sim      python3 -m compute bench presence-sim --json
run distance          python3 -m compute bench distance --rounds 3 --share 0.1 --flood --json || true  # exits 1 on a false negative
if python3 -c "import web3" 2>/dev/null; then
  run collateral-gas  python3 -m compute bench collateral-gas --json
fi
echo "== validator-64" >&2; python3 -m compute bench validator --miners 64 | tee "$out/validator-64.txt"
if [ "${1:-}" = "--gpu" ]; then
  run pog-cuda-fp16   python3 -m compute bench pog --device cuda --precision fp16 --m 8192 --n 8192 --p 8192 --json
  run pog-cuda-fp32   python3 -m compute bench pog --device cuda --precision fp32 --m 8192 --n 8192 --p 8192 --json
  run pog-depth-cuda  python3 -m compute bench pog-depth --device cuda --json
fi
