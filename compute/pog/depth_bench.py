"""Figures of the in-depth proofs on this machine: memory passes, sustained ratio, scaling, host probes.

``run_depth_suite(name, device)`` runs one suite in-process the way the validator would (arrival
times on the caller's clock, the same judges) and returns plain figures for the benchmark command
to print. Sizes are small enough for a CI CPU; pass larger ones on a GPU. It prints nothing.
"""

from __future__ import annotations

import os
import tempfile
import time

from .challenge import choose_openings, new_challenge
from .depth_engine import MemoryEngine, SustainedRunner, commit_on_device, expensive_block_np
from .engine import ProverEngine
from .generator import index_values
from .host_probe import check_probe, run_probe
from .memory import (
    MemoryCommitment,
    MemoryOpening,
    MemoryPolicy,
    choose_memory_openings,
    judge_memory_timing,
    plan_memory,
    verify_memory,
)
from .scaling import credited_gpus, scaling_efficiency
from .sustained import analyse_series, plan_sustained
from .verifier import verify
from .wire import Commitment, Opening

SUITES = ("memory", "sustained", "scaling", "host")


def regen_rate(rounds: int, device: str = "cpu") -> float:
    """Element-rounds per second this machine's generator achieves (numpy on CPU)."""
    rows, cols = index_values(1, 0, 64), index_values(2, 0, 4096)
    started = time.perf_counter()
    expensive_block_np(rows, cols, rounds)
    return 64 * 4096 * rounds / (time.perf_counter() - started)


def memory_suite(device: str = "cpu", n: int = 2048, passes: int = 8, rounds: int = 16) -> dict:
    challenge = plan_memory(1.0, 100.0, passes=passes).model_copy(update={"n": n, "hash_rounds": rounds})
    rate = regen_rate(rounds)
    policy = MemoryPolicy(max_regen_rate=2 * rate, host_stream_gbs=0.0 if device == "cpu" else 64.0)
    arrivals: list[list[float]] = [[]]

    def emit(line: dict) -> None:
        arrivals[line["gpu"]].append(time.perf_counter())

    engine = MemoryEngine(device)
    sent = time.perf_counter()
    engine.prepare(challenge.build_message())
    build_s = time.perf_counter() - sent
    started = time.perf_counter()
    commitment = MemoryCommitment.model_validate(engine.commit(challenge.start_message(), emit))
    request = choose_memory_openings(challenge)
    opening = MemoryOpening.model_validate(engine.open(request.model_dump()))
    began = time.perf_counter()
    maths = verify_memory(challenge, commitment, request, opening)
    verify_s = time.perf_counter() - began
    timing = judge_memory_timing(challenge, started, arrivals, policy)
    result = timing.per_gpu[0]
    return {
        "n": n,
        "matrix_mb": challenge.matrix_bytes / 1e6,
        "hash_rounds": rounds,
        "build_s": build_s,
        "pass_ms": result.pass_s * 1e3 if result.pass_s else None,
        "gbs": result.gbs,
        "regen_per_pass_ms": build_s * 1e3,
        "measured_margin": build_s / result.pass_s if result.pass_s else None,
        "bound_margin": result.margin,
        "verify_s": verify_s,
        "maths_ok": maths.ok,
        "time_ok": timing.ok,
    }


def sustained_suite(device: str = "cpu", segments: int = 8) -> dict:
    plan = plan_sustained(0.05, "fp32", duration_s=segments * 0.25, segment_s=0.25, m=512)
    runner = SustainedRunner(ProverEngine(device))
    arrivals: list[float] = []
    lines: list[dict] = []

    def emit(line: dict) -> None:
        arrivals.append(time.perf_counter())
        lines.append(line)

    sent = time.perf_counter()
    runner.run([c.model_dump() for c in plan.challenges()], emit)
    report = analyse_series(sent, arrivals, plan.flops_per_segment)
    index = plan.segments - 1
    challenge, request = plan.segment(index), choose_openings(plan.segment(index))
    commitment = Commitment.model_validate(lines[index]["commitment"])
    ok = verify(
        challenge, commitment, request, Opening.model_validate(runner.open(index, request.model_dump()))
    ).ok
    return {
        "segments": plan.segments,
        "first_tflops": report.first_tflops,
        "last_tflops": report.last_tflops,
        "ratio": report.ratio,
        "factor": report.factor,
        "last_segment_verified": ok,
    }


def scaling_suite(device: str = "cpu", gpus: int = 2, m: int = 512, n: int = 8192) -> dict:
    engine = ProverEngine(device)
    flops = 2.0 * m * n * m
    together = new_challenge("fp32", m, n, m, gpus)
    started = time.perf_counter()
    commitment = Commitment.model_validate(engine.commit(together.model_dump()))
    together_s = time.perf_counter() - started
    request = choose_openings(together)
    verdict = verify(together, commitment, request, Opening.model_validate(engine.open(request.model_dump())))
    alone = []
    for index in range(gpus):
        challenge = new_challenge("fp32", m, n, m, 1)
        started = time.perf_counter()
        commit_on_device(engine, challenge.model_dump(), index if device == "cuda" else 0)
        alone.append(flops / (time.perf_counter() - started) / 1e12)
    together_tflops = [flops / together_s / 1e12] * gpus
    credit = credited_gpus(gpus, [v.ok for v in verdict.per_gpu], together_tflops, alone)
    return {
        "gpus_claimed": gpus,
        "together_tflops": sum(together_tflops),
        "alone_tflops": alone,
        "efficiency": scaling_efficiency(together_tflops, alone),
        "credited": credit.credited,
    }


def host_suite(ram_mb: int = 256, disk_mb: int = 64) -> dict:
    seed = os.urandom(16).hex()
    figures: dict[str, bool | float] = {}
    with tempfile.TemporaryDirectory() as path:
        requests = [
            {"what": "cpu", "seed": seed, "chains": os.cpu_count() or 1, "steps": 2000},
            {"what": "ram", "seed": seed, "bytes": ram_mb << 20},
            {"what": "disk", "seed": seed, "bytes": disk_mb << 20, "path": path},
        ]
        for request in requests:
            started = time.perf_counter()
            result = run_probe(request)
            check = check_probe(request, result, time.perf_counter() - started)
            what = request["what"]
            figures[f"{what}_ok"] = check.ok
            figures[f"{what}_s"] = time.perf_counter() - started
            if what == "cpu":
                figures.update(cpu_cores=check.value, cpu_sha256_gbs=check.rate)
            else:
                figures[f"{what}_gb"] = check.value
                if what == "disk":
                    figures["disk_write_mbs"] = check.rate
    return figures


def run_depth_suite(name: str, device: str = "cpu") -> dict:
    if name == "memory":
        return memory_suite(device)
    if name == "sustained":
        return sustained_suite(device)
    if name == "scaling":
        return scaling_suite(device)
    if name == "host":
        return host_suite()
    raise ValueError(f"unknown suite {name!r}: expected one of {SUITES}")


__all__ = ["SUITES", "regen_rate", "run_depth_suite"]
