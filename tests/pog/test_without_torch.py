"""torch is the miner's GPU path only: without it the project imports, proves on numpy and verifies.

Each test runs in a fresh interpreter where ``import torch`` fails (``sys.modules['torch'] = None``),
as on a validator that never installed it.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from compute.pog import Commitment, Opening, choose_openings, new_challenge, verify, worker_script

ROOT = Path(__file__).resolve().parents[2]
HIDE_TORCH = "import sys; sys.modules['torch'] = None\n"


def run_python(code: str, cwd: Path, *flags: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *flags, "-c", HIDE_TORCH + code],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=cwd,
    )


@pytest.mark.slow
def test_round_through_the_public_api_runs_on_numpy_alone() -> None:
    code = textwrap.dedent("""
        from compute.pog import Prover, choose_openings, new_challenge, verify
        from compute.validator import check_miner  # the validator's whole stack imports too
        challenge = new_challenge("fp16", m=128, n=2048, p=128, gpu_count=2)
        prover = Prover("auto")
        assert prover.device == "cpu", prover.device
        commitment = prover.commit(challenge)
        request = choose_openings(challenge)
        verdict = verify(challenge, commitment, request, prover.open(request))
        assert verdict.ok, verdict.reasons
        print("verified without torch")
    """)
    done = run_python(code, ROOT)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "verified without torch" in done.stdout


def test_bare_worker_script_serves_a_round_without_torch(tmp_path: Path) -> None:
    source, _ = worker_script()
    (tmp_path / "worker.py").write_text(source)
    challenge = new_challenge("fp32", m=64, n=1024, p=64, gpu_count=1)
    request = choose_openings(challenge)
    lines = [
        {"op": "info"},
        {"op": "commit", "challenge": challenge.model_dump()},
        {"op": "open", "request": request.model_dump()},
        {"op": "exit"},
    ]
    runner = "sys.argv = ['worker.py', '--device', 'auto']; exec(open('worker.py').read())"
    done = subprocess.run(
        [sys.executable, "-I", "-u", "-c", HIDE_TORCH + runner],
        input="".join(json.dumps(line) + "\n" for line in lines),
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    info, committed, opened = (json.loads(line) for line in done.stdout.splitlines()[:3])
    assert info["ok"] and info["torch"] is None and info["cuda"] is False
    commitment = Commitment.model_validate(committed["commitment"])
    verdict = verify(challenge, commitment, request, Opening.model_validate(opened["opening"]))
    assert verdict.ok, verdict.reasons
