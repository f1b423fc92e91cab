"""Draw challenges and openings (validator side): fresh secrets from a CSPRNG by default.

``new_challenge`` draws a 128-bit id and a 128-bit key; ``choose_openings`` draws, per GPU,
distinct rows (without replacement, so a prover that computed a fraction f of the rows survives
with probability <= f**k) and, independently for every opened row, the columns checked in it.
Pass ``rng`` (a ``numpy.random.Generator``) only for reproducible tests. Nothing here computes or verifies.
"""

from __future__ import annotations

import secrets

import numpy as np

from .draws import GEMM_OPENINGS, oracle_rng
from .engine import DEFAULT_CHUNK
from .wire import Challenge, OpeningRequest, Precision


def _token(rng: np.random.Generator | None) -> str:
    return secrets.token_hex(16) if rng is None else rng.bytes(16).hex()


def new_challenge(
    precision: Precision,
    m: int,
    n: int,
    p: int,
    gpu_count: int,
    rng: np.random.Generator | None = None,
    chunk: int = DEFAULT_CHUNK,
) -> Challenge:
    """A fresh secret challenge; ``chunk`` is the slab length along n the prover accumulates."""
    return Challenge(
        challenge_id=_token(rng),
        key=_token(rng),
        precision=precision,
        m=m,
        n=n,
        p=p,
        gpu_count=gpu_count,
        chunk=min(chunk, n),
    )


def _distinct(rng: np.random.Generator | None, population: int, count: int) -> list[int]:
    count = min(count, population)
    if rng is None:
        chosen: set[int] = set()
        while len(chosen) < count:
            chosen.add(secrets.randbelow(population))
        return sorted(chosen)
    return sorted(int(i) for i in rng.choice(population, size=count, replace=False))


# Element evaluations the verifier may spend per GPU and precision: (rows + rows x columns) x n.
# 2**28 keeps verification near 0.5 s of one core at the validator's largest default shapes
# (n ~ 15M for an H100 at fp16: 8 rows x 1 column); smaller n gets up to ``cols_per_row``.
VERIFY_BUDGET = 1 << 28


def columns_within_budget(n: int, rows: int, cols_per_row: int, budget: int = VERIFY_BUDGET) -> int:
    """Columns per opened row, at least 1, at most ``cols_per_row``, so the verifier stays in budget."""
    return max(1, min(cols_per_row, budget // max(1, rows * n) - 1))


def choose_openings(
    challenge: Challenge,
    rows_per_gpu: int = 8,
    cols_per_row: int = 4,
    rng: np.random.Generator | None = None,
    budget: int | None = VERIFY_BUDGET,
) -> OpeningRequest:
    """Rows to open per GPU and, for every opened row, its own columns; drawn after the commitment.

    Each row's columns are drawn independently of every other row's, so a prover that computed
    only a fraction g of C's columns survives with probability <= g**rows (g**(rows * columns)),
    like the f**rows bound on rows; with columns shared by the rows of a GPU it was g**columns.
    ``budget`` (None: unlimited) caps the columns per row at large n, never below one.
    """
    if rng is None:  # secrets, unless the fleet benchmark made the draws predictable (``draws``)
        rng = oracle_rng(GEMM_OPENINGS, challenge.challenge_id)
    rows = [_distinct(rng, challenge.m, rows_per_gpu) for _ in range(challenge.gpu_count)]
    if budget is not None:
        cols_per_row = columns_within_budget(
            challenge.n, min(rows_per_gpu, challenge.m), cols_per_row, budget
        )
    cols = [[_distinct(rng, challenge.p, cols_per_row) for _ in per_gpu] for per_gpu in rows]
    return OpeningRequest(challenge_id=challenge.challenge_id, rows=rows, cols=cols)
