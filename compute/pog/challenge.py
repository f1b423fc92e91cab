"""Draw challenges and openings (validator side): fresh secrets from a CSPRNG by default.

``new_challenge`` draws a 128-bit id and a 128-bit key; ``choose_openings`` draws, per GPU,
distinct rows (without replacement, so a prover that computed a fraction f of the rows survives
with probability <= f**k) and the columns checked inside them. Pass ``rng`` (a
``numpy.random.Generator``) only for reproducible tests. Nothing here computes or verifies.
"""

from __future__ import annotations

import secrets

import numpy as np

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


def choose_openings(
    challenge: Challenge,
    rows_per_gpu: int = 8,
    cols_per_row: int = 4,
    rng: np.random.Generator | None = None,
) -> OpeningRequest:
    """Rows to open and columns to check per GPU, drawn after the commitment arrived."""
    rows = [_distinct(rng, challenge.m, rows_per_gpu) for _ in range(challenge.gpu_count)]
    cols = [_distinct(rng, challenge.p, cols_per_row) for _ in range(challenge.gpu_count)]
    return OpeningRequest(challenge_id=challenge.challenge_id, rows=rows, cols=cols)
