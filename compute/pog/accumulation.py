"""Bit-faithful CPU emulation of how a prover accumulates sampled entries of C = A @ B.

The verifier compares committed entries with exact sums; what separates an honest prover from a
cheaper one is only *how* the committed fp32 value was accumulated. This module reproduces, for a
few sampled entries at any n (production sizes included), the value each accumulation order commits:

- honest orders (fp32 accumulation, chunked like the prover: each slab of ``chunk`` products summed
  from zero, slab partials added to C in order): ``sequential`` (one fp32 FMA per product: SIMT,
  MKL/OpenBLAS, numpy), tensor-core MMAs (``mma=k``: k exact products added to the accumulator per
  step, every term aligned to the largest and truncated, the sum truncated: the pessimistic model of
  NVIDIA's fp32-accumulate tensor cores), split-K (``split``: each slab in slices, slices added);
- shortcuts: 16-bit accumulation with periodic promotion (``half_accumulate``: an fp16 accumulator
  over ``block`` products, rounded to nearest or truncated every ``mma`` products, then added to fp32),
  a 16-bit C per slab (``slab_fp16``), and cheaper input formats (``rounded_inputs``: bf16, TF32, fp8).

Everything runs along n in groups of whole slabs (bounded memory), vectorised across entries and
slabs; only the steps inside a slab or block loop in Python. Inputs are the real challenge values
(``entry_vectors``). Products of fp16/bf16 grid values are exact in float64 and so are their sums;
fp32 products (48 bits) are exact, sums of them carry float64 rounding (~1e-16 relative, far below
every error studied here). Used by the verdicts benchmark and the tolerance tests; the verifier
never calls it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np

from .generator import (
    MATRIX_A,
    MATRIX_B,
    PRECISION_BITS,
    index_values,
    matrix_seeds,
    mix_vector_f64,
    subkey,
    values_at,
)

# (significant bits, smallest normal exponent e of frexp, i.e. 2**(e-1) is the least normal)
FORMATS = {
    "fp32": (24, -125),
    "tf32": (11, -125),
    "fp16": (11, -13),
    "bf16": (8, -125),
    "e4m3": (4, -5),
}
GROUP = 1 << 21  # products per step along n (whole slabs): 16 MB of float64 per entry


def round_to(x: np.ndarray, fmt: str, mode: str = "rn") -> np.ndarray:
    """``x`` rounded to format ``fmt`` (nearest-even ``rn`` or toward zero ``rz``), as float64."""
    bits, emin = FORMATS[fmt]
    _, exp = np.frexp(x)
    ulp = np.ldexp(1.0, np.maximum(exp, emin) - bits)
    scaled = x / ulp  # exact: division by a power of two
    return (np.round(scaled) if mode == "rn" else np.trunc(scaled)) * ulp


def _aligned_sum(terms: np.ndarray, bits: int) -> np.ndarray:
    """Sum over the last axis after truncating every term to the largest term's ulp (no guard bit)."""
    _, exp = np.frexp(np.abs(terms).max(axis=-1))
    ulp = np.ldexp(1.0, exp - bits)[..., None]
    return (np.trunc(terms / ulp) * ulp).sum(axis=-1)


@dataclass(frozen=True)
class Order:
    """How one prover accumulates: a name for reports and the committed value of each entry."""

    name: str
    honest: bool
    commit: Callable[[Iterator[np.ndarray], int], np.ndarray]  # (slab groups of products, chunk) -> C
    inputs: str | None = None  # the format the inputs are rounded to first (None: exact)


def _slabs(products: np.ndarray, chunk: int) -> np.ndarray:
    """[entries, t] products -> [entries, slabs, chunk] (zero padding: adding 0 is exact)."""
    entries, count = products.shape
    slabs = -(-count // chunk)
    padded = np.zeros((entries, slabs * chunk))
    padded[:, :count] = products
    return padded.reshape(entries, slabs, chunk)


def _add_slabs(partials: list[np.ndarray]) -> np.ndarray:
    """C += slab partial, in order, rounded to fp32 each time (the prover's accumulator)."""
    stacked = np.concatenate(partials, axis=1)
    acc = np.zeros(stacked.shape[0])
    for s in range(stacked.shape[1]):
        acc = round_to(acc + stacked[:, s], "fp32")
    return acc


def _fp32_slab(slab: np.ndarray, mma: int, split: int) -> np.ndarray:
    """Partial of each slab in fp32: ``mma`` products per step (1: FMA, RN; >1: tensor core, truncated)."""
    entries, slabs, chunk = slab.shape
    part = slab.reshape(entries, slabs, split, chunk // split // mma, mma)
    acc = np.zeros((entries, slabs, split))
    for g in range(part.shape[3]):
        if mma == 1:
            acc = round_to(acc + part[..., g, 0], "fp32")
        else:
            terms = np.concatenate([acc[..., None], part[..., g, :]], axis=-1)
            acc = round_to(_aligned_sum(terms, 24), "fp32", "rz")
    total = acc[..., 0]
    for s in range(1, split):
        total = round_to(total + acc[..., s], "fp32")
    return total


def fp32_order(mma: int = 1, split: int = 1) -> Order:
    """An honest fp32-accumulate order: FMA per product (``mma=1``) or tensor-core steps of ``mma``."""
    name = "fp32 FMA" if mma == 1 else f"tensor core k={mma} truncated"
    name += f", split-K {split}" if split > 1 else ""

    def commit(groups: Iterator[np.ndarray], chunk: int) -> np.ndarray:
        return _add_slabs([_fp32_slab(_slabs(g, chunk), mma, split) for g in groups])

    return Order(name, True, commit)


def exact_order() -> Order:
    """The exact sum rounded once to fp32: the least error any fp32 output can have."""

    def commit(groups: Iterator[np.ndarray], chunk: int) -> np.ndarray:
        return round_to(sum(g.sum(axis=1) for g in groups), "fp32")

    return Order("exact, rounded once", True, commit)


def _half_blocks(slab: np.ndarray, block: int, mma: int, mode: str, fmt: str) -> np.ndarray:
    """Each slab's fp32 sum of blocks of ``block`` products accumulated in ``fmt`` (fp16 or bf16)."""
    entries, slabs, chunk = slab.shape
    part = slab.reshape(entries, slabs, chunk // block, block // mma, mma)
    acc16 = np.zeros(part.shape[:3])
    for g in range(part.shape[3]):
        acc16 = round_to(acc16 + part[..., g, :].sum(axis=-1), fmt, mode)
    total = np.zeros((entries, slabs))
    for b in range(part.shape[2]):  # promotion: each 16-bit block added to an fp32 register
        total = round_to(total + acc16[..., b], "fp32")
    return total


def half_accumulate(block: int, mode: str = "rn", mma: int = 16, fmt: str = "fp16") -> Order:
    """Shortcut: a 16-bit accumulator over ``block`` products (one rounding per ``mma``), promoted to fp32."""

    def commit(groups: Iterator[np.ndarray], chunk: int) -> np.ndarray:
        return _add_slabs([_half_blocks(_slabs(g, chunk), block, mma, mode, fmt) for g in groups])

    rounding = "nearest" if mode == "rn" else "truncated"
    step = f"per {mma}" if mma > 1 else "per product"
    return Order(f"{fmt} accumulate, promoted every {block}, {rounding} {step}", False, commit)


def slab_fp16() -> Order:
    """Shortcut: each slab's product returned as fp16 (reduced-precision output), summed in fp32."""

    def commit(groups: Iterator[np.ndarray], chunk: int) -> np.ndarray:
        return _add_slabs([round_to(_slabs(g, chunk).sum(axis=2), "fp16") for g in groups])

    return Order("fp16 C per slab", False, commit)


def rounded_inputs(fmt: str) -> Order:
    """Shortcut: inputs rounded to ``fmt`` (bf16, tf32, fp16, e4m3), products summed exactly."""
    return Order(f"{fmt} inputs", False, exact_order().commit, inputs=fmt)


@dataclass(frozen=True)
class Entries:
    """Sampled entries ``(rows[e], cols[e])`` of one GPU's sub-challenge, regenerated from its key."""

    precision: str
    key: bytes  # the challenge key (the GPU's subkey is derived here)
    n: int
    rows: np.ndarray
    cols: np.ndarray
    gpu: int = 0

    @classmethod
    def of(cls, challenge, request, gpu: int = 0) -> Entries:
        """The (row, column) pairs an opening request checks on ``gpu``, in the verifier's order."""
        pairs = [(i, j) for i, cols in zip(request.rows[gpu], request.cols[gpu], strict=True) for j in cols]
        rows, cols = (np.array(side, dtype=np.int64) for side in zip(*pairs, strict=True))
        return cls(challenge.precision, bytes.fromhex(challenge.key), challenge.n, rows, cols, gpu)

    def products(self, fmt: str | None = None) -> Iterator[np.ndarray]:
        """[entries, t] float64 products along n, ``GROUP`` at a time (whole slabs when chunk | GROUP),
        with the inputs first rounded to ``fmt`` when given."""
        bits = PRECISION_BITS[self.precision]
        gpu_key = subkey(self.key, self.gpu)
        (a_rs, a_cs), (b_rs, b_cs) = matrix_seeds(gpu_key, MATRIX_A), matrix_seeds(gpu_key, MATRIX_B)
        row_vals, col_vals = values_at(a_rs, self.rows), values_at(b_cs, self.cols)
        for t0 in range(0, self.n, GROUP):
            count = min(GROUP, self.n - t0)
            a_t, b_t = index_values(a_cs, t0, count), index_values(b_rs, t0, count)
            out = np.empty((len(self.rows), count))
            for e, (rv, cv) in enumerate(zip(row_vals, col_vals, strict=True)):
                a, b = mix_vector_f64(int(rv), a_t, bits), mix_vector_f64(int(cv), b_t, bits)
                if fmt is not None:
                    a, b = round_to(a, fmt), round_to(b, fmt)
                np.multiply(a, b, out=out[e])
            yield out

    def exact(self) -> np.ndarray:
        return sum(g.sum(axis=1) for g in self.products())

    def committed(self, order: Order, chunk: int) -> np.ndarray:
        """What a prover accumulating in ``order`` commits for these entries (fp32 values in float64)."""
        return order.commit(self.products(order.inputs), chunk)
