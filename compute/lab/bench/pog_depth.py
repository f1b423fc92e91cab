"""Figures of the in-depth proofs on this machine: memory passes, sustained ratio, scaling, host probes.

``run_depth_suite(name, device)`` runs one suite in-process the way the validator would (arrival
times on the caller's clock, the same judges) and returns plain figures for the benchmark command
to print. Sizes are small enough for a CI CPU; pass larger ones on a GPU. It prints nothing.
"""

from __future__ import annotations

import os
import tempfile
import time

import numpy as np

from compute.pog.challenge import choose_openings, new_challenge
from compute.pog.depth_engine import SustainedRunner, commit_on_device
from compute.pog.engine import ProverEngine
from compute.pog.host import (
    DiskProbe,
    HostPolicy,
    check_cpu,
    check_disk,
    cpu_request,
    disk_read_request,
    disk_write_request,
    probe_cpu,
    ram_challenge,
)
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
from compute.pog.memory.cpu_kernel import cpu_backend
from compute.pog.memory.kernel import elements_np, product_np, round_keys
from compute.pog.scaling import credited_gpus, scaling_efficiency
from compute.pog.sustained import analyse_series, plan_sustained
from compute.pog.verifier import verify
from compute.pog.wire import Commitment, Opening
from compute.scoring import load_gpu_table

SUITES = ("memory", "sustained", "scaling", "host")
H100_FUSED_RATE = 2.3e12  # element-rounds/s of the torch.compile'd generator, measured on an H100 SXM


def regen_rate(rounds: int = 32) -> float:
    """Element-rounds per second this machine's numpy generator achieves (the validator's cost)."""
    keys = round_keys(b"bench-rate-key!!", 0, rounds)
    started = time.perf_counter()
    elements_np(np.arange(64, dtype=np.uint32), np.arange(4096, dtype=np.uint32), keys)
    return 64 * 4096 * rounds / (time.perf_counter() - started)


def _memory_round(engine: MemoryEngine, challenge, policy) -> tuple:
    arrivals: list[list[float]] = [[] for _ in range(challenge.gpu_count)]
    started_build = time.perf_counter()
    engine.prepare(challenge.build_message())
    build_s = time.perf_counter() - started_build
    started = time.perf_counter()

    def emit(lines: list[dict]) -> None:
        now = time.perf_counter()
        for line in lines:
            arrivals[line["gpu"]].append(now)

    commitment = MemoryCommitment.model_validate(engine.commit(challenge.start_message(), emit))
    request = choose_memory_openings(challenge)
    opening = MemoryOpening.model_validate(engine.open(request.model_dump()))
    began = time.process_time()  # the validator's CPU, the figure its budget is about
    maths = verify_memory(challenge, commitment, request, opening)
    verify_s = time.process_time() - began
    return build_s, maths, judge_memory_timing(challenge, started, arrivals, policy), verify_s


def _table_margins(rate: float) -> dict:
    """Per table GPU: the plan, the pass at table bandwidth, regeneration at the policy's rate and at
    the rate measured on an H100, host streaming, and the validator's numpy cost per GPU."""
    policy, out = MemoryPolicy(), {}
    for name, model in sorted(load_gpu_table().models.items()):
        plan = plan_memory(model.memory_gb, model.bandwidth_gbs)
        pass_s = plan.matrix_bytes / (model.bandwidth_gbs * 1e9)
        elements = plan.n**2 * plan.hash_rounds
        out[name] = {
            "n": plan.n,
            "hash_rounds": plan.hash_rounds,
            "pass_ms": pass_s * 1e3,
            "margin_vs_policy_rate": elements / policy.max_regen_rate / pass_s,
            "margin_vs_h100_measured_rate": elements / H100_FUSED_RATE / pass_s,
            "margin_vs_host_stream": model.bandwidth_gbs / policy.host_stream_gbs,
            "validator_verify_s": 8 * plan.n * plan.hash_rounds / rate,
        }
    return out


def memory_suite(device: str = "cpu", n: int = 2048, passes: int = 8, rounds: int = 32) -> dict:
    """Honest v2 round on this device, and the cheats: regenerate per pass, half resident (rest
    regenerated), a 3-byte copy (exact check); margin = fastest cheat / honest pass."""
    rate = regen_rate(rounds)
    policy = MemoryPolicy(max_regen_rate=2 * rate, host_stream_gbs=0.0 if device == "cpu" else 64.0)
    challenge = plan_memory(1.0, 100.0, passes=passes).model_copy(update={"n": n, "hash_rounds": rounds})
    engine = MemoryEngine(device)
    build_s, maths, timing, verify_s = _memory_round(engine, challenge, policy)
    result = timing.per_gpu[0]
    pass_s = result.pass_s or float("nan")
    keys = round_keys(bytes.fromhex(challenge.key), 0, rounds)
    a = elements_np(np.arange(n, dtype=np.uint32), np.arange(n, dtype=np.uint32), keys)
    x = np.arange(n, dtype=np.uint32)
    started = time.perf_counter()
    half = elements_np(np.arange(n // 2, dtype=np.uint32), np.arange(n, dtype=np.uint32), keys)
    product_np(half, x)
    half_pass_s = time.perf_counter() - started + pass_s / 2
    three_bytes = a & np.uint32(0xFFFFFF00)
    return {
        "n": n,
        "matrix_mb": challenge.matrix_bytes / 1e6,
        "hash_rounds": rounds,
        "build_s": build_s,
        "pass_ms": pass_s * 1e3,
        "gbs": result.gbs,
        "regen_rate_per_s": rate,
        "cheat_regenerate_pass_ms": build_s * 1e3,
        "cheat_half_resident_pass_ms": half_pass_s * 1e3,
        "cheat_three_byte_copy": "caught (exact)"
        if not np.array_equal(product_np(three_bytes, x), product_np(a, x))
        else "passed",
        "cheat_host_streamed": "n/a on cpu" if device == "cpu" else f"floor {policy.host_stream_gbs} GB/s",
        "margin_over_fastest_cheat": min(build_s, half_pass_s) / pass_s,
        "bound_margin": result.margin,
        "verify_s": verify_s,
        "maths_ok": maths.ok,
        "time_ok": timing.ok,
        "credited_bytes": proven_bytes(challenge, maths, timing)[0],
        "per_table_gpu": _table_margins(rate),
    }


def gemm_round_tflops(engine: ProverEngine, precision: str, m: int, n: int, p: int) -> float:
    """The GEMM round's throughput as the validator times it (warm-up off the clock, commit on it)."""
    challenge = new_challenge(precision, m, n, p, 1)  # type: ignore[arg-type]
    engine.warm_up(challenge.model_dump())
    started = time.perf_counter()
    engine.commit(challenge.model_dump())
    return 2.0 * m * n * p / (time.perf_counter() - started) / 1e12


def sustained_suite(device: str = "cpu", segments: int = 8, width: int = 512, gemm_n: int = 8192) -> dict:
    """A sustained run like the validator's on a CPU (segments of the GEMM round's ``width``), and
    ``segment_over_gemm``: the median segment's throughput / the GEMM round's (the localnet shape,
    ``width`` x ``gemm_n`` x ``width``): the calibration of ``sustained.reference_fractions`` (the
    last window of an honest, unthrottled device is compared with fraction x GEMM). On CUDA the
    segments are the validator's fp16 ones (2048 wide) against its 8192-wide GEMM round."""
    engine = ProverEngine(device)
    if device == "cuda":
        gemm = gemm_round_tflops(engine, "fp16", 8192, 1 << 20, 8192)
        plan = plan_sustained(gemm, "fp16", duration_s=segments * 2.0, segment_s=2.0)
    else:
        gemm = gemm_round_tflops(engine, "fp32", width, gemm_n, width)
        plan = plan_sustained(gemm, "fp32", duration_s=segments * 0.25, segment_s=0.25, m=width)
    runner = SustainedRunner(engine)
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
        "gemm_tflops": gemm,
        "first_tflops": report.first_tflops,
        "last_tflops": report.last_tflops,
        "first_over_gemm": report.first_tflops / gemm,
        "segment_over_gemm": float(np.median(report.tflops)) / gemm,
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


def host_suite(ram_mb: int = 16, disk_mb: int = 64) -> dict:
    """CPU, RAM and disk proofs in-process; ``validator_cpu_s``: the validator's CPU time for all
    three checks (target <= 0.05 s per miner)."""
    figures: dict = {}
    request = cpu_request(os.cpu_count() or 1, 32)
    started = time.perf_counter()
    result = probe_cpu(request)
    elapsed = time.perf_counter() - started
    cpu0 = time.process_time()
    cpu = check_cpu(request, result, elapsed)
    validator_cpu = time.process_time() - cpu0
    figures.update(cpu_ok=cpu.ok, cpu_cores=cpu.value, cpu_sha256_gbs=cpu.rate, cpu_check_s=validator_cpu)
    cores = os.cpu_count() or 1
    ram, ram_policy = ram_challenge(ram_mb / 1000, cores)
    build_s, maths, timing, verify_s = _memory_round(MemoryEngine("cpu"), ram, ram_policy)
    validator_cpu += verify_s
    figures.update(
        ram_gb=proven_bytes(ram, maths, timing)[0] / 1e9,
        ram_check_s=verify_s,
        ram_cores=cores,
        ram_hash_rounds=ram.hash_rounds,
        ram_build_s=build_s,
        ram_pass_ms=(timing.per_gpu[0].pass_s or 0.0) * 1e3 if timing.per_gpu else None,
        ram_regen_bound_ms=ram.n**2 * ram.hash_rounds / ram_policy.max_regen_rate * 1e3,
        ram_margin=timing.per_gpu[0].margin if timing.per_gpu else None,
        ram_backend=cpu_backend(),
    )
    with tempfile.TemporaryDirectory() as path:
        probe, write = DiskProbe(), {**disk_write_request(disk_mb << 20), "path": path}
        started = time.perf_counter()
        written = probe.write(write)
        write_s = time.perf_counter() - started
        read_request = disk_read_request(written["bytes"] // 4096)
        started = time.perf_counter()
        back = probe.read(read_request)
        read_s = time.perf_counter() - started
        cpu0 = time.process_time()
        disk = check_disk(write, written, write_s, read_request, back, read_s, HostPolicy())
        disk_check_s = time.process_time() - cpu0
    validator_cpu += disk_check_s
    figures.update(
        disk_ok=disk.ok,
        disk_gb=disk.value,
        disk_write_gbs=disk.rate,
        disk_read_ms=read_s * 1e3,
        disk_regen_bound_ms=(max(read_request["blocks"]) + 1)
        * 4096
        / (HostPolicy().max_core_gbs * 1e9)
        * 1e3,
        disk_check_s=disk_check_s,
        validator_cpu_s=validator_cpu,
    )
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


def main(argv: list[str] | None = None) -> int:
    import argparse
    import json
    import sys

    from compute.lab.report import table

    parser = argparse.ArgumentParser(
        prog="python -m compute bench pog-depth", description=__doc__.split("\n")[0]
    )
    parser.add_argument(
        "--device", choices=("auto", "cpu", "cuda"), default="auto", help="cuda, else the CPU"
    )
    parser.add_argument(
        "--suite",
        choices=(*SUITES, "depth"),
        default="depth",
        help="one in-depth suite, or depth = all four (default)",
    )
    parser.add_argument("--json", action="store_true", help="one JSON object instead of tables")
    args = parser.parse_args(argv)
    device = "cuda" if args.device == "cuda" else "cpu"
    names = SUITES if args.suite == "depth" else (args.suite,)
    results = {name: run_depth_suite(name, device) for name in names}
    if args.json:
        sys.stdout.write(json.dumps(results, default=str) + "\n")
        return 0
    for name, figures in results.items():
        table(f"Proof-of-GPU {name} suite ({device})", figures)
    return 0
