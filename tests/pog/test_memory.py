"""Memory proof v2: honest rounds pass both judges and are credited A's bytes; every cheat is caught
(the verdict names the judge) and credited nothing."""

from __future__ import annotations

import time
import zlib

import numpy as np
import pytest

from compute.pog.memory import (
    MemoryCommitment,
    MemoryEngine,
    MemoryOpening,
    MemoryPolicy,
    choose_memory_openings,
    judge_memory_timing,
    plan_memory,
    proven_bytes,
    verify_memory,
)
from compute.pog.memory.kernel import (
    _mv_blocks,
    elements_np,
    elements_torch,
    product_np,
    product_torch,
    round_keys,
)

ROUNDS = 32


@pytest.fixture(scope="module")
def policy() -> MemoryPolicy:
    """Regeneration rate of THIS CPU (x2 for a cleverer cheat); no host-streaming floor on a CPU."""
    keys = round_keys(b"k" * 16, 0, ROUNDS)
    started = time.perf_counter()
    elements_np(np.arange(64, dtype=np.uint32), np.arange(2048, dtype=np.uint32), keys)
    rate = 64 * 2048 * ROUNDS / (time.perf_counter() - started)
    return MemoryPolicy(max_regen_rate=2 * rate, min_margin=3.0, host_stream_gbs=0.0, max_lead_s=0.002)


def _challenge(n: int = 512, passes: int = 4, gpus: int = 1, seed: int = 7):
    challenge = plan_memory(1.0, 100.0, gpus, passes=passes, rng=np.random.default_rng(seed))
    return challenge.model_copy(update={"n": n, "hash_rounds": ROUNDS})


def run_round(engine: MemoryEngine, challenge, policy, rng_seed: int = 3, start: dict | None = None):
    arrivals: list[list[float]] = [[] for _ in range(challenge.gpu_count)]

    def emit(lines: list[dict]) -> None:
        now = time.perf_counter()
        for line in lines:
            arrivals[line["gpu"]].append(now)

    engine.prepare(challenge.build_message())
    started = time.perf_counter()
    commitment = MemoryCommitment.model_validate(engine.commit(start or challenge.start_message(), emit))
    request = choose_memory_openings(challenge, challenge.passes, rng=np.random.default_rng(rng_seed))
    opening = MemoryOpening.model_validate(engine.open(request.model_dump()))
    maths = verify_memory(challenge, commitment, request, opening, rng=np.random.default_rng(rng_seed))
    timing = judge_memory_timing(challenge, started, arrivals, policy)
    return maths, timing, proven_bytes(challenge, maths, timing)


class Regenerator(MemoryEngine):
    """Keeps nothing resident: regenerates A on every pass (correct answers, slow)."""

    def build(self, spec, gpu):
        return None

    def multiply(self, spec, gpu, a, x):
        return product_np(super().build(spec, gpu), x)


class HalfMemory(MemoryEngine):
    """Memory capped at half of A: keeps the first half of the rows, regenerates the rest per pass."""

    def build(self, spec, gpu):
        return super().build(spec, gpu)[: spec.n // 2].copy()

    def multiply(self, spec, gpu, a, x):
        rest = super().build(spec, gpu)[spec.n // 2 :]  # what the capped prover must recompute
        return np.concatenate([product_np(a, x), product_np(rest, x)])


class HalfMemoryGuessing(HalfMemory):
    """Half of A, and zeros for the rows it does not hold (fast, wrong)."""

    def multiply(self, spec, gpu, a, x):
        return np.concatenate([product_np(a, x), np.zeros(spec.n - len(a), dtype=np.uint32)])


class ThreeBytes(MemoryEngine):
    """Stores 3 bytes per element (75 % of the memory): the low byte is lost."""

    def build(self, spec, gpu):
        a = super().build(spec, gpu)
        return np.ascontiguousarray(a.view(np.uint8).reshape(spec.n, spec.n, 4)[:, :, 1:])

    def multiply(self, spec, gpu, a, x):
        full = np.zeros((spec.n, spec.n, 4), dtype=np.uint8)
        full[:, :, 1:] = a
        return product_np(full.view(np.uint32).reshape(spec.n, spec.n), x)


class Int16Copy(MemoryEngine):
    """A lossy half-size copy: the top 16 bits of every element."""

    def build(self, spec, gpu):
        return (super().build(spec, gpu) >> np.uint32(16)).astype(np.uint16)

    def multiply(self, spec, gpu, a, x):
        return product_np(a.astype(np.uint32) << np.uint32(16), x)


class PassSkipper(MemoryEngine):
    """Computes every other pass; the skipped ones are random vectors (fast, wrong)."""

    def multiply(self, spec, gpu, a, x):
        self.count = getattr(self, "count", 0) + 1
        if self.count % 2 == 0:
            return np.random.default_rng(self.count).integers(0, 2**32, spec.n, dtype=np.uint32)
        return super().multiply(spec, gpu, a, x)


class Collapser(MemoryEngine):
    """Reads A for pass 1 only, then answers zeros (a fixed point of v1's chain)."""

    def multiply(self, spec, gpu, a, x):
        self.count = getattr(self, "count", 0) + 1
        return super().multiply(spec, gpu, a, x) if self.count == 1 else np.zeros(spec.n, np.uint32)


class OneDevice(MemoryEngine):
    """One device posing as two GPUs: room for one resident A, so the other is rebuilt on demand."""

    def build(self, spec, gpu):
        return gpu

    def multiply(self, spec, gpu, a, x):
        if getattr(self, "resident", (None,))[0] != gpu:  # evict the other GPU's A, rebuild this one
            self.resident = (gpu, super().build(spec, gpu))
        return product_np(self.resident[1], x)

    def _pool(self, spec):  # one device: its work runs one GPU after the other
        from concurrent.futures import ThreadPoolExecutor

        return ThreadPoolExecutor(max_workers=1)


def test_honest_prover_passes_both_judges_and_is_credited_a(policy) -> None:
    challenge = _challenge()
    maths, timing, credited = run_round(MemoryEngine("cpu", 1), challenge, policy)
    assert maths.ok and timing.ok, (maths.reasons, timing.reasons)
    assert credited == [challenge.matrix_bytes]
    assert timing.per_gpu[0].margin >= policy.min_margin and timing.per_gpu[0].gbs > 0


def test_two_gpus_hold_their_residents_at_once_and_both_are_credited(policy) -> None:
    challenge = _challenge(gpus=2)
    maths, timing, credited = run_round(MemoryEngine("cpu", 1), challenge, policy)
    assert maths.ok and timing.ok, (maths.reasons, timing.reasons)
    assert credited == [challenge.matrix_bytes] * 2


def test_one_device_posing_as_two_gpus_is_credited_nothing(policy) -> None:
    """Lockstep: every pass of GPU 1 needs GPU 0's leaf of the same pass, so one device holding one
    A must swap (rebuild) it on every pass: time catches it."""
    challenge = _challenge(gpus=2)
    maths, timing, credited = run_round(OneDevice("cpu", 1), challenge, policy)
    assert maths.ok  # the answers are right ...
    assert not timing.ok and timing.caught_by == "time"  # ... but far too slow
    assert credited == [0, 0]


@pytest.mark.parametrize(
    ("engine", "judge"),
    [
        (Regenerator, "time"),
        (HalfMemory, "time"),
        (HalfMemoryGuessing, "mathematics"),
        (ThreeBytes, "mathematics"),
        (Int16Copy, "mathematics"),
        (PassSkipper, "mathematics"),
        (Collapser, "mathematics"),
    ],
)
def test_cheating_prover_is_caught_and_credited_nothing(policy, engine, judge) -> None:
    challenge = _challenge()
    maths, timing, credited = run_round(engine("cpu", 1), challenge, policy)
    verdict = maths if judge == "mathematics" else timing
    assert not verdict.ok and verdict.caught_by == judge, (maths.reasons, timing.reasons)
    assert credited == [0]


def test_replayed_chain_from_another_start_is_caught_by_mathematics(policy) -> None:
    """A prover that ran the chain ahead of time (from a start it guessed or saw before) answers with
    that chain: pass 1 no longer starts from the keyed x_0 of the real start."""
    challenge = _challenge()
    stale = {"challenge_id": challenge.challenge_id, "start": "ab" * 16}
    maths, _, credited = run_round(MemoryEngine("cpu", 1), challenge, policy, start=stale)
    assert not maths.ok and maths.caught_by == "mathematics" and credited == [0]


def test_replayed_transcript_of_an_old_challenge_is_caught(policy) -> None:
    old, new = _challenge(seed=1), _challenge(seed=2)
    engine = MemoryEngine("cpu", 1)
    engine.prepare(old.build_message())
    commitment = engine.commit(old.start_message())
    request = choose_memory_openings(new, 3, rng=np.random.default_rng(0))
    opening = engine.open({**request.model_dump(), "challenge_id": old.challenge_id})
    forged_c = MemoryCommitment.model_validate({**commitment, "challenge_id": new.challenge_id})
    forged_o = MemoryOpening.model_validate({**opening, "challenge_id": new.challenge_id})
    verdict = verify_memory(new, forged_c, request, forged_o)
    assert not verdict.ok and "does not match the committed leaf" in verdict.reasons[0]


def test_elements_have_full_entropy() -> None:
    """Every bit is used: no byte of an element is predictable and zlib finds nothing to remove."""
    block = elements_np(
        np.arange(256, dtype=np.uint32), np.arange(1024, dtype=np.uint32), round_keys(b"e" * 16, 0, 16)
    )
    raw = block.tobytes()
    assert len(zlib.compress(raw, 9)) >= len(raw)
    for lane in range(4):
        counts = np.bincount(block.view(np.uint8).reshape(-1, 4)[:, lane], minlength=256)
        expected = block.size / 256
        assert ((counts - expected) ** 2 / expected).sum() < 400  # chi-square, 255 dof


def test_torch_arithmetic_is_bit_identical_to_numpy() -> None:
    torch = pytest.importorskip("torch", reason="the torch path needs torch (the dev extra installs it)")
    keys = round_keys(b"t" * 16, 1, 40)
    rows, cols = np.arange(10, 74, dtype=np.uint32), np.arange(3000, dtype=np.uint32)
    got = elements_torch(torch.arange(10, 74), torch.arange(3000), keys).numpy().view(np.uint32)
    assert np.array_equal(got, elements_np(rows, cols, keys))
    keys_t = torch.from_numpy(keys.view(np.int32).copy())  # the CUDA build passes the keys once, as a tensor
    assert np.array_equal(
        elements_torch(torch.arange(10, 74), torch.arange(3000), keys_t).numpy().view(np.uint32), got
    )
    a = elements_np(rows, cols[:512], keys)
    x = np.random.default_rng(0).integers(0, 2**32, 512, dtype=np.uint32)
    assert np.array_equal(product_torch(torch.from_numpy(a.view(np.int32)), x), product_np(a, x))
    blocks = _mv_blocks(
        torch.from_numpy(a.view(np.int32)), torch.from_numpy(x.view(np.int32)), torch.int64, 4096
    )
    assert np.array_equal((blocks.numpy() & 0xFFFFFFFF).astype(np.uint32), product_np(a, x))  # CUDA fallback


def test_buffered_pass_lines_are_rejected_by_time(policy) -> None:
    challenge = _challenge(passes=8)
    started = time.perf_counter()
    bunched = [[started + 0.5 + k * 1e-6 for k in range(8)]]
    timing = judge_memory_timing(challenge, started, bunched, policy)
    assert not timing.ok and "buffered" in timing.reasons[0]


def test_pass_line_before_the_start_is_rejected(policy) -> None:
    challenge = _challenge(passes=4)
    timing = judge_memory_timing(challenge, 10.0, [[9.9, 10.1, 10.2, 10.3]], policy)
    assert not timing.ok and "before the start" in timing.reasons[0]


def test_streaming_from_host_is_caught_by_bandwidth_floor() -> None:
    challenge = _challenge(n=4096, passes=4)
    slow = [[1.0 + 0.01 * (k + 1) for k in range(4)]]  # 67 MB per 10 ms: 6.7 GB/s
    timing = judge_memory_timing(challenge, 1.0, slow, MemoryPolicy(max_regen_rate=1e6))
    assert not timing.ok and "host memory" in " ".join(timing.reasons)


@pytest.mark.parametrize(
    ("memory_gb", "bandwidth", "n", "rounds"),
    [(80.0, 3350.0, 126480, 96), (40.0, 1555.0, 89440, 208), (24.0, 1008.0, 69280, 320)],
)
def test_plan_sizes_a_past_half_the_memory_and_rounds_to_bandwidth(memory_gb, bandwidth, n, rounds) -> None:
    challenge = plan_memory(memory_gb, bandwidth)
    assert (challenge.n, challenge.hash_rounds) == (n, rounds)
    assert challenge.matrix_bytes > memory_gb * 1e9 / 2  # two residents never fit one device
    assert challenge.hash_rounds % 16 == 0


def test_malformed_inputs_never_raise(policy) -> None:
    challenge = _challenge()
    engine = MemoryEngine("cpu", 1)
    engine.prepare(challenge.build_message())
    commitment = MemoryCommitment.model_validate(engine.commit(challenge.start_message()))
    request = choose_memory_openings(challenge, 2)
    opening = engine.open(request.model_dump())
    opening["per_gpu"][0]["vectors"][0]["data"] = "AAAA"
    verdict = verify_memory(challenge, commitment, request, MemoryOpening.model_validate(opening))
    assert not verdict.ok and verdict.caught_by == "mathematics"
    assert not judge_memory_timing(challenge, float("nan"), [[1.0] * 4], policy).ok
    assert not judge_memory_timing(challenge, 0.0, [["x"]], policy).ok  # type: ignore[list-item]
