"""``python -m compute bench distance``: an honest miner proven from near and far, under load.

One honest miner (signed app, embedded backend, real SSH and worker) runs in a child process; this
process tests it with the real ``check_miner`` through the userspace latency proxy at each round
trip (``--latencies``, +/- ``--jitter`` per chunk and direction), the latencies interleaved round
after round so the machine's own load drifts alike over all of them. With ``--flood`` a real
dashboard is served on this validator's own loop (the worst case: the validator runs it in a child
process) and flooded over HTTP by ``--clients`` threads for the whole run; ``--parse-load`` keeps
a thread parsing a 16-GPU opening's worth of JSON (holding the GIL). Per round trip it prints
the false negatives (failed tests of the honest miner), the mean sample and fp32 TFLOPS, the
sample relative to the nearest round trip, and the round trip measured in the session.

``--far-gpu`` runs another lane instead (``compute.lab.bench.far_gpu``): honest GPU seats of every
table class far away, their return delay rising by a second after the pings, and one device serving
two chains, through the validator's chain plan and judges (a GPU seat cannot be emulated end to end
here).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import Any

from compute.lab.bench.validator import _listening_socket

PROXY = Path(__file__).resolve().parents[2] / "localnet" / "latency_proxy.py"


async def _serve_miner(root: Path, pace_gflops: float = 0.0, device_fraction: float = 0.0) -> None:
    """Child: one honest miner; prints its endpoint as a JSON line, exits on stdin EOF. With
    ``device_fraction``, its memory passes run on ``localnet.one_device``'s emulated device at that
    fraction of the CPU table's bandwidth (a device of fixed speed keeping its pace)."""
    from bittensor.sp_core import Keypair

    from compute.allocation import AllocationManager, EmbeddedBackend, LeaseStore, ManagerLimits
    from compute.localnet.one_device import TABLE_GBS, device_bin
    from compute.miner import build_miner_app
    from compute.miner.specs import fixed_specs
    from compute.transport import KeyWallet, ServerLimits, serve

    keypair = Keypair.create_from_uri("//DistanceMiner")
    prefix = []
    if device_fraction > 0:
        prefix = [device_bin(root / "bins", root / "device.lock", "wait-build", TABLE_GBS * device_fraction)]
    backend = EmbeddedBackend(
        root / "miner",
        bind_host="127.0.0.1",
        port_range=(46800, 46830),
        pace_gflops=pace_gflops,
        path_prefix=prefix,
    )
    manager = AllocationManager(
        LeaseStore(root / "miner" / "leases.db"), backend, [], ManagerLimits(max_cpu=2, max_memory_gb=4)
    )
    specs = fixed_specs([], cpu_model="bench", cpu_cores=1, miner_version="bench")
    app = build_miner_app(
        KeyWallet(keypair), None, manager, lambda: specs, ServerLimits(rate_per_s=1000, burst=1000)
    )
    sock = _listening_socket()
    stop = asyncio.Event()
    task = asyncio.create_task(serve(app, "127.0.0.1", sock.getsockname()[1], stop, sock=sock))
    await asyncio.sleep(1.0)
    print(json.dumps({"hotkey": keypair.ss58_address, "port": sock.getsockname()[1]}), flush=True)
    await asyncio.to_thread(sys.stdin.read)
    stop.set()
    await asyncio.gather(task, return_exceptions=True)


def _parse_load(stop: threading.Event) -> int:
    """Hold this process's GIL as parsing one 16-GPU memory opening does (~64 MB of JSON), again
    and again: what the validator's other work does to a clock that lives in its process."""
    import base64
    import os

    blob = json.dumps([base64.b64encode(os.urandom(1 << 20)).decode() for _ in range(48)])
    parsed = 0
    while not stop.is_set():
        json.loads(blob)
        parsed += 1
    return parsed


def _flood(url: str, stop: threading.Event) -> int:
    import httpx

    pages = 0
    with httpx.Client(timeout=30) as client:
        while not stop.is_set():
            try:
                client.get(url)
                pages += 1
            except httpx.HTTPError:
                pass
    return pages


def _base_params(args: argparse.Namespace) -> Any:
    from compute.validator.params import RoundParams

    return RoundParams(
        round_id=1,
        block=1,
        miner_timeout=args.miner_timeout,
        retries=0,
        pog_m=args.m,
        pog_n=args.n,
        pog_p=args.p,
        device="cpu",
        lease_seconds=300,
        distance_share=args.share,
        min_timed_s=args.min_timed,
    )


async def _bench(args: argparse.Namespace, root: Path, miner: dict) -> dict[str, Any]:
    from bittensor.sp_core import Keypair

    from compute.dashboard import serve_dashboard
    from compute.scoring import ScoringConfig, load_gpu_table
    from compute.store import ValidatorStore
    from compute.transport import KeyWallet, MinerClient
    from compute.validator.check.context import MinerCheck
    from compute.validator.check.miner import check_miner
    from compute.validator.params import MinerTarget

    client = MinerClient(KeyWallet(Keypair.create_from_uri("//DistanceValidator")), timeout=60)
    target = MinerTarget(1, miner["hotkey"], f"127.0.0.1:{miner['port']}")
    base = _base_params(args)
    stop, pages = threading.Event(), 0
    pool = ThreadPoolExecutor(max(1, args.clients))
    floods, dashboard = [], None
    if args.flood:
        ValidatorStore(root / "dash.db").close()
        sock = _listening_socket()
        port = sock.getsockname()[1]
        sock.close()
        dashboard = serve_dashboard(root / "dash.db", "127.0.0.1", port, asyncio.Event())
        await asyncio.sleep(0.5)
        floods = [pool.submit(_flood, f"http://127.0.0.1:{port}/", stop) for _ in range(args.clients)]
    parser = threading.Thread(target=_parse_load, args=(stop,), daemon=True) if args.parse_load else None
    if parser is not None:
        parser.start()
    runs: dict[float, list[Any]] = {rtt: [] for rtt in args.latencies}
    table, scoring = load_gpu_table(), ScoringConfig()
    started = time.monotonic()
    try:
        for round_id in range(1, args.rounds + 1):
            for rtt in args.latencies:
                proxy = (
                    (sys.executable, str(PROXY), "--rtt-ms", f"{rtt:g}", "--jitter", f"{args.jitter:g}")
                    + ("{host}", "{port}")
                    if rtt > 0
                    else ()
                )
                params = replace(base, round_id=round_id, lease_proxy=proxy)
                result = await check_miner(MinerCheck(client, target, params, table, scoring))
                runs[rtt].append(result)
    finally:
        stop.set()
        if floods:
            pages = sum(await asyncio.gather(*(asyncio.wrap_future(f) for f in floods)))
        pool.shutdown()
        if dashboard is not None:
            await dashboard.close()
        await client.aclose()
    return _summary(args, runs, pages, time.monotonic() - started)


def _late_for_gpu_slack(result: Any) -> bool:
    """Whether the chain began later than a GPU seat's slack (RTT capped + ``lead_slack_s``) allows:
    the tests the CPU seat's wider slack (``LockstepParams.cpu_lead_slack_s``) kept from failing."""
    from compute.validator.params import LockstepParams

    policy, timings = LockstepParams(), result.timings
    if "lead_s" not in timings:
        return False
    return timings["lead_s"] > min(timings.get("rtt_s", 0.0), policy.rtt_cap_s) + policy.lead_slack_s


def _summary(args: argparse.Namespace, runs: dict[float, list[Any]], pages: int, wall: float) -> dict:
    rows: list[dict[str, Any]] = []
    for rtt, results in runs.items():
        passed = [r for r in results if r is not None and r.ok]
        rows.append(
            {
                "rtt_ms": rtt,
                "rounds": len(results),
                "false_negatives": len(results) - len(passed),
                "failures": sorted({r.reasons[0] for r in results if r is not None and not r.ok})[:3],
                "mean_sample": statistics.fmean(r.sample for r in passed) if passed else 0.0,
                "mean_tflops_fp32": statistics.fmean(r.tflops_fp32 or 0 for r in passed) if passed else 0.0,
                "tflops_fp32": [round(r.tflops_fp32 or 0, 5) for r in passed],  # each round's, in order
                "sustained_factor": [r.sustained_factor for r in passed],  # a CPU's: its neighbours' load
                "mem_gbs": [round(r.mem_gbs or 0, 3) for r in passed],
                "memory_proven": sum(bool(r.mem_proven_gb) for r in passed),
                "measured_rtt_ms": statistics.median(r.timings.get("rtt_s", 0) * 1e3 for r in passed)
                if passed
                else None,
                "fp32_s": statistics.median(r.timings.get("fp32_s", 0) for r in passed) if passed else None,
                "lead_s_max": max(
                    (r.timings.get("lead_s", 0.0) for r in results if r is not None), default=None
                ),
                "late_for_gpu_slack": sum(_late_for_gpu_slack(r) for r in results if r is not None),
            }
        )
    near = float(rows[0]["mean_sample"]) or 1.0
    near_tflops = float(rows[0]["mean_tflops_fp32"]) or 1.0
    for row in rows:
        row["credit_vs_nearest"] = round(float(row["mean_sample"]) / near, 4)
        row["tflops_vs_nearest"] = round(float(row["mean_tflops_fp32"]) / near_tflops, 4)
    return {
        "rows": rows,
        "false_negatives": sum(row["false_negatives"] for row in rows),
        "flood": args.flood,
        "flood_pages": pages,
        "parse_load": args.parse_load,
        "distance_share": args.share,
        "min_timed_s": args.min_timed,
        "pace_gflops": args.pace_gflops,
        "jitter": args.jitter,
        "shape": [args.m, args.n, args.p],
        "wall_s": round(wall, 1),
    }


async def _far_e2e(args: argparse.Namespace, root: Path, miner: dict) -> dict[str, Any]:
    from bittensor.sp_core import Keypair

    from compute.lab.bench.far_e2e import far_presence
    from compute.transport import KeyWallet, MinerClient
    from compute.validator.params import MinerTarget

    client = MinerClient(KeyWallet(Keypair.create_from_uri("//DistanceValidator")), timeout=60)
    target = MinerTarget(1, miner["hotkey"], f"127.0.0.1:{miner['port']}")
    try:
        return await far_presence(args, root, client, target, _base_params(args))
    finally:
        await client.aclose()


def _far_e2e_text(report: dict[str, Any]) -> str:
    lines = [json.dumps(window) for window in report["windows"]]
    lines.append(
        f"presence windows failed: {report.get('failed')} of {len(report['windows'])} "
        f"(the rise reached {report.get('risen_windows')}), wall {report.get('wall_s')} s"
    )
    return "\n".join(lines)


def _far_gpu(args: argparse.Namespace) -> int:
    from compute.lab.bench.far_gpu import far_gpu
    from compute.scoring import load_gpu_table

    if args.models:
        args.models = [name.strip() for name in args.models.split(",") if name.strip()]
    else:
        args.models = sorted(load_gpu_table().models)
    report = far_gpu(args)
    if args.json:
        print(json.dumps(report))
    else:
        for row in report["far_gpu"]:
            print(
                f"{row['model']:13s} chain {row['chain_s']:5.1f} s  bound {row['bound_s']:.2f} s  "
                f"+{row['transient_step_s'][0]:g}-{row['transient_step_s'][1]:g} s transient: "
                f"{row['transient_failed']}/{row['windows']} failed  +{row['sustained_step_s']:g} s sustained: "
                f"{row['sustained_failed']}/{row['windows']} failed  two chains credited twice: "
                f"{row['cheat_windows_two_credited']}/{row['windows']}"
            )
        print(
            f"honest windows failed: {report['honest_failed']}, cheat windows credited twice: "
            f"{report['cheats_credited_twice']}"
        )
    return 0 if report["honest_failed"] == 0 and report["cheats_credited_twice"] == 0 else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m compute bench distance", description=__doc__)
    parser.add_argument("--rounds", type=int, default=10, help="rounds per round trip (default 10)")
    parser.add_argument("--latencies", default="0,150,300", help="round trips in ms (default 0,150,300)")
    parser.add_argument("--jitter", type=float, default=0.2, help="relative jitter per chunk (default 0.2)")
    parser.add_argument("--share", type=float, default=0.02, help="--validator.distance_share (0.02)")
    parser.add_argument(
        "--min-timed", type=float, default=1.0, help="--validator.min_timed_s: shortest timed GEMM run (1)"
    )
    parser.add_argument(
        "--pace-gflops",
        type=float,
        default=0.0,
        help="the miner's GEMMs paced at this reference (--miner.pace_gflops): a device of fixed speed, "
        "so the figures show the validator's distance effect, not the shared CPU's noise (default 0 = off)",
    )
    parser.add_argument("--flood", action="store_true", help="flood a dashboard on the validator's loop")
    parser.add_argument("--clients", type=int, default=8, help="flooding clients with --flood (default 8)")
    parser.add_argument(
        "--parse-load", action="store_true", help="a thread parsing 64 MB of JSON over and over (the GIL)"
    )
    parser.add_argument("--m", type=int, default=256)
    parser.add_argument("--n", type=int, default=8192)
    parser.add_argument("--p", type=int, default=256)
    parser.add_argument("--miner-timeout", type=float, default=300.0)
    parser.add_argument("--json", action="store_true", help="print the figures as one JSON object")
    parser.add_argument(
        "--far-gpu",
        action="store_true",
        help="instead: honest GPU seats far away (a delay rise after the pings) and one device serving "
        "two chains, through the validator's chain plan and judges (compute.lab.bench.far_gpu)",
    )
    parser.add_argument("--models", default="", help="--far-gpu: table models, comma-separated (default all)")
    parser.add_argument("--windows", type=int, default=20, help="--far-gpu: windows per model and lane (20)")
    parser.add_argument("--rtt-ms", type=float, default=150.0, help="--far-gpu: the seat's round trip (150)")
    parser.add_argument(
        "--step", type=float, default=1.0, help="--far-gpu: the delay rise after the pings (1 s)"
    )
    parser.add_argument("--fraction", type=float, default=0.7, help="--far-gpu: the honest pace (0.7)")
    parser.add_argument("--seed", type=int, default=36, help="--far-gpu, --far-e2e: the seed")
    parser.add_argument(
        "--far-e2e",
        type=int,
        default=0,
        help="instead: this many presence windows of an honest far seat end to end, its way back rising "
        "by --step after the pings (compute.lab.bench.far_e2e)",
    )
    parser.add_argument(
        "--rise-after",
        default="2.5,6",
        help="--far-e2e: the rise begins this many s after the session opened, drawn in [a,b] (2.5,6)",
    )
    parser.add_argument("--device-fraction", type=float, default=0.0, help=argparse.SUPPRESS)
    parser.add_argument("--serve-miner", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.far_gpu:
        return _far_gpu(args)
    args.rise_after = [float(x) for x in args.rise_after.split(",")]
    if args.serve_miner:
        asyncio.run(_serve_miner(Path(args.serve_miner), args.pace_gflops, args.device_fraction))
        return 0
    args.latencies = [float(x) for x in args.latencies.split(",") if x.strip()]
    with tempfile.TemporaryDirectory(prefix="distance-bench-") as tmp:
        command = [sys.executable, "-m", "compute.lab.bench.distance", "--serve-miner", tmp]
        command += ["--pace-gflops", str(args.pace_gflops)]
        if args.far_e2e:
            command += ["--device-fraction", str(args.fraction)]
        child = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert child.stdout is not None and child.stdin is not None
        try:
            line = child.stdout.readline()
            if not line:
                print(f"distance-bench: the miner exited {child.wait(30)} before serving", file=sys.stderr)
                return 1
            runner = _far_e2e if args.far_e2e else _bench
            report = asyncio.run(runner(args, Path(tmp), json.loads(line)))
        finally:
            child.stdin.close()
            child.wait(30)
    if args.far_e2e:
        print(json.dumps(report) if args.json else _far_e2e_text(report))
        return 0 if report.get("failed", 1) == 0 else 1
    if args.json:
        print(json.dumps(report))
    else:
        for row in report["rows"]:
            print(json.dumps(row))
        print(f"false negatives: {report['false_negatives']}, wall {report['wall_s']} s")
    return 0 if report["false_negatives"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
