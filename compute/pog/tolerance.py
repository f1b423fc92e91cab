"""Verification tolerance from an error model of honest fp32 accumulation (stated in docs/pog.md).

Inputs are exact on the challenge's grid in [-1, 1), so a product a*b has rms ``SIGMA_P = 1/3`` and
an entry of C is a sum of n of them. The prover accumulates in fp32, slab by slab: each slab of
``chunk`` products is summed from zero (any order: one FMA per product, tensor-core MMAs, split-K),
then added to C. Every rounding costs about ``u |s|`` (u = 2**-24) of the running sum s, so the
honest error is a random walk whose rms is

    sigma_h = HONEST_K * u * SIGMA_P * sqrt(n * L + n**2 / L),   L = min(chunk, n)

(``n L``: the sums inside the n / L slabs; ``n**2 / L``: adding n / L slab partials to C).
``HONEST_K`` = 0.75 is an upper bound of the measured coefficient (``compute.pog.accumulation``,
256 entries; ``python -m compute bench pog-verdicts`` prints them): 0.25-0.30 for one fp32 FMA per product, 0.30-0.31 for fp16
inputs on tensor cores that align to the largest term and truncate after every MMA (k = 4, 8, 16),
0.10-0.32 with split-K, and 0.66 for that truncating model fed fp32 inputs (no honest path does:
TF32 is disabled). The honest bound is ``H = HONEST_Z * sigma_h`` (z = 7: a two-sided Gaussian
tail of 3e-12 per entry, on top of the model's own margin).

Every cheaper way to get the product makes an error that grows like sqrt(n) with a coefficient
measured at production n (``CHEATS``, rms per sqrt(n)); the closest one sets ``S = c_min sqrt(n)``.
The tolerance is the geometric mean ``sqrt(H S)``: the honest bound and the closest cheat sit the
same factor ``sqrt(S / H)`` (``margin``) on either side of it, 2.55-3.16x (fp16) and 3.5-3.6x (fp32) at the validator's sizes.

Pure math on numbers; it does not see a prover, an opening or a clock.
"""

from __future__ import annotations

import math

from .engine import DEFAULT_CHUNK

U_FP32 = 2.0**-24
SIGMA_P = 1.0 / 3.0
HONEST_K = 0.75
HONEST_Z = 7.0

# Shortcuts per challenge precision: rms error of one entry / sqrt(n), measured with
# ``compute.pog.accumulation`` on the real inputs (512 entries at n = 2**18). The 16-bit accumulators
# are the least error such a kernel can make: one rounding per 16-product MMA, promoted to fp32 after
# every MMA (longer blocks, per-product rounding or truncation err more); theory agrees: 0.424 u16 / 3,
# 0.424 being the rms of one rounding to nearest in units of u |x|.
CHEATS: dict[str, dict[str, float]] = {
    "fp16": {"fp16 accumulate, promoted every MMA": 6.9e-5, "bf16 inputs": 7.7e-4},
    "bf16": {"bf16 accumulate, promoted every MMA": 5.4e-4, "e4m3 inputs": 1.08e-2},
    "fp32": {"tf32 inputs": 8.7e-5, "bf16 inputs": 6.6e-4},
}


def honest_sigma(n: int, chunk: int = DEFAULT_CHUNK) -> float:
    """Model rms error of an honest entry (an upper bound of every fp32-accumulate order measured)."""
    slab = max(1, min(chunk, n))
    return HONEST_K * U_FP32 * SIGMA_P * math.sqrt(n * slab + n * n / slab)


def honest_bound(n: int, chunk: int = DEFAULT_CHUNK) -> float:
    return HONEST_Z * honest_sigma(n, chunk)


def closest_cheat(precision: str) -> tuple[str, float]:
    """(name, rms per sqrt(n)) of the shortcut with the least error for ``precision``."""
    return min(CHEATS[precision].items(), key=lambda item: item[1])


def cheat_sigma(precision: str, n: int) -> float:
    return closest_cheat(precision)[1] * math.sqrt(n)


def tolerance(precision: str, n: int, chunk: int = DEFAULT_CHUNK) -> float:
    """Largest accepted |committed - exact| for one entry of a challenge of inner size n."""
    return math.sqrt(honest_bound(n, chunk) * cheat_sigma(precision, n))


def margin(precision: str, n: int, chunk: int = DEFAULT_CHUNK) -> float:
    """Factor between the honest bound and the tolerance, and between the tolerance and the closest cheat."""
    return math.sqrt(cheat_sigma(precision, n) / honest_bound(n, chunk))
