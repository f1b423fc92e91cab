"""Memory proof: honest rounds pass both judges; each cheat is caught, and the verdict names how."""

from __future__ import annotations

import dataclasses
import time

import numpy as np
import pytest
import torch

from compute.pog.depth_engine import (
    NONLINEAR_GAIN,
    MemoryEngine,
    chain_seeds,
    expensive_block_np,
    expensive_block_torch,
    pass_offsets,
)
from compute.pog.generator import index_values
from compute.pog.memory import (
    MemoryCommitment,
    MemoryOpening,
    MemoryPolicy,
    choose_memory_openings,
    judge_memory_timing,
    memory_hint_gb,
    plan_memory,
    verify_memory,
)

ROUNDS = 16


@pytest.fixture(scope="module")
def policy() -> MemoryPolicy:
    """Regeneration rate of THIS CPU (x2 for a cleverer cheat); no host-streaming floor on a CPU."""
    rows, cols = index_values(1, 0, 64), index_values(2, 0, 2048)
    started = time.perf_counter()
    expensive_block_np(rows, cols, ROUNDS)
    rate = 64 * 2048 * ROUNDS / (time.perf_counter() - started)
    return MemoryPolicy(max_regen_rate=2 * rate, min_margin=3.0, host_stream_gbs=0.0, max_lead_s=0.002)


def _challenge(n: int = 512, passes: int = 4):
    rng = np.random.default_rng(7)
    challenge = plan_memory(1.0, 100.0, passes=passes, rng=rng)
    return challenge.model_copy(update={"n": n, "hash_rounds": ROUNDS})


def run_round(engine: MemoryEngine, challenge, policy, rng_seed: int = 3):
    arrivals: list[list[float]] = [[] for _ in range(challenge.gpu_count)]

    def emit(line: dict) -> None:
        if line["op"] == "memory_pass":
            arrivals[line["gpu"]].append(time.perf_counter())

    engine.prepare(challenge.build_message())
    started = time.perf_counter()
    commitment = MemoryCommitment.model_validate(engine.commit(challenge.start_message(), emit))
    request = choose_memory_openings(
        challenge, passes_per_gpu=challenge.passes, rng=np.random.default_rng(rng_seed)
    )
    opening = MemoryOpening.model_validate(engine.open(request.model_dump()))
    maths = verify_memory(challenge, commitment, request, opening, rng=np.random.default_rng(rng_seed))
    timing = judge_memory_timing(challenge, started, arrivals, policy)
    return maths, timing


def commit(engine: MemoryEngine, challenge, emit=None) -> MemoryCommitment:
    engine.prepare(challenge.build_message())
    return MemoryCommitment.model_validate(engine.commit(challenge.start_message(), emit))


class Regenerator(MemoryEngine):
    """Keeps nothing resident: regenerates A on every pass (correct answers, slow)."""

    def build(self, spec, gpu):
        return None

    def multiply(self, spec, gpu, a, x):
        return super().build(spec, gpu) @ x.astype(np.float32)


class HalfMemory(MemoryEngine):
    """Memory capped at half of A: keeps the first half of the rows, regenerates the rest per pass."""

    def build(self, spec, gpu):
        return super().build(spec, gpu)[: spec.n // 2].copy()

    def multiply(self, spec, gpu, a, x):
        rest = super().build(spec, gpu)[spec.n // 2 :]  # what the capped prover must recompute
        return np.concatenate([a @ x, rest @ x]).astype(np.float32)


class PassSkipper(MemoryEngine):
    """Computes every other pass; the skipped ones are random vectors (fast, wrong)."""

    def multiply(self, spec, gpu, a, x):
        self.count = getattr(self, "count", 0) + 1
        if self.count % 2 == 0:
            return np.random.default_rng(self.count).standard_normal(spec.n).astype(np.float32) * 15
        return super().multiply(spec, gpu, a, x)


class HalfPrecision(MemoryEngine):
    """Stores A in fp16 (half the memory), multiplies in fp32."""

    def build(self, spec, gpu):
        return super().build(spec, gpu).astype(np.float16)

    def multiply(self, spec, gpu, a, x):
        return (a.astype(np.float32) @ x.astype(np.float32)).astype(np.float32)


class Collapser(MemoryEngine):
    """Reads A for pass 1 only, then answers without it: ``mode`` says how the chain collapses."""

    def __init__(self, mode: str) -> None:
        super().__init__("cpu", 1)
        self.mode, self.count = mode, 0

    def multiply(self, spec, gpu, a, x):
        self.count += 1
        if self.count == 1:
            return super().multiply(spec, gpu, a, x)
        if self.mode == "zeros":  # zero was a fixed point of y -> A tanh(y)
            return np.zeros(spec.n, dtype=np.float32)
        if self.mode == "drift":  # shrinks toward zero without reading A
            return np.tanh(x).astype(np.float32) * 0.1
        # "chaser": the vector whose next x is zero (it knows the key, hence every offset)
        seed = chain_seeds(bytes.fromhex(spec.key), bytes.fromhex(spec.start), gpu)[1]
        offsets = pass_offsets(seed, self.count, spec.n)
        return (-offsets * np.sqrt(spec.n) / NONLINEAR_GAIN).astype(np.float32)


@pytest.mark.parametrize("mode", ["zeros", "drift", "chaser"])
def test_chain_collapsing_after_pass_1_is_caught_in_every_round(mode) -> None:
    challenge = _challenge(n=128, passes=16)
    engine = Collapser(mode)
    commitment = commit(engine, challenge)
    for seed in range(16):  # the validator's default: 3 random passes (and always pass 1)
        request = choose_memory_openings(challenge, 3, rng=np.random.default_rng(seed))
        opening = MemoryOpening.model_validate(engine.open(request.model_dump()))
        verdict = verify_memory(challenge, commitment, request, opening, rng=np.random.default_rng(seed))
        assert not verdict.ok and verdict.caught_by == "mathematics", (mode, seed)
        if mode != "chaser":
            assert "degenerate vector" in verdict.reasons[0], verdict.reasons


def test_openings_always_tie_the_chain_to_its_start() -> None:
    challenge = _challenge(n=128, passes=16)
    for seed in range(8):
        picks = choose_memory_openings(challenge, 3, rng=np.random.default_rng(seed)).passes[0]
        assert picks[0] == 1 and len(set(picks)) == 4 and picks == sorted(picks)


def test_honest_prover_passes_both_judges(policy) -> None:
    maths, timing = run_round(MemoryEngine("cpu", 2), _challenge(), policy)
    assert maths.ok, maths.reasons
    assert timing.ok, timing.reasons
    result = timing.per_gpu[0]
    assert result.margin > policy.min_margin and result.gbs > 0
    assert maths.per_gpu[0].max_err < maths.per_gpu[0].tol / 5
    assert memory_hint_gb(80.0, maths, timing) == 80.0


def test_two_gpus_are_verified_independently(policy) -> None:
    challenge = _challenge(n=256, passes=3).model_copy(update={"gpu_count": 2})
    maths, timing = run_round(MemoryEngine("cpu", 2), challenge, policy)
    assert maths.ok and timing.ok and len(maths.per_gpu) == 2


def test_prover_regenerating_a_per_pass_is_caught_by_time(policy) -> None:
    maths, timing = run_round(Regenerator("cpu", 2), _challenge(), policy)
    assert maths.ok  # its answers are right...
    assert not timing.ok and timing.caught_by == "time"  # ...but far too slow
    assert "below regenerating A" in timing.reasons[0]
    assert memory_hint_gb(80.0, maths, timing) is None


def test_prover_with_half_the_memory_is_caught_by_time(policy) -> None:
    maths, timing = run_round(HalfMemory("cpu", 2), _challenge(), policy)
    assert maths.ok
    assert not timing.ok and timing.caught_by == "time"


def test_prover_skipping_passes_is_caught_by_mathematics(policy) -> None:
    maths, timing = run_round(PassSkipper("cpu", 2), _challenge(), policy)
    assert timing.ok  # skipping is fast...
    assert not maths.ok and maths.caught_by == "mathematics"
    assert "passes [2, 4] wrong" in maths.reasons[0]


def test_prover_storing_a_in_fp16_is_caught_by_mathematics(policy) -> None:
    maths, _ = run_round(HalfPrecision("cpu", 2), _challenge(n=1024, passes=2), policy)
    assert not maths.ok and maths.caught_by == "mathematics"
    assert maths.per_gpu[0].max_err > 3 * maths.per_gpu[0].tol


def test_torch_generator_is_bit_identical_to_numpy() -> None:
    rows, cols = index_values(11, 5, 7), index_values(12, 0, 300)
    expected = expensive_block_np(rows, cols, 9)
    got = expensive_block_torch(
        torch.from_numpy(rows.view(np.int64)), torch.from_numpy(cols.view(np.int64)), 9
    )
    assert np.array_equal(expected, got.numpy())
    assert expected.min() >= -1.0 and expected.max() < 1.0 and abs(float(expected.std()) - 0.577) < 0.05


def test_tampered_vector_fails_leaf_check(policy) -> None:
    challenge = _challenge(n=128, passes=2)
    engine = MemoryEngine("cpu", 1)
    commitment = commit(engine, challenge)
    request = choose_memory_openings(challenge, 2, rng=np.random.default_rng(1))
    raw = engine.open(request.model_dump())
    raw["per_gpu"][0]["vectors"][0] = raw["per_gpu"][0]["vectors"][1]
    verdict = verify_memory(challenge, commitment, request, MemoryOpening.model_validate(raw))
    assert not verdict.ok and "does not match the committed leaf" in verdict.reasons[0]


def test_malformed_inputs_never_raise(policy) -> None:
    challenge = _challenge(n=128, passes=2)
    verdict = verify_memory(challenge, None, None, None)  # type: ignore[arg-type]
    assert not verdict.ok and verdict.reasons[0].startswith("malformed input")
    timing = judge_memory_timing(challenge, 0.0, [[3.0, 1.0]], policy)
    assert not timing.ok and "ordered pass arrivals" in timing.reasons[0]
    assert not judge_memory_timing(challenge, 0.0, "nonsense", policy).ok  # type: ignore[arg-type]
    early = judge_memory_timing(challenge, 2.0, [[1.0, 3.0]], policy)
    assert not early.ok and "before the start was sent" in early.reasons[0]


def test_streaming_from_host_is_caught_by_bandwidth_floor() -> None:
    challenge = _challenge(n=4096, passes=3)  # 64 MiB of A
    slow = judge_memory_timing(
        challenge, 0.0, [[0.01, 0.02, 0.03]], MemoryPolicy(max_regen_rate=1e9, host_stream_gbs=64.0)
    )
    assert not slow.ok and "streaming A from host memory" in slow.reasons[0]  # 6.7 GB/s


@pytest.mark.parametrize(
    ("memory_gb", "bandwidth", "n", "rounds"),
    [(80.0, 3350.0, 109536, 39), (40.0, 1555.0, 77456, 83), (24.0, 1008.0, 59984, 127)],
)
def test_plan_sizes_a_to_memory_and_rounds_to_bandwidth(memory_gb, bandwidth, n, rounds) -> None:
    challenge = plan_memory(memory_gb, bandwidth, rng=np.random.default_rng(0))
    assert (challenge.n, challenge.hash_rounds) == (n, rounds)
    assert challenge.matrix_bytes <= 0.6 * memory_gb * 1e9
    assert challenge.matrix_bytes > 40e9 if memory_gb == 80.0 else True  # an A100 40GB cannot hold it


class HoldBack(MemoryEngine):
    """Honest passes, but every pass line is held back and released together at the end."""

    def commit(self, request, emit=None):
        held: list[dict] = []
        out = super().commit(request, held.append)
        for line in held:
            emit(line)
        return out


def test_buffered_pass_lines_are_rejected_by_time(policy) -> None:
    held_policy = dataclasses.replace(policy, max_lead_s=0.0)  # in-process: no round trip to allow for
    maths, timing = run_round(HoldBack("cpu", 2), _challenge(n=1024, passes=8), held_policy)
    assert maths.ok  # the answers are right...
    assert not timing.ok and timing.caught_by == "time"  # ...but the arrivals say nothing of the passes
    assert "pass lines were buffered" in timing.reasons[0], timing.reasons


def test_passes_computed_slowly_and_released_paced_are_bounded_from_the_start(policy) -> None:
    """A prover regenerating A per pass (regen = 40 ms) sends nothing until done, then paces its lines
    as if each pass took 1 ms: the spacing looks fine, the time since the start does not."""
    challenge = _challenge(n=512, passes=8)
    regen = challenge.n**2 * challenge.hash_rounds / policy.max_regen_rate
    done = 10.0 + challenge.passes * regen
    arrivals = [[done + 0.001 * r for r in range(challenge.passes)]]
    timing = judge_memory_timing(challenge, 10.0, arrivals, policy)
    assert not timing.ok and any("below regenerating A" in r for r in timing.reasons), timing.reasons
    honest = [[10.0 + regen / 8 * (r + 1) for r in range(challenge.passes)]]
    assert judge_memory_timing(challenge, 10.0, honest, policy).ok


def test_bunched_arrivals_against_the_table_bandwidth_are_buffered() -> None:
    challenge = _challenge(n=4096, passes=4)  # 67 MB: 3 TB/s reads it in 22 us
    policy = MemoryPolicy(max_regen_rate=1e9, host_stream_gbs=0.0)
    bunched = judge_memory_timing(challenge, 0.0, [[0.1, 0.100001, 0.100002, 0.100003]], policy, 3000.0)
    assert not bunched.ok and "pass lines were buffered" in bunched.reasons[0]
    paced = judge_memory_timing(challenge, 0.0, [[25e-6, 50e-6, 75e-6, 100e-6]], policy, 3000.0)
    assert paced.ok, paced.reasons


def test_chain_depends_on_the_start_nonce_sent_after_the_build() -> None:
    challenge = _challenge(n=128, passes=2)
    other = challenge.model_copy(update={"start": "ab" * 16})
    assert "start" not in challenge.build_message()
    assert commit(MemoryEngine("cpu", 1), challenge).leaves != commit(MemoryEngine("cpu", 1), other).leaves
    engine = MemoryEngine("cpu", 1)
    with pytest.raises(Exception, match="memory_build before memory_commit"):
        engine.commit(challenge.start_message())
