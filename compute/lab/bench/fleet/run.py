"""The fleet benchmark's validator side: one real round (``RoundLoop.run_step``) over N simulated miners.

This process is the validator, built as ``neurons/validator.py`` builds it (simulated chain, store,
signed client, GPU table, round loop with the production ``RoundParams`` defaults) and driven through
the round's public entry point, so it measures whatever the round does today. Its secret draws are
predictable for the benchmark's prover (``compute.pog.draws.predictable_draws``), nothing else
changes. The miners run in a child process (``miners.py``).

``steady=True`` seeds the store with ``sustained_every`` past rounds in which every miner was
verified, staggered so that the round measured is a steady-state one: every miner proves GEMM (fp16,
fp32), memory and scaling, and one in ``sustained_every`` also the sustained run and the host
probes (a first round -- ``steady=False`` -- runs those for everyone).
"""

from __future__ import annotations

import ipaddress
import os
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from bittensor.sp_core import Keypair

from compute.lab.bench.fleet.miners import peak_rss_mb
from compute.lab.bench.fleet.monitor import (
    ControlLoop,
    GcPauses,
    LoopLag,
    SpoolWatch,
    StackSampler,
    percentiles,
)

NETUID = 27
STAGE_TIMINGS = ("fp16_s", "fp32_s", "memory_s", "scaling_s", "sustained_s", "probes_s", "total_s")


@dataclass(frozen=True)
class FleetOptions:
    miners: int = 256
    gpus: int = 8
    concurrency: int = 16
    verify_workers: int = -1  # -1: one per core, 0: a thread
    canary_rate: float = 0.1
    steady: bool = True
    miner_timeout: float = 600.0
    sustained_seconds: float = 60.0


def _clock_figures() -> tuple[float, float, int | None]:
    """(CPU seconds, peak RSS MB, niceness) of the validator's timing process (``session.clock``: it
    holds the leases' SSH sessions and stamps their lines, so SSH decryption is counted there)."""
    import psutil

    from compute.validator.session.clock import Clock

    try:
        process = psutil.Process(Clock.shared().pid)
        times = process.cpu_times()
        return times.user + times.system, peak_rss_mb(process.pid), process.nice()
    except (psutil.Error, OSError):
        return 0.0, 0.0, None


def _spool_dir() -> str | None:
    """The timing process's spool directory, once it runs (big opening lines wait there)."""
    from compute.validator.session.clock import Clock

    clock = Clock._shared
    return clock.spool_dir if clock is not None and clock.alive else None


def _seed_history(store, miners: list[dict], gpus: int, every: int) -> None:
    """``every`` past rounds, miner i verified (with its GPU UUIDs) in round ``i % every + 1``."""
    from compute.store import PogResult, ScoreUpdate

    for r in range(every):
        record = store.begin_round(r)
        done = [(i, m) for i, m in enumerate(miners) if i % every == r]
        for i, miner in done:
            store.record_result(
                PogResult(
                    round_id=record.round_id,
                    uid=miner["uid"],
                    hotkey=miner["hotkey"],
                    ok=True,
                    sample=1.0,
                    gpu_count=gpus,
                    gpu_uuids=tuple(f"GPU-m{i}-{g:02d}" for g in range(gpus)),
                    depth_round=record.round_id,
                    block=r,
                    created=time.time(),
                )
            )
        store.finish_round(record.round_id, [ScoreUpdate(m["uid"], m["hotkey"], 1.0) for _, m in done])


def _timing_errors(results, timed: list[dict]) -> list[float]:
    """Validator-timed commit minus the prover's own hold, per (miner, precision): the clock's error."""
    held: dict[tuple[str, str], float] = {}  # the fastest of a precision's runs: the one the validator kept
    for t in timed:
        if t["op"] == "commit":
            key = (t["owner"], t["precision"])
            held[key] = min(held.get(key, t["held_s"]), t["held_s"])
    errors = []
    for result in results:
        for precision in ("fp16", "fp32"):
            measured = result.timings.get(f"{precision}_s")
            if measured is not None and (result.hotkey, precision) in held:
                errors.append(max(0.0, measured - held[(result.hotkey, precision)]))
    return errors


def _pool_figures(workers: int) -> tuple[float, float, int]:
    """(CPU seconds, summed peak RSS MB, jobs) of this process's verification pool workers."""
    import psutil

    from compute.pog import shared_pool

    pool = shared_pool(workers) if workers > 0 else None
    cpu, rss = 0.0, 0.0
    for pid in pool.pids() if pool is not None else []:
        try:
            times = psutil.Process(pid).cpu_times()
            cpu += times.user + times.system
            rss += peak_rss_mb(pid)
        except psutil.Error:
            pass
    return cpu, rss, 0 if pool is None else pool.jobs_pooled


async def run_round(options: FleetOptions, root: Path, miners: list[dict], seed: bytes) -> dict:
    """Run one round over ``miners`` (``{"hotkey", "port"}``) and measure it (see the module docstring)."""
    from compute.chain import SimChainState, connect
    from compute.chain.sim.records import AxonUpdate
    from compute.pog.draws import predictable_draws
    from compute.scoring import ScoringConfig, load_gpu_table
    from compute.store import ValidatorStore
    from compute.transport import KeyWallet, MinerClient
    from compute.validator.context import ValidatorContext
    from compute.validator.fleet.oversight import Oversight
    from compute.validator.params import DepthParams, RoundParams
    from compute.validator.round.loop import RoundLoop, settle_heap

    validator = Keypair.create_from_uri("//FleetValidator")
    state = SimChainState.create(root / "chain.db", netuid=NETUID, block_time=1.0)
    # a real subnet has 256 uids, the validator's among them: room for all the miners asked and it
    state.set_hyperparameter(NETUID, "max_uids", max(256, len(miners) + 1))
    state.register(validator.ss58_address, validator.ss58_address, 10_000.0, True)
    loopback = int(ipaddress.IPv4Address("127.0.0.1"))
    for miner in miners:
        miner["uid"] = state.register(miner["hotkey"], miner["hotkey"], 1.0, False)
        state.serve_axon(NETUID, miner["hotkey"], AxonUpdate(loopback, miner["port"], 4, 4, 1))
    chain = connect(f"sim:{root / 'chain.db'}", NETUID)
    store = ValidatorStore(root / "validator.db")
    workers = options.verify_workers if options.verify_workers >= 0 else os.cpu_count() or 1
    depth = DepthParams(sustained_seconds=options.sustained_seconds)
    params = RoundParams(
        round_id=0, block=0, miner_timeout=options.miner_timeout, verify_workers=workers, depth=depth
    )
    if options.steady:
        store.sync_miners((m["uid"], m["hotkey"]) for m in miners)
        _seed_history(store, miners, options.gpus, params.depth.sustained_every)
    client = MinerClient(KeyWallet(validator), timeout=60, max_concurrency=max(64, options.concurrency * 2))
    ctx = ValidatorContext(
        chain,
        store,
        client,
        validator.ss58_address,
        params,
        load_gpu_table(),
        ScoringConfig(),
        oversight=Oversight(canary_rate=options.canary_rate),
        allow_same_ip=True,
    )
    loop = RoundLoop(
        ctx, interval_blocks=1, concurrency=options.concurrency, step_timeout=6 * 3600, show_table=False
    )
    settle_heap()  # as LoopRunner.run does before the validator's loops start
    lag, sampler, collections, spool = LoopLag(), StackSampler(), GcPauses(), SpoolWatch(_spool_dir)
    block = chain.block()
    load_before = os.getloadavg()
    control = ControlLoop()
    lag.start()
    sampler.start()
    collections.start()
    spool.start()
    cpu0, wall0 = time.process_time(), time.monotonic()
    try:
        with predictable_draws(seed):
            await loop.run_step(block)
    finally:
        wall, cpu_main = time.monotonic() - wall0, time.process_time() - cpu0
        sampler.stop()
        collections.stop()
        spool.stop()
        await lag.stop()
        control_lag = control.stop()
    # the instruments' own CPU, taken out of the validator's process (see ``monitor``)
    instruments = sampler.cpu_s + spool.cpu_s + control_lag.pop("cpu_s", 0.0)
    round_id = (params.depth.sustained_every if options.steady else 0) + 1
    results = store.results(round_id)
    await client.aclose()
    store.close()
    chain.close()
    pool_cpu, pool_rss, pooled = _pool_figures(workers)
    clock_cpu, clock_rss, clock_nice = _clock_figures()
    return {
        "wall_s": wall,
        "cpu_main_s": max(0.0, cpu_main - instruments),
        "cpu_instruments_s": instruments,
        "cpu_pool_s": pool_cpu,
        "cpu_clock_s": clock_cpu,
        "rss_main_mb": peak_rss_mb(),
        "rss_pool_mb": pool_rss,
        "rss_clock_mb": clock_rss,
        "clock_nice": clock_nice,
        "jobs_pooled": pooled,
        "spool_peak_mb": spool.peak_bytes / 2**20,  # MiB, as peak_rss_mb
        "spool_peak_files": spool.peak_files,
        "spooled_lines": len(spool.seen),
        "load_before": load_before,
        "load_after": os.getloadavg(),
        "lag": percentiles(lag.samples),
        "gc": percentiles(collections.pauses),
        "control_lag": control_lag,
        "stage_shares": sampler.shares(),
        "top_frames": sampler.top_frames(),
        "results": results,
        "workers": workers,
    }


def stage_walls(results) -> dict[str, float]:
    """Mean validator-clock seconds per stage over the miners that ran it (from ``PogResult.timings``)."""
    out = {}
    for key in STAGE_TIMINGS:
        values = [r.timings[key] for r in results if key in r.timings]
        if values:
            out[key] = round(sum(values) / len(values), 3)
    return out


def proofs(results) -> dict[str, int]:
    """How many miners each proof credited: shows the benchmark's answers passed every judge."""
    return {
        "gemm_fp16_fp32": sum(
            r.ok and r.tflops_fp16 is not None and r.tflops_fp32 is not None for r in results
        ),
        "memory_proven": sum(bool(r.mem_proven_gb) for r in results),
        "scaling_all_gpus_credited": sum(r.credited_gpus == r.gpu_count for r in results if r.gpu_count > 1),
        "sustained_runs": sum("sustained_s" in r.timings for r in results),
        "sustained_unthrottled": sum(
            r.sustained_factor == 1.0 for r in results if "sustained_s" in r.timings
        ),
        "host_cpu": sum("cpu_cores" in r.host for r in results if "probes_s" in r.timings),
        "host_ram": sum("ram_gb" in r.host for r in results if "probes_s" in r.timings),
        "host_disk": sum("disk_gb" in r.host for r in results if "probes_s" in r.timings),
    }


def report(options: FleetOptions, measured: dict, miners_side: dict) -> dict:
    """The benchmark's figures as one JSON-ready object."""
    results = measured["results"]
    cpu = measured["cpu_main_s"] + measured["cpu_pool_s"] + measured["cpu_clock_s"]
    stages = {
        stage: round(share * measured["cpu_main_s"], 2) for stage, share in measured["stage_shares"].items()
    }
    stages["verify in the pool (recomputation)"] = round(measured["cpu_pool_s"], 2)
    stages["timing process (SSH sessions, stamps)"] = round(measured["cpu_clock_s"], 2)
    failures = sorted({r.reasons[0][:160] for r in results if not r.ok and r.reasons})
    notes = Counter(reason[:120] for r in results if r.ok for reason in r.reasons)
    errors = _timing_errors(results, miners_side.get("timed", []))
    late = [t["late_s"] for t in miners_side.get("timed", [])]
    return {
        "miners": options.miners,
        "gpus": options.gpus,
        "tested": len(results),
        "verified": sum(r.ok for r in results),
        "wall_s": round(measured["wall_s"], 1),
        "cpu_s": round(cpu, 1),
        "cpu_main_s": round(measured["cpu_main_s"], 1),
        "cpu_pool_s": round(measured["cpu_pool_s"], 1),
        "cpu_clock_s": round(measured["cpu_clock_s"], 1),
        # the benchmark's own loop-lag timer, stack sampler and spool watch, not in cpu_main_s
        "cpu_instruments_s": round(measured["cpu_instruments_s"], 2),
        "peak_rss_mb": round(measured["rss_main_mb"] + measured["rss_pool_mb"] + measured["rss_clock_mb"], 1),
        "peak_rss_main_mb": round(measured["rss_main_mb"], 1),
        "peak_rss_clock_mb": round(measured["rss_clock_mb"], 1),
        "clock_nice": measured["clock_nice"],  # the timing process's priority (-10 where permitted)
        # big opening lines on their way to the pool, in the timing process's tmpfs spool: memory
        # that no RSS above counts (sampled every 50 ms; peak_rss_mb + this bounds the round's peak)
        "peak_spool_mb": round(measured["spool_peak_mb"], 1),
        "spool_peak_files": measured["spool_peak_files"],
        "spooled_lines": measured["spooled_lines"],
        "loop_lag_ms": measured["lag"],
        "control_loop_lag_ms": measured["control_lag"],
        "gc_pause_ms": measured["gc"],
        "timing_error_ms": percentiles(errors),
        "ssh_sessions_open_max": miners_side.get("ssh_sessions_open_max"),
        "ssh_worker_sessions": miners_side.get("ssh_worker_sessions"),
        "stages_cpu_s": stages,
        "stage_wall_s_per_miner": stage_walls(results),
        "proofs_credited": proofs(results),
        "main_process_top_frames": measured["top_frames"],
        "verify_workers": measured["workers"],
        "verify_jobs_pooled": measured["jobs_pooled"],
        "concurrency": options.concurrency,
        "steady_state": options.steady,
        "load_average_before": [round(x, 2) for x in measured["load_before"]],
        "load_average_after": [round(x, 2) for x in measured["load_after"]],
        "miners_process": {
            "cpu_s": round(miners_side.get("cpu_s", 0.0), 1),
            "peak_rss_mb": round(miners_side.get("peak_rss_mb", 0.0), 1),
            "prover_late_max_s": round(max(late, default=0.0), 3),
            # a memory pass line that left the simulated miner this late reads, on the validator's
            # clock, as a chain begun late: the lockstep judge fails it (the simulation's fault)
            "memory_pass_late_max_s": round(miners_side.get("pass_late_max_s", 0.0), 3),
            # a request read this long after the kernel received it: the provers count from the
            # arrival (``rxstamp``), so this delay is no longer in ``timing_error_ms``
            "request_read_late_max_s": round(miners_side.get("read_late_max_s", 0.0), 3),
            "errors": miners_side.get("errors", []),
        },
        "failures": failures[:10],
        "notes_of_verified": dict(notes.most_common(5)),
    }
