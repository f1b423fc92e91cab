"""Yuma consensus, the chain's per-epoch formula, as pure numpy (no chain, no I/O).

Follows the published definition (opentensor/subtensor ``docs/consensus.md``, ``epoch.rs``):

    S      validator stake, permit holders only, normalised to sum 1
    W      weights, self-weights masked, rows of non-permit neurons zeroed, rows normalised to sum 1
    C_j    consensus = max { w : sum_i S_i [W_ij >= w] >= kappa }   (stake-weighted kappa-quantile)
    Wc_ij  clipped weights = min(W_ij, C_j)
    VT_i   validator trust = sum_j Wc_ij   (the share of i's weight that the consensus supports)
    P_j    pre-rank = sum_i S_i W_ij;  R_j rank = sum_i S_i Wc_ij;  T_j trust = R_j / P_j
    I_j    incentive = R_j / sum R
    Wb     bond weights = (1 - beta) W + beta Wc      (beta = bonds_penalty; 1: bond on clipped)
    B      bonds = colnorm(alpha colnorm(S_i Wb_ij) + (1 - alpha) B_prev)
    D_i    dividends = sum_j B_ij I_j, normalised

It is what a validator's weights earn once the chain has compared them with every other
validator's: a validator whose weights exceed what at least ``kappa`` of the stake supports is
clipped and loses trust (and dividends). Deliberately not modelled: liquid alpha, commit-reveal
delays, activity cut-off, emission amounts in TAO (only the normalised shares).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

Array = npt.NDArray[np.float64]

DEFAULT_KAPPA = 0.5  # the chain's default: 32_767 / 65_535
DEFAULT_BOND_ALPHA = 0.1
DEFAULT_BONDS_PENALTY = 1.0


class YumaError(ValueError):
    """Inputs of inconsistent shape or out-of-range parameters."""


@dataclass(frozen=True)
class YumaResult:
    """One epoch's outputs; every vector is indexed by uid."""

    stake: Array  # normalised validator stake
    weights: Array  # normalised weight matrix actually used
    consensus: Array
    clipped: Array
    validator_trust: Array
    ranks: Array
    trust: Array
    incentive: Array
    bonds: Array
    dividends: Array


def _normalise(vector: Array) -> Array:
    total = float(vector.sum())
    return vector / total if total > 0 else np.zeros_like(vector)


def _row_normalise(matrix: Array) -> Array:
    sums = matrix.sum(axis=1, keepdims=True)
    return np.divide(matrix, sums, out=np.zeros_like(matrix), where=sums > 0)


def _col_normalise(matrix: Array) -> Array:
    sums = matrix.sum(axis=0, keepdims=True)
    return np.divide(matrix, sums, out=np.zeros_like(matrix), where=sums > 0)


def _clean(values: npt.ArrayLike, name: str) -> Array:
    array = np.asarray(values, dtype=np.float64)
    if not np.all(np.isfinite(array)) or np.any(array < 0):
        raise YumaError(f"{name} must be finite and non-negative")
    return array


def weighted_median_col(stake: Array, weights: Array, kappa: float = DEFAULT_KAPPA) -> Array:
    """Per column, the largest weight that validators holding at least ``kappa`` of stake reach.

    ``stake`` need not be normalised; a column nobody supports with ``kappa`` of stake gets 0.
    """
    total = float(stake.sum())
    out = np.zeros(weights.shape[1])
    if total <= 0:
        return out
    need = kappa * total
    order = np.argsort(-weights, axis=0, kind="stable")  # per column, largest weight first
    for j in range(weights.shape[1]):
        ranked = order[:, j]
        support = np.cumsum(stake[ranked])
        # first position where the stake at or above this weight reaches kappa (tiny slack: floats)
        hit = int(np.searchsorted(support, need - 1e-12 * total, side="left"))
        if hit < len(ranked):
            out[j] = weights[ranked[hit], j]
    return out


def yuma_epoch(
    stake: npt.ArrayLike,
    weights: npt.ArrayLike,
    validator_permit: npt.ArrayLike | None = None,
    *,
    kappa: float = DEFAULT_KAPPA,
    bonds_prev: npt.ArrayLike | None = None,
    bond_alpha: float = DEFAULT_BOND_ALPHA,
    bonds_penalty: float = DEFAULT_BONDS_PENALTY,
) -> YumaResult:
    """Run one Yuma epoch over ``n`` neurons: ``stake`` (n,), ``weights`` (n, n) raw, any scale.

    ``validator_permit`` (n,) bools; None = every neuron with stake may validate.
    """
    s = _clean(stake, "stake")
    w = _clean(weights, "weights")
    n = s.shape[0]
    if s.ndim != 1 or w.shape != (n, n):
        raise YumaError(f"stake must be (n,) and weights (n, n); got {s.shape} and {w.shape}")
    if not 0.0 < kappa <= 1.0 or not 0.0 <= bond_alpha <= 1.0 or not 0.0 <= bonds_penalty <= 1.0:
        raise YumaError("kappa must be in (0, 1], bond_alpha and bonds_penalty in [0, 1]")
    permit = np.ones(n, bool) if validator_permit is None else np.asarray(validator_permit, bool)
    if permit.shape != (n,):
        raise YumaError(f"validator_permit must be ({n},), got {permit.shape}")
    s = _normalise(np.where(permit, s, 0.0))
    w = w.copy()
    np.fill_diagonal(w, 0.0)  # the chain masks self-weights
    w[~permit] = 0.0
    w = _row_normalise(w)
    consensus = weighted_median_col(s, w, kappa)
    clipped = np.minimum(w, consensus[None, :])
    validator_trust = clipped.sum(axis=1)
    preranks = s @ w
    ranks = s @ clipped
    trust = np.divide(ranks, preranks, out=np.zeros(n), where=preranks > 0)
    incentive = _normalise(ranks)
    bond_weights = (1.0 - bonds_penalty) * w + bonds_penalty * clipped
    delta = _col_normalise(s[:, None] * bond_weights)
    prev = np.zeros((n, n)) if bonds_prev is None else _clean(bonds_prev, "bonds_prev")
    if prev.shape != (n, n):
        raise YumaError(f"bonds_prev must be ({n}, {n}), got {prev.shape}")
    bonds = _col_normalise(bond_alpha * delta + (1.0 - bond_alpha) * prev)
    dividends = _normalise(bonds @ incentive)
    return YumaResult(s, w, consensus, clipped, validator_trust, ranks, trust, incentive, bonds, dividends)


def cosine(a: npt.ArrayLike, b: npt.ArrayLike) -> float:
    """Cosine similarity of two weight vectors (0 when either is all zero)."""
    x, y = np.asarray(a, np.float64), np.asarray(b, np.float64)
    norms = float(np.linalg.norm(x) * np.linalg.norm(y))
    return float(x @ y / norms) if norms > 0 else 0.0
