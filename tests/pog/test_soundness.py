"""Soundness of a PoG round against the public API: honest provers pass, cheaters are caught."""

from __future__ import annotations

import math

import numpy as np
import pytest

from compute.pog import (
    B64Array,
    Commitment,
    GpuOpening,
    Opening,
    Prover,
    RowProof,
    choose_openings,
    new_challenge,
    tolerance,
    verify,
)
from compute.pog.generator import MATRIX_A, MATRIX_B, PRECISION_BITS, matrix_block_np, subkey
from compute.pog.merkle import MerkleTree, hash_rows


def _exact(challenge, gpu: int = 0) -> np.ndarray:
    bits = PRECISION_BITS[challenge.precision]
    key = subkey(bytes.fromhex(challenge.key), gpu)
    a = matrix_block_np(key, MATRIX_A, bits, (0, challenge.m), (0, challenge.n)).astype(np.float64)
    b = matrix_block_np(key, MATRIX_B, bits, (0, challenge.n), (0, challenge.p)).astype(np.float64)
    return a, b


class MatrixProver:
    """A prover that commits to whatever matrices it is given (honest or not)."""

    def __init__(self, challenge, outputs: list[np.ndarray]) -> None:
        self.challenge_id = challenge.challenge_id
        cid = bytes.fromhex(challenge.challenge_id)
        self.outputs = [np.asarray(c, dtype=np.float32) for c in outputs]
        self.trees = [MerkleTree(hash_rows(cid, g, c)) for g, c in enumerate(self.outputs)]

    def commitment(self) -> Commitment:
        return Commitment(challenge_id=self.challenge_id, roots=[t.root.hex() for t in self.trees])

    def open(self, request) -> Opening:
        per_gpu = [
            GpuOpening(
                rows=[
                    RowProof(index=i, row=B64Array.from_numpy(c[i]), path=[n.hex() for n in tree.path(i)])
                    for i in rows
                ]
            )
            for c, tree, rows in zip(self.outputs, self.trees, request.rows, strict=True)
        ]
        return Opening(challenge_id=self.challenge_id, per_gpu=per_gpu)


def _round(challenge, prover, seed: int | None = None):
    commitment = prover.commit(challenge) if isinstance(prover, Prover) else prover.commitment()
    request = choose_openings(challenge, rng=None if seed is None else np.random.default_rng(seed))
    return commitment, request, prover.open(request)


def _round_bits(m: int, f_rows: int, k: int = 8) -> float:
    return math.comb(f_rows, k) / math.comb(m, k)


@pytest.mark.parametrize(
    ("precision", "m", "n", "p", "gpus"),
    [
        ("fp16", 64, 5000, 48, 1),
        ("fp16", 1, 300, 1, 1),
        ("fp16", 33, 4097, 70, 2),
        ("fp32", 64, 5000, 48, 1),
        ("fp32", 9, 8192, 130, 3),
        ("bf16", 40, 3000, 40, 2),
    ],
)
def test_honest_prover_passes_every_time(precision: str, m: int, n: int, p: int, gpus: int) -> None:
    prover = Prover("cpu")
    for _ in range(3):
        challenge = new_challenge(precision, m, n, p, gpus, chunk=1024)
        verdict = verify(challenge, *_round(challenge, prover))
        assert verdict.ok, verdict.reasons
        assert all(g.max_err <= g.tol / 3 for g in verdict.per_gpu)


@pytest.mark.parametrize("precision", ["fp16", "fp32"])
def test_honest_error_leaves_wide_margin_at_large_n(precision: str) -> None:
    challenge = new_challenge(precision, 8, 1 << 16, 8, 1, rng=np.random.default_rng(1))
    a, b = _exact(challenge)
    prover = Prover("cpu")
    prover.commit(challenge)
    honest = np.abs(prover.output(0) - a @ b).max()
    worst_order = np.zeros((8, 8), np.float32)  # the worst honest order: one running fp32 sum per slab
    for t0 in range(0, challenge.n, challenge.chunk):
        block = np.einsum("it,tj->tij", a[:, t0 : t0 + challenge.chunk], b[t0 : t0 + challenge.chunk])
        slab = np.zeros((8, 8), np.float32)
        for term in block.astype(np.float32):
            slab += term
        worst_order += slab
    worst = np.abs(worst_order - a @ b).max()
    tol = tolerance(precision, challenge.n, challenge.chunk)
    assert honest * 10 < tol and worst * 10 < tol


@pytest.mark.slow
def test_half_computed_product_is_caught() -> None:
    challenge = new_challenge("fp16", 64, 256, 16, 1, rng=np.random.default_rng(2))
    a, b = _exact(challenge)
    honest = a @ b
    computed = np.random.default_rng(3).permutation(64)[:32]
    forged = np.random.default_rng(4).uniform(-5, 5, honest.shape)
    forged[computed] = honest[computed]
    cheater = MatrixProver(challenge, [forged])
    rounds = 2000
    passed = sum(verify(challenge, *_round(challenge, cheater, seed)).ok for seed in range(rounds))
    assert _round_bits(64, 32) < 2**-8
    assert passed / rounds <= 2**-8


def _column_cheater(computed_fraction: float, seed: int):
    """A prover that computed only a fraction of C's columns and forged the rest (all rows)."""
    challenge = new_challenge("fp16", 64, 256, 64, 1, rng=np.random.default_rng(seed))
    a, b = _exact(challenge)
    honest = a @ b
    computed = np.random.default_rng(seed + 1).permutation(64)[: int(64 * computed_fraction)]
    forged = np.random.default_rng(seed + 2).uniform(-5, 5, honest.shape)
    forged[:, computed] = honest[:, computed]
    return challenge, MatrixProver(challenge, [forged])


def test_every_opened_row_gets_its_own_columns() -> None:
    challenge = new_challenge("fp16", 64, 256, 4096, 2, rng=np.random.default_rng(5))
    request = choose_openings(challenge, 8, 4, rng=np.random.default_rng(6))
    for rows, cols in zip(request.rows, request.cols, strict=True):
        assert len(cols) == len(rows) and all(len(c) == 4 for c in cols)
        assert len({tuple(c) for c in cols}) == len(rows)  # 8 independent draws out of C(4096, 4)


@pytest.mark.slow
def test_half_computed_columns_are_caught_as_rows_are() -> None:
    """Skipping half of the columns survives with probability 2**-8 (8 rows x 1 own column), not 1/2."""
    challenge, cheater = _column_cheater(0.5, 7)
    commitment, rounds = cheater.commitment(), 2000
    passed = 0
    for seed in range(rounds):
        request = choose_openings(challenge, 8, 1, rng=np.random.default_rng(seed))
        passed += verify(challenge, commitment, request, cheater.open(request)).ok
    # expected 2000 / 256 ~ 7.8 survivors; shared columns would let ~1000 through
    assert passed / rounds <= 2 * 2**-8


def test_default_opening_catches_a_three_quarter_column_cheat() -> None:
    challenge, cheater = _column_cheater(0.75, 11)
    commitment = cheater.commitment()
    verdicts = [
        verify(challenge, commitment, r, cheater.open(r))
        for r in (choose_openings(challenge) for _ in range(50))
    ]
    assert not any(v.ok for v in verdicts)  # 0.75**32 per round with 8 rows x 4 own columns
    assert all("sampled entries off" in v.reasons[0] for v in verdicts)


def test_verify_budget_keeps_one_column_per_row_at_large_n() -> None:
    big = new_challenge("fp16", 8192, 14_979_072, 8192, 1, rng=np.random.default_rng(8))
    request = choose_openings(big, 8, 4, rng=np.random.default_rng(9))
    assert [len(c) for c in request.cols[0]] == [1] * 8  # (8 + 8) x n <= 2**28 element evaluations
    small = new_challenge("fp32", 8192, 1 << 20, 8192, 1, rng=np.random.default_rng(8))
    assert [len(c) for c in choose_openings(small, 8, 4).cols[0]] == [4] * 8


def _rounded(x: np.ndarray, bits: int) -> np.ndarray:
    mant, exp = np.frexp(x)
    return np.ldexp(np.round(mant * 2.0**bits) / 2.0**bits, exp)


def _e4m3(x: np.ndarray) -> np.ndarray:
    mant, exp = np.frexp(np.clip(x, -448, 448))
    exp = np.maximum(exp, -5)  # subnormals below 2**-6
    return np.ldexp(np.round(np.ldexp(np.clip(x, -448, 448), -exp) * 16) / 16, exp)


@pytest.mark.parametrize(
    ("precision", "shortcut"),
    [
        ("fp16", lambda x: _rounded(x, 8)),  # bf16 inputs
        ("fp32", lambda x: _rounded(x, 11)),  # TF32 inputs
        ("fp16", _e4m3),
        ("fp32", _e4m3),
        ("bf16", _e4m3),
    ],
)
def test_cheaper_input_formats_are_rejected(precision: str, shortcut) -> None:
    for seed in range(3):
        challenge = new_challenge(precision, 32, 4096, 32, 1, rng=np.random.default_rng(10 + seed))
        a, b = _exact(challenge)
        cheater = MatrixProver(challenge, [shortcut(a) @ shortcut(b)])
        verdict = verify(challenge, *_round(challenge, cheater, seed))
        assert not verdict.ok
        assert "sampled entries off" in verdict.reasons[0]


@pytest.fixture(scope="module")
def honest_round():
    challenge = new_challenge("fp32", 32, 512, 24, 2, rng=np.random.default_rng(20))
    commitment, request, opening = _round(challenge, Prover("cpu"), seed=21)
    assert verify(challenge, commitment, request, opening).ok
    return challenge, commitment, request, opening


def _with_proof(opening: Opening, gpu: int, k: int, **changes) -> Opening:
    per_gpu = list(opening.per_gpu)
    rows = list(per_gpu[gpu].rows)
    rows[k] = rows[k].model_copy(update=changes)
    per_gpu[gpu] = GpuOpening.model_construct(rows=rows)
    return Opening.model_construct(challenge_id=opening.challenge_id, per_gpu=per_gpu, kind="pog.opening")


def _raw_row(values) -> B64Array:
    import base64

    data = base64.b64encode(np.asarray(values, dtype="<f4").tobytes()).decode()
    return B64Array.model_construct(dtype="<f4", shape=[len(values)], data=data)


def test_commitment_replayed_from_another_challenge_is_rejected(honest_round) -> None:
    challenge, commitment, request, opening = honest_round
    other = new_challenge("fp32", 32, 512, 24, 2)
    o_commitment, o_request, o_opening = _round(other, Prover("cpu"))
    replay = o_commitment.model_copy(update={"challenge_id": challenge.challenge_id})
    verdict = verify(challenge, replay, request, opening)
    assert not verdict.ok and "does not match the root" in verdict.reasons[0]
    verdict = verify(challenge, o_commitment, request, opening)
    assert not verdict.ok and "challenge ids" in verdict.reasons[0]


@pytest.mark.parametrize(
    ("tamper", "reason"),
    [
        (lambda p: {"path": p.path[:-1]}, "does not match the root"),
        (lambda p: {"path": ["00" * 32] + p.path[1:]}, "does not match the root"),
        (lambda p: {"path": p.path + p.path[:1]}, "does not match the root"),
        (lambda p: {"index": (p.index + 1) % 32}, "opened rows"),
        (lambda p: {"row": _raw_row(np.zeros(23))}, "expected dtype <f4 shape [24]"),
        (
            lambda p: {"row": B64Array.model_construct(dtype="<f8", shape=[24], data=p.row.data)},
            "expected dtype",
        ),
        (lambda p: {"row": _raw_row([float("nan")] * 24)}, "NaN or infinity"),
        (lambda p: {"row": _raw_row([float("inf")] * 24)}, "NaN or infinity"),
        (
            lambda p: {"row": B64Array.model_construct(dtype="<f4", shape=[24], data="A" * 10**6)},
            "base64 characters, expected",
        ),
    ],
    ids=[
        "truncated-path",
        "forged-path",
        "long-path",
        "wrong-index",
        "short-row",
        "wrong-dtype",
        "nan",
        "inf",
        "oversized",
    ],
)
def test_tampered_openings_are_rejected_with_a_reason(honest_round, tamper, reason: str) -> None:
    challenge, commitment, request, opening = honest_round
    proof = opening.per_gpu[1].rows[3]
    verdict = verify(challenge, commitment, request, _with_proof(opening, 1, 3, **tamper(proof)))
    assert not verdict.ok
    assert verdict.per_gpu[0].ok and not verdict.per_gpu[1].ok
    assert reason in verdict.reasons[0]


def test_a_correct_row_committed_under_a_wrong_value_is_caught(honest_round) -> None:
    challenge, commitment, request, opening = honest_round
    a, b = _exact(challenge, gpu=0)
    c = (a @ b).astype(np.float32)
    c[request.rows[0][2], request.cols[0][2][1]] += 0.05
    cheater = MatrixProver(challenge, [c, (np.dot(*_exact(challenge, gpu=1))).astype(np.float32)])
    verdict = verify(challenge, cheater.commitment(), request, cheater.open(request))
    assert not verdict.ok and "1/32 sampled entries off" in verdict.reasons[0]


@pytest.mark.parametrize("junk", [None, 42, "x", object()])
def test_garbage_inputs_never_raise(honest_round, junk) -> None:
    challenge, commitment, request, opening = honest_round
    for args in (
        (junk, commitment, request, opening),
        (challenge, junk, request, opening),
        (challenge, commitment, junk, opening),
        (challenge, commitment, request, junk),
    ):
        verdict = verify(*args)
        assert not verdict.ok and verdict.reasons


def test_wrong_gpu_count_is_rejected(honest_round) -> None:
    challenge, commitment, request, opening = honest_round
    short = commitment.model_copy(update={"roots": commitment.roots[:1]})
    verdict = verify(challenge, short, request, opening)
    assert not verdict.ok and "expected 2 GPUs" in verdict.reasons[0]
