#!/usr/bin/env bash
# GEMM-proof figures on a CUDA machine: kernel bit-identity, commit/GEMM ratio at the
# validator's H100 shapes, generator GB/s, verify cost, and the identification those figures reach.
# Usage, from the repository root: scripts/gpu_bench.sh [OUTDIR]   (JSON files land in OUTDIR)
set -u
out=${1:-${OUT:-/tmp/gpu_bench}}
mkdir -p "$out"
export PYTHONUNBUFFERED=1 OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv | tee "$out/gpu.txt"
python3 -c "import sys, torch, triton; print(sys.version.split()[0], torch.__version__, triton.__version__)"
timeout 300 python3 -m pytest --noconftest -q -p no:cacheprovider tests/pog/test_gpu_gen.py tests/pog/test_worker.py 2>&1 | tail -4
python3 - <<'PY'
import torch  # which 16-bit accumulate path the prover gets: in-place addmm(out_dtype=fp32) or the upcast
a = torch.randn(256, 512, device="cuda").half(); b = torch.randn(512, 128, device="cuda").half()
acc = torch.ones(256, 128, device="cuda")
try:
    torch.addmm(acc, a, b, out_dtype=torch.float32, out=acc)
    print("addmm out_dtype in place: ok, max err", (acc - 1 - a.float() @ b.float()).abs().max().item())
except Exception as exc:
    print("addmm out_dtype in place FAILED:", type(exc).__name__, exc)
PY
bench() {  # name precision n repeats
    timeout 240 python3 -m compute bench pog --device cuda --precision "$2" --m 8192 --p 8192 --n "$3" \
        --repeat "$4" --json > "$out/$1.json" 2> "$out/$1.err" || tail -5 "$out/$1.err"
    cat "$out/$1.json"
}
bench fp16_full fp16 262144 5            # plain GEMM = one torch.mm over full A and B
bench fp16_validator fp16 14979072 2     # the validator's H100 fp16 shape (n from the table, 3 s)
bench fp32_validator fp32 1167360 2      # the validator's H100 fp32 shape
bench bf16_full bf16 262144 3
# segment_over_gemm calibrates sustained.reference_fractions for this GPU class
timeout 300 python3 -m compute bench pog-depth --suite sustained --device cuda --json > "$out/sustained.json" 2>&1 \
    || tail -5 "$out/sustained.json"
cat "$out/sustained.json"
# the real cuBLAS honest product and the fp16 reduced-precision shortcuts
# (allow_fp16_reduced_precision_reduction, fp16 blocks of 16-256 through a batched GEMM) at the
# H100 fp16 size, next to the CPU emulation, each against the tolerance
timeout 900 python3 -m compute bench pog-verdicts --device cuda --n 11468800 --entries 8 --json \
    > "$out/verdicts.json" 2> "$out/verdicts.err" || tail -5 "$out/verdicts.err"
python3 -c "import json,sys; r=json.load(open(sys.argv[1])); print(json.dumps({p: v['given']['cuda'] for p, v in r.items()}))" "$out/verdicts.json"
python3 - "$out" <<'PY'
import json, sys
from compute.scoring.identify import identify
out = sys.argv[1]
fp16 = json.load(open(f"{out}/fp16_validator.json"))["tflops"]
fp32 = json.load(open(f"{out}/fp32_validator.json"))["tflops"]
ident = identify(fp16, fp32, 79.2, "NVIDIA H100 80GB HBM3")
print(json.dumps({"tflops_fp16": fp16, "tflops_fp32": fp32, "identified": str(ident)}))
PY
