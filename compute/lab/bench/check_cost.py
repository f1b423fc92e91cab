"""What one validator's proof costs a miner: GPU-held seconds of the round's GEMM proofs.

``python -m compute bench check-cost --device cuda --json`` plans the round's challenges (two
timed runs of half the inner size per precision, fp16 and fp32) sized for ``--gpu`` at ``target_seconds`` exactly as the validator sizes them, starts
the self-contained PoG worker the validator ships over SSH, and times, on this clock: worker start
to its first answer (interpreter, torch import, CUDA init), each commit (the GEMM and its Merkle
commitment) and each opening. The sum is the GPU time one test holds a miner before the lease,
SSH and in-depth proofs; ``agreement-sim`` turns such figures into the validation load.

The run half (``run_plan``) uses the standard library only, so ``python3 check_cost.py run
PLAN.json`` also works on a bare GPU host that has torch but not this project's dependencies.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any


def make_plan(
    gpu: str = "H100 SXM", target_seconds: float = 3.0, m: int = 8192, p: int = 8192
) -> dict[str, Any]:
    """Worker source, challenges and opening requests, as the validator would size them for ``gpu``."""
    from compute.pog import choose_openings, new_challenge, worker_script
    from compute.scoring import load_gpu_table
    from compute.validator.params import RoundParams
    from compute.validator.proofs.sizing import CHUNK, RUNS, challenge_size, run_size

    table = load_gpu_table()
    model = table.models.get(table.resolve_name(gpu) or gpu)
    if model is None:
        raise ValueError(f"unknown GPU {gpu!r}; known: {', '.join(sorted(table.models))}")
    params = RoundParams(round_id=0, block=0, pog_m=m, pog_p=p, target_seconds=target_seconds)
    steps = []
    for precision in ("fp16", "fp32"):
        m_, n_, p_ = challenge_size(params, precision, model.tflops(precision))
        n_ = run_size(n_)
        for _ in range(RUNS):
            challenge = new_challenge(precision, m_, n_, p_, 1, chunk=min(CHUNK, n_))  # type: ignore[arg-type]
            request = choose_openings(challenge, params.rows_per_gpu, params.cols_per_row)
            steps.append(
                {
                    "precision": precision,
                    "flops": 2.0 * m_ * n_ * p_,
                    "challenge": challenge.model_dump(mode="json"),
                    "request": request.model_dump(mode="json"),
                }
            )
    source, _digest = worker_script()
    return {"gpu": gpu, "target_seconds": target_seconds, "worker": source, "steps": steps}


def _ask(proc: subprocess.Popen[str], message: dict[str, Any]) -> tuple[dict[str, Any], float]:
    assert proc.stdin is not None and proc.stdout is not None
    started = time.monotonic()
    proc.stdin.write(json.dumps(message) + "\n")
    proc.stdin.flush()
    line = proc.stdout.readline()
    elapsed = time.monotonic() - started
    answer = json.loads(line) if line else {"ok": False, "error": "worker closed its output"}
    if not answer.get("ok"):
        raise RuntimeError(f"worker refused {message.get('op')}: {answer.get('error')}")
    return answer, elapsed


def run_plan(plan: dict[str, Any], device: str = "cuda") -> dict[str, Any]:
    """Start the worker and time info, then commit + open per step (seconds on this clock)."""
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "worker.py"
        script.write_text(plan["worker"], encoding="utf-8")
        started = time.monotonic()
        proc = subprocess.Popen(
            [sys.executable, "-u", str(script), "--device", device],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            info, _ = _ask(proc, {"op": "info"})
            figures: dict[str, Any] = {"startup_s": round(time.monotonic() - started, 3)}
            for step in plan["steps"]:
                _, commit_s = _ask(proc, {"op": "commit", "challenge": step["challenge"]})
                _, open_s = _ask(proc, {"op": "open", "request": step["request"]})
                name = step["precision"]  # each precision's runs: held time adds up, the best run counts
                figures[f"{name}_commit_s"] = round(figures.get(f"{name}_commit_s", 0.0) + commit_s, 3)
                figures[f"{name}_open_s"] = round(figures.get(f"{name}_open_s", 0.0) + open_s, 3)
                tflops = round(step["flops"] / commit_s / 1e12, 2)
                figures[f"{name}_tflops"] = max(figures.get(f"{name}_tflops", 0.0), tflops)
            _ask(proc, {"op": "exit"})
        finally:
            if proc.poll() is None:
                proc.kill()
            proc.wait(timeout=30)
    figures["total_s"] = round(time.monotonic() - started, 3)
    figures["devices"] = [d.get("name") for d in info.get("devices", [])]
    figures["gpu_planned"] = plan["gpu"]
    figures["target_seconds"] = plan["target_seconds"]
    return figures


def script(argv: list[str] | None = None) -> int:
    """``run PLAN.json [--device D]`` (stdlib only) or ``plan OUT.json [--gpu NAME]``."""
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) >= 2 and args[0] in ("run", "plan"):
        if args[0] == "plan":
            gpu = args[args.index("--gpu") + 1] if "--gpu" in args else "H100 SXM"
            Path(args[1]).write_text(json.dumps(make_plan(gpu)), encoding="utf-8")
            return 0
        device = args[args.index("--device") + 1] if "--device" in args else "cuda"
        plan = json.loads(Path(args[1]).read_text(encoding="utf-8"))
        sys.stdout.write(json.dumps(run_plan(plan, device)) + "\n")
        return 0
    sys.stderr.write("usage: check_cost.py plan OUT.json [--gpu NAME] | run PLAN.json [--device cuda|cpu]\n")
    return 2


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(
        prog="python -m compute bench check-cost", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--gpu", default="H100 SXM", help="GPU table model to size the challenges for")
    parser.add_argument(
        "--device", choices=["cuda", "cpu"], default="cuda", help="worker device (default cuda)"
    )
    parser.add_argument(
        "--target-seconds", type=float, default=3.0, help="validator target_seconds (default 3)"
    )
    parser.add_argument("--json", action="store_true", help="one JSON object on stdout")
    args = parser.parse_args(argv)
    try:
        figures = run_plan(make_plan(args.gpu, args.target_seconds), args.device)
    except (ValueError, RuntimeError, OSError) as exc:
        print(f"check-cost: {exc}", file=sys.stderr)
        return 1
    if args.json:
        sys.stdout.write(json.dumps(figures) + "\n")
    else:
        for key, value in figures.items():
            sys.stdout.write(f"{key:>16}  {value}\n")
    return 0


if __name__ == "__main__":  # python3 check_cost.py run PLAN.json: a bare GPU host, stdlib only
    sys.exit(script())
